"""Ops that launch an anylaunch app and see it through: ``anylaunch_op`` and a factory for
named ops with a fixed app or component.

>>> import dagster as dg
>>> from dagster_anylaunch import AnylaunchResource, anylaunch_op
>>> @dg.job(resource_defs={"anylaunch": AnylaunchResource(poll_interval_s=1)})
... def echo_job():
...     anylaunch_op()
>>> run_config = {"ops": {"anylaunch_op": {"config": {"component": "utils.echo",
...                                                   "component_args": ["--msg", "hi"]}}}}
>>> dg.validate_run_config(echo_job, run_config)["ops"]["anylaunch_op"]["config"]["component"]
'utils.echo'

``echo_job.execute_in_process(run_config=run_config)`` then launches ``utils.echo`` on
local_cwd, streams ``echo/0 hi`` into the run's log and outputs the app's final status.
"""

# No `from __future__ import annotations` here: Dagster reads the `config` parameter's
# annotation at runtime to find the op's config schema.

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dagster as dg
from pydantic import Field, field_validator

from anylaunch.runner.engine_names import check_component_name, check_scheduler_name
from anylaunch.specs.api import AppDef, AppStatus
from anylaunch.specs.checks import check_type
from anylaunch.specs.errors import AnylaunchError, InvalidSpecError
from anylaunch.specs.runopts import CfgVal
from dagster_anylaunch._lifecycle import AnylaunchRun, AppWatch, Context
from dagster_anylaunch.placement import AnylaunchTarget, targets_as_config
from dagster_anylaunch.resources import AnylaunchResource, ComponentArgs

__all__ = ["AnylaunchConfigError", "AnylaunchOpConfig", "anylaunch_op", "build_anylaunch_op"]

#: Resource key the ops and assets look the AnylaunchResource up under by default.
DEFAULT_RESOURCE_KEY = "anylaunch"


class AnylaunchConfigError(dg.Failure, AnylaunchError):
    """A name in an op's or asset's config cannot work: raised as the config is built, in
    Python or by the step from run config, where it fails the step without retries.

    Not a ``ValueError``: pydantic would turn it into a validation error, which Dagster
    retries. ``field`` and ``value`` are those of the ``InvalidSpecError`` it carries.
    """

    def __init__(self, error: InvalidSpecError) -> None:
        super().__init__(description=str(error), allow_retries=False)
        self.field, self.value = error.field, error.value


