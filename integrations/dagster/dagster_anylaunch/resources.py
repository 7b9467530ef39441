"""``AnylaunchResource``: launch, watch, stream logs from and cancel anylaunch apps in Dagster.

A thin Dagster face on :class:`anylaunch.runner.Runner`: the resource holds the scheduler and
its run options, the session name, polling and timeouts, and env (including secrets) for the
apps; :meth:`AnylaunchResource.run` does a step's whole lifecycle.

>>> from anylaunch.components.utils import echo
>>> resource = AnylaunchResource(scheduler="local_cwd", poll_interval_s=1)
>>> print(resource.dryrun(echo(msg="hi")))  # doctest: +ELLIPSIS
local_cwd app echo-... (name: echo)
...
        [0] echo hi
...
"""

# No `from __future__ import annotations` here: Dagster reads this module's field annotations
# at runtime to build the resource's config schema.

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import dagster as dg
from pydantic import ConfigDict, Field, field_validator, model_validator

from anylaunch.runner import Runner, get_runner
from anylaunch.runner.placement import Placement
from anylaunch.runner.placement_input import (
    CHECKPOINT_ROOT_HELP,
    MAX_INFRA_RETRIES_HELP,
    TARGETS_HELP,
    placement_from_data,
)
from anylaunch.specs.api import AppDef, AppDryRunInfo, AppHandle, AppStatus, Workspace
from anylaunch.specs.checks import check_known_fields, check_seconds, check_session_name
from anylaunch.specs.errors import AnylaunchError, InvalidSpecError
from anylaunch.specs.runopts import CfgVal
from anylaunch.specs.secrets import mask_env
from dagster_anylaunch._lifecycle import (
    AnylaunchRun,
    AppWatch,
    Context,
    LaunchSettings,
    with_env,
)
from dagster_anylaunch.placement import (
    AnylaunchTarget,
    check_one_way,
    step_placement,
    targets_as_config,
)

__all__ = ["DEFAULT_SESSION_NAME", "AnylaunchResource"]

#: Session name of apps launched from Dagster (it appears in their handles).
DEFAULT_SESSION_NAME = "dagster"


#: A component's arguments: CLI-style (``["--msg", "hi"]``) or by name (``{"msg": "hi"}``).
ComponentArgs = Sequence[str] | Mapping[str, Any]


def to_app(
    app: AppDef | str, component_args: ComponentArgs | None = None, runner: Runner | None = None
) -> AppDef:
    """``app`` itself, or the AppDef of the component named ``app`` with its arguments
    (materialized by ``runner``, default: a runner of the default session, so that component
    defaults from ``.anylaunchconfig`` apply).

    >>> to_app("utils.echo", ["--msg", "hi"]).roles[0].args
    ['hi']
    >>> to_app("utils.echo", {"msg": "hi"}).roles[0].args
    ['hi']
    """
    if isinstance(app, AppDef):
        if component_args:
            raise InvalidSpecError(
                "component_args",
                component_args,
                "only applies to a component name, not to an AppDef",
                "pass the arguments to the component function that builds the AppDef",
            )
        return app
    if isinstance(app, str):
        if runner is None:
            with get_runner(DEFAULT_SESSION_NAME) as own:
                return own.materialize_component(app, component_args or [])
        return runner.materialize_component(app, component_args or [])
    raise InvalidSpecError(
        "app",
        type(app).__name__,
        "must be an AppDef or a component name",
        "pass specs.AppDef(...) or e.g. 'utils.echo' with component_args",
    )


class AnylaunchResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Launches anylaunch apps on a scheduler and follows them from Dagster ops and assets.

    Placement: with ``targets`` (instead of ``scheduler``) each app goes to the first target
    whose capacity is not "no", moves to the next when it cannot start there, and is
    relaunched (up to ``max_infra_retries`` times) when the platform loses it; its handle
    ``placement://...`` stays the same across attempts (docs: placement).

    Secrets: ``secret_env`` values (typically ``dagster.EnvVar("NAME")``, resolved when the
    resource is initialized) are set in every role's environment and masked as ``***`` in
    everything this integration logs. ``scheduler``, ``session_name`` and ``env`` values may
    be ``EnvVar`` s too (``cfg`` values may not: its values are not all strings).
    """

    # pydantic's validation errors quote the input (a secret_env value among it); this
    # module's own errors name the field and its (non-secret) value
    model_config = ConfigDict(hide_input_in_errors=True)

    scheduler: str | None = Field(
        default=None,
        description="Scheduler to launch on: local_cwd, local_docker, kubernetes, "
        "kubernetes_mcad, aws_batch, aws_sagemaker, slurm or lsf (default: local_cwd). Not "
        "together with targets.",
    )
    cfg: dict[str, Any] = Field(
        default_factory=dict,
        description="The scheduler's run options (`anylaunch runopts SCHEDULER` lists them); "
        "options in .anylaunchconfig fill in the rest.",
    )
    targets: list[AnylaunchTarget] | None = Field(
        default=None,
        description=TARGETS_HELP,
    )
    max_infra_retries: int = Field(
        default=0,
        description=MAX_INFRA_RETRIES_HELP,
    )
    checkpoint_root: str | None = Field(
        default=None,
        description=CHECKPOINT_ROOT_HELP,
    )
    session_name: str = Field(
        default=DEFAULT_SESSION_NAME,
        description="Session name: the middle part of every app handle "
        "{scheduler}://{session_name}/{app_id}.",
    )
    poll_interval_s: float = Field(
        default=10.0,
        description="Longest pause between status checks (polling backs off with jitter up to "
        "this). Logs stream as they are written regardless.",
    )
    startup_timeout_s: float | None = Field(
        default=None,
        description="Cancel and fail when the app has not started running within this many "
        "seconds of launch (stuck in the queue). None: wait indefinitely.",
    )
    run_timeout_s: float | None = Field(
        default=None,
        description="Cancel and fail when the app runs longer than this many seconds. None: "
        "no limit.",
    )
    cancel_timeout_s: float = Field(
        default=60.0,
        description="How long a terminated or timed-out step waits for its cancelled app to end.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables added to every role of every app.",
    )
    secret_env: dict[str, str] = Field(
        default_factory=dict,
        description="Like env, but the values are secrets (use EnvVar): masked in all logs and "
        "metadata.",
    )
    stream_logs: bool = Field(
        default=True,
        description="Stream every replica's log lines into the step's log while the app runs.",
    )
    log_tail_lines: int = Field(
        default=50,
        description="How many of the app's last log lines a failure's metadata carries.",
    )
    retry_only_infrastructure_failures: bool = Field(
        default=False,
        description="Let the step's retry policy retry only failures retrying can fix (a lost "
        "replica, node loss, preemption, an image pull or scheduling failure, a startup "
        "timeout); an app's own failure (non-zero exit, out of memory, run timeout) fails the "
        "step without retries. The category is in the failure's `failure_category` metadata.",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_unknown_fields(cls, data: Any) -> Any:
        # a misspelt field (shceduler=...) would otherwise be ignored and the app would run
        # somewhere else
        check_known_fields(cls.__name__, data, cls.model_fields)
        return data

    @field_validator("session_name")
    @classmethod
    def _session(cls, value: Any) -> Any:
        return value if isinstance(value, dg.EnvVar) else check_session_name("session_name", value)

    # "before": pydantic turns an EnvVar into a plain str (its name) before "after" validators
    @field_validator("scheduler", mode="before")
    @classmethod
    def _known_scheduler(cls, value: Any) -> Any:
        from anylaunch.runner.engine_names import check_scheduler_name

        # an EnvVar's value is only known once the resource is initialized (then this runs
        # again with the value)
        if value is not None and not isinstance(value, dg.EnvVar):
            check_scheduler_name("scheduler", value)
        return value

    @field_validator("env", "secret_env")
    @classmethod
    def _env_names(cls, value: dict[str, str], info: Any) -> dict[str, str]:
        from anylaunch.runner.engine_names import check_env_names

        check_env_names(info.field_name, value, secret=info.field_name == "secret_env")
        return value

    @field_validator("poll_interval_s", "cancel_timeout_s")
    @classmethod
    def _positive(cls, value: float, info: Any) -> float:
        return check_seconds(info.field_name, value, positive=True)

    @field_validator("startup_timeout_s", "run_timeout_s")
    @classmethod
    def _positive_or_none(cls, value: float | None, info: Any) -> float | None:
        return None if value is None else check_seconds(info.field_name, value, positive=True)

    @field_validator("targets", mode="before")
    @classmethod
    def _targets(cls, value: Any) -> Any:
        # scheduler names, mappings, Targets: one config form
        return targets_as_config("AnylaunchResource", value)

    @model_validator(mode="after")
    def _one_way(self) -> "AnylaunchResource":
        placed_only = {"max_infra_retries": self.max_infra_retries != 0}
        placed_only["checkpoint_root"] = self.checkpoint_root is not None
        check_one_way("AnylaunchResource", self.targets, self.scheduler, self.cfg, placed_only)
        if self.targets is not None:  # the budget's and the root's checks are the core's
            placement_from_data(
                "AnylaunchResource", self.targets, self.max_infra_retries, self.checkpoint_root
            )
        return self

    @field_validator("log_tail_lines")
    @classmethod
    def _tail(cls, value: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidSpecError("log_tail_lines", value, "must be an int >= 0", "e.g. 50")
        return value

    def __repr_args__(self) -> Any:
        # pydantic's repr and str show every field: never the values of secret env vars
        # (secret_env entirely; env where the name says secret), resolved or not
        for name, value in super().__repr_args__():
            if name == "secret_env" and isinstance(value, Mapping):
                value = mask_env(value, value.keys())
            elif name == "env" and isinstance(value, Mapping):
                value = mask_env(value, self.secret_env)
            yield name, value

    # --- helpers -----------------------------------------------------------------------

    def settings(
        self,
        scheduler: str | None = None,
        cfg: Mapping[str, CfgVal] | None = None,
        *,
        targets: Sequence[Any] | None = None,
        max_infra_retries: int | None = None,
        checkpoint_root: str | None = None,
        owner: str = "",
    ) -> LaunchSettings:
        """This resource's launch settings; ``scheduler`` replaces the resource's and ``cfg``
        is merged over the resource's ``cfg`` (its keys win). ``targets`` (with
        ``max_infra_retries`` and ``checkpoint_root``; None: the resource's) place the app
        instead: they replace the resource's scheduler or targets, and a target on the
        resource's scheduler gets the resource's ``cfg`` under its own. Errors name
        ``{owner}.field`` (``owner`` empty: the argument).
        """
        if cfg is not None and not isinstance(cfg, Mapping):
            raise InvalidSpecError("cfg", cfg, "must be a mapping of run options", "pass a dict")
        placement = self._placement(
            scheduler, cfg, targets, max_infra_retries, checkpoint_root, owner
        )
        if placement is not None:  # dryrun() shows the first target's request
            first = placement.resolved_targets[0]
            scheduler, run_cfg = first.scheduler, dict(first.cfg or {})
        else:
            scheduler = scheduler or self._scheduler()
            run_cfg = {**self.cfg, **(cfg or {})}
        return LaunchSettings(
            scheduler=scheduler,
            cfg=run_cfg,
            placement=placement,
            session_name=self.session_name,
            poll_interval_s=self.poll_interval_s,
            startup_timeout_s=self.startup_timeout_s,
            run_timeout_s=self.run_timeout_s,
            cancel_timeout_s=self.cancel_timeout_s,
            log_tail_lines=self.log_tail_lines,
            stream_logs=self.stream_logs,
            env=dict(self.env),
            secret_env=dict(self.secret_env),
            retry_only_infrastructure_failures=self.retry_only_infrastructure_failures,
        )

    def _scheduler(self) -> str:
        from anylaunch.schedulers import get_default_scheduler_name

        return self.scheduler or get_default_scheduler_name()

    def _placement(
        self,
        scheduler: str | None,
        cfg: Mapping[str, CfgVal] | None,
        targets: Sequence[Any] | None,
        max_infra_retries: int | None,
        checkpoint_root: str | None,
        owner: str,
    ) -> Placement | None:
        """The placement of a launch whose call gave these arguments (None: one scheduler)."""
        retries = self.max_infra_retries if max_infra_retries is None else max_infra_retries
        root = self.checkpoint_root if checkpoint_root is None else checkpoint_root
        if targets is not None:  # the call's targets replace the resource's scheduler
            check_one_way(owner, targets, scheduler, cfg)
            return step_placement(owner, targets, retries, root, self._scheduler(), self.cfg)
        placed_only = {
            "max_infra_retries": max_infra_retries is not None,
            "checkpoint_root": checkpoint_root is not None,
        }
        if scheduler is not None or self.targets is None:  # one scheduler
            check_one_way(owner, None, scheduler, cfg, placed_only)
            return None
        check_one_way(owner, self.targets, None, cfg)  # the resource's targets
        return step_placement("AnylaunchResource", self.targets, retries, root, "", {})

    def get_runner(self) -> Runner:
        """A new Runner for this resource's session (close it, or use ``with``)."""
        return get_runner(self.session_name)

    # --- one step at a time ------------------------------------------------------------

    def dryrun(
        self,
        app: AppDef | str,
        component_args: ComponentArgs | None = None,
        *,
        scheduler: str | None = None,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        parent_run_id: str | None = None,
        targets: Sequence[Any] | None = None,
    ) -> AppDryRunInfo[Any]:
        """The request :meth:`launch` would submit (no submission; print it to read it); a
        placed app's: the request for its first target (each attempt is dry-run when it is
        tried).

        Args:
            app: an AppDef, or a component name such as ``utils.echo``
            component_args: the component's arguments, ``["--msg", "hi"]`` or ``{"msg": "hi"}``
            scheduler: replaces the resource's scheduler
            cfg: merged over the resource's run options
            workspace: overrides the first role's workspace (``""`` disables it)
            parent_run_id: injected as ``ANYLAUNCH_PARENT_RUN_ID``
            targets: placement targets (replace the resource's scheduler or targets)
        """
        settings = self.settings(scheduler, cfg, targets=targets)
        env = {**settings.env, **settings.secret_env}
        with self.get_runner() as runner:
            resolved = to_app(app, component_args, runner)
            return runner.dryrun(
                with_env(resolved, env) if env else resolved,
                settings.scheduler,
                settings.cfg,
                workspace=workspace,
                parent_run_id=parent_run_id,
            )

    def launch(
        self,
        app: AppDef | str,
        component_args: ComponentArgs | None = None,
        *,
        scheduler: str | None = None,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        parent_run_id: str | None = None,
        targets: Sequence[Any] | None = None,
    ) -> AppHandle:
        """Submits the app and returns its handle at once (arguments as :meth:`dryrun`).

        With targets (the resource's or ``targets``) the app is placed: the handle is
        ``placement://...``, and moving the app to its next attempt needs a driver, a
        process holding the app (:meth:`run` is one; or ``Runner.attach``); ``status`` and
        ``wait`` here only follow it.

        Raises:
            anylaunch.runner.placed.NoTargetCanRunError: every target said no
        """
        settings = self.settings(scheduler, cfg, targets=targets)
        if settings.placement is None:
            info = self.dryrun(
                app,
                component_args,
                scheduler=scheduler,
                cfg=cfg,
                workspace=workspace,
                parent_run_id=parent_run_id,
            )
            with self.get_runner() as runner:
                return runner.schedule(info)
        env = {**settings.env, **settings.secret_env}
        with self.get_runner() as runner:
            resolved = to_app(app, component_args, runner)
            return runner.run(
                with_env(resolved, env) if env else resolved,
                workspace=workspace,
                parent_run_id=parent_run_id,
                placement=settings.placement,
            )

    def status(self, handle: AppHandle) -> AppStatus | None:
        """The app's status, or None if its scheduler does not know it."""
        with self.get_runner() as runner:
            return runner.status(handle)

    def wait(self, handle: AppHandle, timeout: float | None = None) -> AppStatus | None:
        """Blocks until the app ends (polling up to ``poll_interval_s`` apart).

        Raises:
            anylaunch.runner.AppWaitTimeoutError: ``timeout`` seconds passed first
        """
        with self.get_runner() as runner:
            return runner.wait(handle, wait_interval=self.poll_interval_s, timeout=timeout)

    def cancel(self, handle: AppHandle) -> None:
        """Requests cancellation and returns; a no-op for an unknown or finished app."""
        from anylaunch.runner.session import cancel_app

        with self.get_runner() as runner:
            cancel_app(handle, runner=runner)

    def log_lines(
        self,
        handle: AppHandle,
        role_name: str,
        k: int = 0,
        *,
        regex: str | None = None,
        should_tail: bool = False,
    ) -> Iterator[str]:
        """The log lines of replica ``k`` of ``role_name`` (each with its newline); with
        ``should_tail`` it follows the log until the app ends."""
        runner = self.get_runner()
        try:
            lines = runner.log_lines(handle, role_name, k, regex=regex, should_tail=should_tail)
        except BaseException:
            runner.close()
            raise
        return _closing(lines, runner)

    # --- the whole lifecycle -----------------------------------------------------------

    def run(
        self,
        context: Context,
        app: AppDef | str,
        component_args: ComponentArgs | None = None,
        *,
        scheduler: str | None = None,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        reattach: bool = True,
        targets: Sequence[Any] | None = None,
        max_infra_retries: int | None = None,
        checkpoint_root: str | None = None,
    ) -> AnylaunchRun:
        """Launches the app and sees it through, all inside the calling op or asset.

        Logs the dryrun request, launches (recording the handle as a launch-handle event and
        a run tag, unless ``reattach=False``), streams every replica's lines into
        ``context.log`` as they are written, waits with the startup/run timeouts, and returns
        the outcome. When the run is terminated the app is cancelled before the step ends.
        When a from-failure re-execution (or a retry of the step) finds the app an earlier
        attempt launched still running or succeeded, it reattaches to it instead of launching
        a duplicate.

        Args:
            context: the op's or asset's context
            app: an AppDef, or a component name such as ``utils.echo``
            component_args: the component's arguments, ``["--msg", "hi"]`` or ``{"msg": "hi"}``
            scheduler: replaces the resource's scheduler
            cfg: merged over the resource's run options
            workspace: overrides the first role's workspace (``""`` disables it)
            reattach: set False to always launch a new app (nor is the launch recorded for a
                retry to find: no launch-handle event, no run tag; e.g. an op fanning out
                hundreds of apps)
            targets: place the app on these targets (scheduler names or
                ``{scheduler, cfg, startup_timeout}``) instead of the resource's scheduler or
                targets; output metadata ``anylaunch/placement`` and ``anylaunch/attempt``
                say where it ran
            max_infra_retries: replaces the resource's (with targets)
            checkpoint_root: replaces the resource's (with targets)

        Raises:
            dagster.Failure: the app failed, was cancelled or timed out (metadata: handle,
                ui_url, final_state, error, last_log_lines), or the request was invalid
        """
        settings, resolved = self._step_request(
            app,
            component_args,
            scheduler,
            cfg,
            targets=targets,
            max_infra_retries=max_infra_retries,
            checkpoint_root=checkpoint_root,
        )
        return AppWatch(context, settings, reattach=reattach).run(resolved, workspace=workspace)

    def _step_request(
        self,
        app: AppDef | str,
        component_args: ComponentArgs | None,
        scheduler: str | None,
        cfg: Mapping[str, CfgVal] | None,
        *,
        targets: Sequence[Any] | None = None,
        max_infra_retries: int | None = None,
        checkpoint_root: str | None = None,
        owner: str = "",
    ) -> tuple[LaunchSettings, AppDef]:
        """The settings and the AppDef a step launches; an invalid request fails the step
        with a ``dagster.Failure`` that allows no retries (a bad request does not get better
        by retrying)."""
        try:
            settings = self.settings(
                scheduler,
                cfg,
                targets=targets,
                max_infra_retries=max_infra_retries,
                checkpoint_root=checkpoint_root,
                owner=owner,
            )
            with self.get_runner() as runner:
                return settings, to_app(app, component_args, runner)
        except AnylaunchError as e:
            redact = self.settings().redactor()
            raise dg.Failure(description=redact(f"invalid app: {e}"), allow_retries=False) from e


def _closing(lines: Any, runner: Runner) -> Iterator[str]:
    try:
        yield from lines
    finally:
        runner.close()
