"""``PipesAnylaunchClient``: launch an app on any scheduler as a Dagster Pipes session.

The Pipes bootstrap env is added to every role, so code inside the app can report
materializations, metadata, checks and logs back with ``dagster_pipes.open_dagster_pipes()``.
By default the context travels in that env (works on every scheduler) and messages come back
through a temporary file, which needs the orchestrator and the app to share a filesystem (the
local schedulers); for remote schedulers pass a ``message_reader`` that both sides reach (for
example dagster-aws's ``PipesS3MessageReader``).

>>> client = PipesAnylaunchClient()
>>> type(client.message_reader).__name__
'PipesTempFileMessageReader'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg
from dagster._core.definitions.resource_annotation import TreatAsResourceParam
from dagster_pipes import PipesExtras

from anylaunch.specs.api import AppDef, Workspace
from anylaunch.specs.checks import check_type
from anylaunch.specs.runopts import CfgVal
from dagster_anylaunch._lifecycle import AppWatch, Context
from dagster_anylaunch.resources import AnylaunchResource, ComponentArgs

__all__ = ["PIPES_CLIENT_NAME", "PipesAnylaunchClient"]

#: Launch-handle client name of apps launched through Pipes (never reattached to: the Pipes
#: message channel of an earlier attempt is gone with it).
PIPES_CLIENT_NAME = "anylaunch_pipes"


class PipesAnylaunchClient(dg.PipesClient, TreatAsResourceParam):
    """A Pipes client that launches anylaunch apps.

    Args:
        anylaunch: scheduler, run options, polling, timeouts and env of the apps (default
            ``AnylaunchResource()``: local_cwd); its ``EnvVar`` fields are resolved at launch
        context_injector: how the Pipes context reaches the app (default: in the env)
        message_reader: how messages come back (default: a temporary file, local only)
    """

    def __init__(
        self,
        anylaunch: AnylaunchResource | None = None,
        context_injector: dg.PipesContextInjector | None = None,
        message_reader: dg.PipesMessageReader | None = None,
    ) -> None:
        if anylaunch is not None:
            check_type(
                "anylaunch",
                anylaunch,
                AnylaunchResource,
                "must be an AnylaunchResource",
                "pass AnylaunchResource(scheduler=..., ...)",
            )
        for field, value, kind in (
            ("context_injector", context_injector, dg.PipesContextInjector),
            ("message_reader", message_reader, dg.PipesMessageReader),
        ):
            if value is not None:
                check_type(field, value, kind, f"must be a {kind.__name__}", "or leave it None")
        self.anylaunch = anylaunch if anylaunch is not None else AnylaunchResource()
        self.context_injector = context_injector or dg.PipesEnvContextInjector()
        self.message_reader = message_reader or dg.PipesTempFileMessageReader()

    @classmethod
    def _is_dagster_maintained(cls) -> bool:
        return False

    def run(  # type: ignore[override]
        self,
        *,
        context: Context,
        app: AppDef | str,
        component_args: ComponentArgs | None = None,
        extras: PipesExtras | None = None,
        scheduler: str | None = None,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        targets: Sequence[Any] | None = None,
        max_infra_retries: int | None = None,
        checkpoint_root: str | None = None,
    ) -> dg.PipesClientCompletedInvocation:
        """Launches the app in a Pipes session, streams its logs, waits for it, and returns
        what it reported (``.get_materialize_result()``, ``.get_results()``).

        The run being terminated cancels the app before the step ends.

        Args:
            context: the op's or asset's context
            app: an AppDef, or a component name such as ``utils.python``
            component_args: the component's arguments, ``["--msg", "hi"]`` or ``{"msg": "hi"}``
            extras: arbitrary data for the app (``context.extras`` inside it)
            scheduler: replaces the resource's scheduler
            cfg: merged over the resource's run options
            workspace: overrides the first role's workspace
            targets: place the app on these targets (scheduler names or
                ``{scheduler, cfg, startup_timeout}``) instead of the resource's scheduler or
                targets; every attempt gets the same Pipes bootstrap env (an attempt the
                platform lost may have reported some messages before it was relaunched)
            max_infra_retries: replaces the resource's (with targets)
            checkpoint_root: replaces the resource's (with targets)

        Raises:
            dagster.Failure: the app failed, was cancelled or timed out, or the request was
                invalid
        """
        # resolves EnvVar fields: this resource is not initialized by Dagster
        resource: AnylaunchResource = self.anylaunch.process_config_and_initialize()
        settings, resolved = resource._step_request(
            app,
            component_args,
            scheduler,
            cfg,
            targets=targets,
            max_infra_retries=max_infra_retries,
            checkpoint_root=checkpoint_root,
        )
        with dg.open_pipes_session(
            # the op view of an asset's context has everything Pipes needs, without the
            # deprecation warnings Dagster's own Pipes code triggers on AssetExecutionContext
            context=context.op_execution_context,
            context_injector=self.context_injector,
            message_reader=self.message_reader,
            extras=extras,
        ) as session:
            watch = AppWatch(
                context,
                settings,
                client_name=PIPES_CLIENT_NAME,
                reattach=False,  # a new Pipes session each attempt: its app is new too
                record_launch=True,  # Dagster's own record of the Pipes session's launch
            )
            result = watch.run(
                resolved, extra_env=session.get_bootstrap_env_vars(), workspace=workspace
            )
        metadata: dict[str, Any] = dict(result.metadata())
        return dg.PipesClientCompletedInvocation(session, metadata=metadata)