def _checked_name(check: Callable[[str, object], str], field: str, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return check(field, value)
    except InvalidSpecError as e:
        raise AnylaunchConfigError(e) from e


class AnylaunchOpConfig(dg.Config):
    """Run-time config of the anylaunch ops and assets (all optional).

    >>> AnylaunchOpConfig(component="utils.echo", component_args=["--msg", "hi"]).component
    'utils.echo'
    """

    component: str | None = Field(
        default=None,
        description="Component to launch, e.g. utils.echo or path/to/file.py:fn (replaces "
        "the app or component the op was built with).",
    )
    component_args: list[str] = Field(
        default_factory=list,
        description='The component\'s arguments as on the command line, e.g. ["--msg", "hello"].',
    )
    component_params: dict[str, Any] = Field(
        default_factory=dict,
        description='Or the component\'s arguments by parameter name, e.g. {"msg": "hello"} '
        "(a list value of the *args parameter goes after --). Not together with component_args.",
    )
    scheduler: str | None = Field(
        default=None, description="Scheduler to launch on (replaces the resource's)."
    )
    cfg: dict[str, Any] = Field(
        default_factory=dict,
        description="Run options merged over the op's and the resource's (these win).",
    )
    targets: list[AnylaunchTarget] | None = Field(
        default=None,
        description="Place the app on these targets {scheduler, cfg, startup_timeout}, in "
        "order, instead of one scheduler (replace the op's and the resource's scheduler or "
        "targets). Not together with scheduler or cfg.",
    )
    max_infra_retries: int | None = Field(
        default=None,
        description="With targets: relaunches after the platform lost the app (default: the "
        "resource's).",
    )
    checkpoint_root: str | None = Field(
        default=None,
        description="With targets: fsspec URL of the placement record and "
        "ANYLAUNCH_CHECKPOINT_URL (default: the resource's).",
    )
    workspace: str | None = Field(
        default=None,
        description="Workspace of the first role, e.g. '.' ('' disables the role's workspace).",
    )
    reattach: bool = Field(
        default=True,
        description="On a retry or from-failure re-execution, reattach to the app an earlier "
        "attempt launched if it is still running or succeeded (False: always launch anew, and "
        "record no launch for a retry to find).",
    )

    # a typo fails as the config is built (Definitions, or the step's start), not at launch
    @field_validator("component")
    @classmethod
    def _known_component(cls, value: str | None) -> str | None:
        return _checked_name(check_component_name, "component", value)

    @field_validator("scheduler")
    @classmethod
    def _known_scheduler(cls, value: str | None) -> str | None:
        return _checked_name(check_scheduler_name, "scheduler", value)


def _check_factory_args(
    app: AppDef | None,
    component: str | None,
    component_args: ComponentArgs | None,
    cfg: Mapping[str, CfgVal] | None,
    resource_key: str,
    targets: Sequence[Any] | None = None,
    scheduler: str | None = None,
) -> None:
    if targets is not None:
        from dagster_anylaunch.placement import check_one_way

        targets_as_config("", targets)
        check_one_way("", targets, scheduler, cfg)
    if app is not None:
        check_type("app", app, AppDef, "must be an AppDef", "pass AppDef(...)")
    if component is not None:
        check_component_name("component", component)
    if scheduler is not None:
        check_scheduler_name("scheduler", scheduler)
    if app is not None and component is not None:
        raise InvalidSpecError(
            "app/component",
            f"app={app.name!r}, component={component!r}",
            "give either an AppDef or a component, not both",
            "drop one of them",
        )
    ok_mapping = isinstance(component_args, Mapping) and all(
        isinstance(k, str) for k in component_args
    )
    ok_list = isinstance(component_args, Sequence) and not isinstance(component_args, str)
    if component_args is not None and not (
        ok_mapping or (ok_list and all(isinstance(a, str) for a in component_args))
    ):
        raise InvalidSpecError(
            "component_args",
            component_args,
            "must be a list of str (as on the command line) or a {param: value} dict",
            "e.g. ['--msg', 'hi'] or {'msg': 'hi'}",
        )
    if component_args and component is None:
        raise InvalidSpecError(
            "component_args",
            component_args,
            "only applies together with component",
            "pass component='utils.echo' (or build the AppDef with its arguments)",
        )
    if cfg is not None and not isinstance(cfg, Mapping):
        raise InvalidSpecError("cfg", cfg, "must be a mapping of run options", "pass a dict")
    if not isinstance(resource_key, str) or not resource_key.isidentifier():
        raise InvalidSpecError(
            "resource_key", resource_key, "must be a Python identifier", "e.g. 'anylaunch'"
        )


def _frozen(component_args: ComponentArgs | None) -> ComponentArgs | None:
    """A copy the caller cannot change after building the op."""
    if component_args is None:
        return None
    return dict(component_args) if isinstance(component_args, Mapping) else list(component_args)


def _check_op_args(name: object, scheduler: object, retry_policy: object) -> None:
    """What Dagster or the launch would reject later, named as our arguments."""
    import re

    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise InvalidSpecError(
            "name", name, "is not a Dagster op name (letters, digits, '_')", "e.g. 'train_model'"
        )
    if scheduler is not None:
        check_scheduler_name("scheduler", scheduler)
    if retry_policy is not None and not isinstance(retry_policy, dg.RetryPolicy):
        raise InvalidSpecError(
            "retry_policy",
            retry_policy,
            "must be a dagster.RetryPolicy",
            "pass dg.RetryPolicy(max_retries=2)",
        )


def launch_for_step(
    context: Context,
    config: AnylaunchOpConfig,
    resource_key: str,
    app: AppDef | None,
    component: str | None,
    component_args: ComponentArgs | None,
    scheduler: str | None,
    cfg: Mapping[str, CfgVal] | None,
    targets: Sequence[Any] | None = None,
) -> AnylaunchRun:
    """What the ops and assets do: pick the app from config and factory arguments, then run
    it with the resource under ``resource_key``. Config's ``targets`` or ``scheduler``
    replace the factory's (and its cfg), which replace the resource's."""
    resource = getattr(context.resources, resource_key, None)
    if not isinstance(resource, AnylaunchResource):
        raise dg.Failure(
            description=(
                f"resource {resource_key!r} must be an AnylaunchResource, got "
                f"{type(resource).__name__}. Fix: pass resources={{{resource_key!r}: "
                "AnylaunchResource(...)}} to Definitions (or execute_in_process/materialize)"
            ),
            allow_retries=False,
        )
    target: AppDef | str
    args: ComponentArgs | None = None
    if config.component_args and config.component_params:
        raise dg.Failure(
            description=str(
                InvalidSpecError(
                    "component_params",
                    sorted(config.component_params),
                    "component_args is set too: give the arguments one way",
                    "keep component_args (CLI-style) or component_params (by name)",
                )
            ),
            allow_retries=False,
        )
    given: ComponentArgs = config.component_params or config.component_args
    if config.component:
        target, args = config.component, given
    elif app is not None:
        if given:
            raise dg.Failure(
                description=str(
                    InvalidSpecError(
                        "component_args",
                        given,
                        f"this op launches the AppDef {app.name!r}, which takes no arguments",
                        "leave component_args empty, or set component too",
                    )
                ),
                allow_retries=False,
            )
        target = app
    elif component is not None:
        target, args = component, given or component_args or []
    else:
        raise dg.Failure(
            description=str(
                InvalidSpecError(
                    "component",
                    None,
                    "there is no app to launch",
                    "set the config's component (e.g. 'utils.echo'), or build the op with "
                    "build_anylaunch_op(name, app=...) or component=...",
                )
            ),
            allow_retries=False,
        )
    if config.targets is not None:  # they replace the factory's scheduler (and its cfg)
        targets, scheduler, cfg = config.targets, None, None
    elif config.scheduler is not None:
        targets = None
    settings, resolved = resource._step_request(
        target,
        args,
        config.scheduler or scheduler,
        {**(cfg or {}), **config.cfg},
        targets=targets,
        max_infra_retries=config.max_infra_retries,
        checkpoint_root=config.checkpoint_root,
        owner="AnylaunchOpConfig",  # the factory's arguments were checked when it built
    )
    watch = AppWatch(context, settings, reattach=config.reattach)
    return watch.run(resolved, workspace=config.workspace)


def _fixed_launch(
    app: AppDef | None,
    component: str | None,
    component_args: ComponentArgs | None,
    scheduler: str | None,
    cfg: Mapping[str, CfgVal] | None,
    resource_key: str,
    targets: Sequence[Any] | None = None,
) -> Callable[[Context, AnylaunchOpConfig], AnylaunchRun]:
    """What an op or asset built by a factory runs: :func:`launch_for_step` with the factory's
    arguments, checked and copied (the caller may change its own afterwards)."""
    _check_factory_args(app, component, component_args, cfg, resource_key, targets, scheduler)
    fixed_args = _frozen(component_args)
    fixed_cfg = dict(cfg or {})
    fixed_targets = targets_as_config("", targets)

    def launch(context: Context, config: AnylaunchOpConfig) -> AnylaunchRun:
        return launch_for_step(
            context,
            config,
            resource_key,
            app,
            component,
            fixed_args,
            scheduler,
            fixed_cfg,
            fixed_targets,
        )

    return launch


def _default_description(app: AppDef | None, component: str | None) -> str:
    """The description of an op or asset built without one: what it launches."""
    what = app.name if app is not None else component
    return f"Launches {what} with anylaunch" if what else "Launches an app with anylaunch"


def build_anylaunch_op(
    name: str,
    app: AppDef | None = None,
    *,
    component: str | None = None,
    component_args: ComponentArgs | None = None,
    scheduler: str | None = None,
    cfg: Mapping[str, CfgVal] | None = None,
    resource_key: str = DEFAULT_RESOURCE_KEY,
    description: str | None = None,
    tags: Mapping[str, str] | None = None,
    retry_policy: dg.RetryPolicy | None = None,
    targets: Sequence[Any] | None = None,
) -> dg.OpDefinition:
    """Builds an op named ``name`` that launches an app and sees it through.

    The op logs the dryrun request, launches the app, streams its logs into the step's log,
    waits, and outputs the final :class:`~anylaunch.specs.AppStatus` (with handle, ui_url,
    state and duration as output metadata). A failed, cancelled or timed-out app fails the
    step with a ``dagster.Failure`` carrying handle, ui_url, error and the last log lines.
    Its :class:`AnylaunchOpConfig` can replace the component, scheduler and run options.

    >>> from anylaunch.components.utils import echo
    >>> op_def = build_anylaunch_op("say_hi", echo(msg="hi"), scheduler="local_cwd")
    >>> op_def.name, sorted(op_def.required_resource_keys)
    ('say_hi', ['anylaunch'])

    Args:
        name: the op's name
        app: the AppDef to launch
        component: or a component to launch, e.g. ``utils.echo``
        component_args: the component's arguments, ``["--msg", "hi"]`` or ``{"msg": "hi"}``
            (config can replace them)
        scheduler: replaces the resource's scheduler (config can replace it)
        cfg: run options merged over the resource's (config's win)
        resource_key: key of the AnylaunchResource
        description: the op's description
        tags: the op's tags
        retry_policy: Dagster retry policy of the op (a retry reattaches to a running app)
        targets: place the app on these targets (scheduler names or
            ``{scheduler, cfg, startup_timeout}``) instead of one scheduler (config can
            replace them); not together with ``scheduler`` or ``cfg``
    """
    launch = _fixed_launch(app, component, component_args, scheduler, cfg, resource_key, targets)
    _check_op_args(name, scheduler, retry_policy)

    @dg.op(
        name=name,
        description=description or _default_description(app, component),
        required_resource_keys={resource_key},
        out=dg.Out(AppStatus, description="The app's final status."),
        tags=dict(tags or {}),
        retry_policy=retry_policy,
    )
    def _anylaunch_op(
        context: dg.OpExecutionContext, config: AnylaunchOpConfig
    ) -> dg.Output[AppStatus]:
        result = launch(context, config)
        return dg.Output(result.status, metadata=result.metadata())

    return _anylaunch_op


#: An op that launches the component its config names (``config.component``).
anylaunch_op: dg.OpDefinition = build_anylaunch_op(
    "anylaunch_op",
    description="Launches the component named in its config with anylaunch.",
)
anylaunch_op.__doc__ = """Launches the component its config names and sees the app through.

The op needs an :class:`AnylaunchResource` under the ``anylaunch`` key. Its
:class:`AnylaunchOpConfig` names the component and its arguments and can replace the
resource's scheduler and run options. It logs the dryrun request, launches the app, streams
its logs into the step's log, waits, and outputs the app's final
:class:`~anylaunch.specs.AppStatus`; a failed, cancelled or timed-out app fails the step with
a ``dagster.Failure``. For an op with a fixed app or component, see :func:`build_anylaunch_op`.

Example:
    >>> import dagster as dg
    >>> from dagster_anylaunch import AnylaunchResource, anylaunch_op
    >>> anylaunch_op.name, sorted(anylaunch_op.required_resource_keys)
    ('anylaunch_op', ['anylaunch'])
    >>> @dg.job(resource_defs={"anylaunch": AnylaunchResource(scheduler="local_cwd")})
    ... def hello_job():
    ...     anylaunch_op()
    >>> config = {"component": "utils.echo", "component_params": {"msg": "hi"}}
    >>> checked = dg.validate_run_config(hello_job, {"ops": {"anylaunch_op": {"config": config}}})
    >>> checked["ops"]["anylaunch_op"]["config"]["component_params"]
    {'msg': 'hi'}

    ``hello_job.execute_in_process(run_config=...)`` with that config then launches
    ``utils.echo --msg hi`` on local_cwd and outputs its final status (state SUCCEEDED).
"""
