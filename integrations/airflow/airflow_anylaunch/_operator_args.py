"""The checks on ``AnylaunchOperator``'s arguments: at DAG parse time (templated and XCom
values wait) and again when the task runs, after rendering."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_anylaunch._common import ON_KILL_ACTIONS, is_template

if TYPE_CHECKING:
    from airflow_anylaunch.operators import AnylaunchOperator

__all__ = ["as_list", "check_operator_args", "typed_cfg"]


def _is_xcom_arg(value: object) -> bool:
    from airflow_anylaunch._compat import XComArg

    return isinstance(value, XComArg)


def _later(value: object) -> bool:
    """True if Airflow resolves ``value`` at run time (checks wait until then)."""
    return is_template(value) or _is_xcom_arg(value)


def as_list(value: Any) -> Any:
    """A sequence argument as a list; anything else (a bare string too) as it is, for the
    argument checks to reject."""
    if value is None or isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        return value
    return list(value)


def _is_name(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _is_replica(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_operator_args(op: AnylaunchOperator, parse_time: bool) -> None:
    """Rejects arguments that cannot work; at parse time, templated values wait."""
    from anylaunch.specs.api import AppDef
    from anylaunch.specs.errors import InvalidSpecError

    def skip(value: object) -> bool:
        return parse_time and _later(value)

    if (op.app is None) == (op.component is None):
        raise InvalidSpecError(
            "app/component",
            {"app": op.app, "component": op.component},
            "give exactly one of them",
            "pass app=AppDef(...) (or a function returning one) or component='utils.echo'",
        )
    if op.app is not None and not (isinstance(op.app, AppDef) or callable(op.app)):
        raise InvalidSpecError(
            "app",
            type(op.app).__name__,
            "must be an AppDef or a callable returning one",
            "pass specs.AppDef(...) or a function that builds it",
        )
    from anylaunch.specs.arrays import ArraySpec

    if op.array is not None and not isinstance(op.array, ArraySpec):
        raise InvalidSpecError(
            "array",
            type(op.array).__name__,
            "must be an anylaunch.specs.ArraySpec or None",
            "pass e.g. array=ArraySpec(20, parallelism=4) or ArraySpec(len(grid), params=grid)",
        )
    component = op.component
    if (
        component is not None
        and not skip(component)
        and (not isinstance(component, str) or not component.strip())
    ):
        raise InvalidSpecError(
            "component", component, "must be a non-empty str", "e.g. 'utils.echo'"
        )
    if component is not None and not skip(component):  # a template is checked rendered
        from anylaunch.runner.engine_names import check_component_name

        check_component_name("component", component)
    args = op.component_args
    if args is not None and not skip(args):
        if op.component is None:
            raise InvalidSpecError(
                "component_args",
                args,
                "only applies to a component",
                "pass component='...' or drop component_args",
            )
        ok_mapping = isinstance(args, Mapping) and all(isinstance(k, str) for k in args)
        ok_list = isinstance(args, (list, tuple)) and all(isinstance(a, str) for a in args)
        if not (ok_mapping or ok_list):
            raise InvalidSpecError(
                "component_args",
                args,
                "must be a {param: value} dict or a list of str (as on the command line)",
                "pass e.g. {'msg': 'hi'} or ['--msg', 'hi']",
            )
    _check_placement_args(op, skip)
    for name in ("scheduler", "workspace", "session", "app_name", "image", "anylaunch_conn_id"):
        value = getattr(op, name)
        if value is None or skip(value):
            continue
        if not isinstance(value, str) or (name != "workspace" and not value.strip()):
            raise InvalidSpecError(name, value, "must be a non-empty str", "or leave it None")
    if op.scheduler is not None and not skip(op.scheduler):
        from anylaunch.runner.engine_names import check_scheduler_name

        check_scheduler_name("scheduler", op.scheduler)
    for name in ("cfg", "env"):
        value = getattr(op, name)
        if value is None or skip(value):
            continue
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise InvalidSpecError(
                name,
                value,
                "must be a dict with str keys",
                f"pass e.g. {name}={{'KEY': 'value'}}",
            )
    if isinstance(op.env, Mapping) and not skip(op.env):
        for key, val in op.env.items():
            if not isinstance(val, str):
                raise InvalidSpecError(
                    f"env[{key!r}]", val, "must be a str", "quote the value, e.g. '1'"
                )
        from anylaunch.runner.engine_names import check_env_names

        check_env_names("env", op.env)  # the names (Airflow renders only the values)
    if op.on_kill_action not in ON_KILL_ACTIONS:
        raise InvalidSpecError(
            "on_kill_action", op.on_kill_action, "is not an action", "use 'cancel' or 'keep'"
        )
    for name in (
        "wait_for_completion",
        "deferrable",
        "stream_logs",
        "retry_only_infrastructure_failures",
        "durable",
    ):
        if not isinstance(getattr(op, name), bool):
            raise InvalidSpecError(name, getattr(op, name), "must be a bool", "pass True or False")
    for name, ok, problem, example in (
        ("secret_env_names", _is_name, "must be a list of env names", "['DB_URL']"),
        ("log_roles", _is_name, "must be a list of role names", "['trainer']"),
        ("log_replicas", _is_replica, "must be a list of replica ids >= 0", "[0]"),
    ):
        value = getattr(op, name)
        if value is not None and not (isinstance(value, list) and all(map(ok, value))):
            raise InvalidSpecError(name, value, problem, f"e.g. {name}={example}")


def _check_placement_args(op: AnylaunchOperator, skip: Any) -> None:
    """``targets``, ``max_infra_retries`` and ``checkpoint_root``, and what they exclude."""
    from airflow_anylaunch._placement import check_targets
    from anylaunch.runner.placement import MAX_INFRA_RETRIES
    from anylaunch.schedulers import get_scheduler_factories
    from anylaunch.specs.errors import InvalidSpecError

    placed = op.targets is not None
    if placed:
        check_targets(op.targets, skip, lambda: list(get_scheduler_factories()))
        for name, fix in (
            ("scheduler", "drop scheduler: the targets name the schedulers"),
            ("cfg", "give each target its cfg: {'scheduler': 'slurm', 'cfg': {...}}"),
        ):
            if getattr(op, name) is not None:  # the value only by type: a cfg may hold secrets
                raise InvalidSpecError(
                    f"{name}/targets",
                    type(getattr(op, name)).__name__,
                    f"give {name} or targets, not both",
                    fix,
                )
        if op.wait_for_completion is False:
            raise InvalidSpecError(
                "wait_for_completion",
                False,
                "must be True with targets: only the waiting task can move the app between "
                "its targets",
                "keep wait_for_completion=True, or pass scheduler= (one target) instead",
            )
    retries = op.max_infra_retries
    if (
        isinstance(retries, bool)
        or not isinstance(retries, int)
        or not 0 <= retries <= MAX_INFRA_RETRIES
    ):
        raise InvalidSpecError(
            "max_infra_retries",
            retries,
            f"must be an int in 0..{MAX_INFRA_RETRIES}",
            "pass e.g. 2 (relaunches after a node loss or preemption)",
        )
    root = op.checkpoint_root
    if root is not None and not skip(root) and (not isinstance(root, str) or not root.strip()):
        raise InvalidSpecError(
            "checkpoint_root", root, "must be a non-empty fsspec URL", "e.g. 's3://bucket/ckpt'"
        )
    for name, value in (("max_infra_retries", retries or None), ("checkpoint_root", root)):
        if value is not None and not placed:
            raise InvalidSpecError(
                name, value, "only applies with targets", "pass targets=[...] or drop it"
            )


def typed_cfg(
    runner: Any, scheduler: str, base: Mapping[str, Any], cfg: Mapping[str, Any] | None, field: str
) -> dict[str, Any]:
    """``base`` (e.g. the connection's cfg) with ``cfg`` over it, each rendered string value
    cast to its option's type (a template renders to a str).

    Raises:
        InvalidRunConfigException: a value does not cast, naming ``field[key]``
    """
    from anylaunch.specs.errors import InvalidRunConfigException

    opts = runner.scheduler_run_opts(scheduler)
    out = dict(base)
    for key, value in (cfg or {}).items():
        opt = opts.get(key)
        if isinstance(value, str) and opt is not None and opt.opt_type is not str:
            try:
                value = opt.cast_to_type(value)
            except (TypeError, ValueError) as e:
                raise InvalidRunConfigException(
                    f"{field}[{key!r}]", value, str(e), f"pass a {opt.opt_type} value"
                ) from None
        out[key] = value
    return out
