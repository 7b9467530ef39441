"""Jinja templating inside an AppDef, the way KubernetesPodOperator templates ``arguments``
and ``env_vars``: the app name and each role's image, entrypoint, args and env values.

The operator's own Jinja environment renders each string, so ``render_template_as_native_obj``
applies: a native number or boolean becomes its text (a process argument is text); a native
list, dict or None is an error naming the field, since it cannot be one argument.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from airflow_anylaunch.operators import AnylaunchOperator
    from anylaunch.specs.api import AppDef

T = TypeVar("T", bound="AnylaunchOperator")

__all__ = ["render_appdef", "rendered_copy", "sample_context"]


def _text(value: Any, field: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return str(value)
    from anylaunch.specs.errors import InvalidSpecError

    raise InvalidSpecError(
        field,
        type(value).__name__,
        "rendered to a value that is not text",
        "make the template render a str (e.g. '{{ x | join(\" \") }}' for a list)",
    )


def render_appdef(app: AppDef, render: Callable[[Any], Any]) -> AppDef:
    """Returns a copy of ``app`` whose templated fields went through ``render``.

    Rendered: the app name and, per role, ``image``, ``entrypoint``, each of ``args`` and each
    env value (names stay literal, as Airflow renders a dict's values only). The copy is built
    through the AppDef and Role constructors, so a rendered value that is not a valid name is
    rejected there.

    >>> from anylaunch.specs.api import AppDef, Role
    >>> app = AppDef("job", [Role("r", image="img", entrypoint="echo", args=["{x}"], env={"K": "{x}"})])
    >>> out = render_appdef(app, lambda v: v.replace("{x}", "42") if isinstance(v, str) else v)
    >>> out.roles[0].args, out.roles[0].env, app.roles[0].args
    (['42'], {'K': '42'}, ['{x}'])
    """
    roles = []
    for i, role in enumerate(app.roles):
        where = f"app.roles[{i}]"
        roles.append(
            dataclasses.replace(
                role,
                image=_text(render(role.image), f"{where}.image"),
                entrypoint=_text(render(role.entrypoint), f"{where}.entrypoint"),
                args=[_text(render(a), f"{where}.args[{j}]") for j, a in enumerate(role.args)],
                env={k: _text(render(v), f"{where}.env[{k!r}]") for k, v in role.env.items()},
            )
        )
    return dataclasses.replace(app, name=_text(render(app.name), "app.name"), roles=roles)


def sample_context(task: Any, logical_date: datetime.datetime) -> dict[str, Any]:
    """The template context of a manual run of ``task`` at ``logical_date``, for a dry run:
    dates, ids, params and macros, but no task instance and no API server (so ``var``,
    ``conn`` and ``ti`` are missing, and a template using them fails naming them)."""
    try:
        from airflow.sdk.execution_time.context import MacrosAccessor

        macros: Any = MacrosAccessor()
    except ImportError:  # Airflow 2: the context's ``macros`` is the module itself
        import airflow.macros

        macros = airflow.macros
    if logical_date.tzinfo is None:
        logical_date = logical_date.replace(tzinfo=datetime.timezone.utc)
    ds = logical_date.strftime("%Y-%m-%d")
    ts = logical_date.isoformat()
    dag_id = task.dag.dag_id if task.has_dag() else "dry_run"
    run_id = f"manual__{ts}"
    return {
        "dag": task.dag if task.has_dag() else None,
        "task": task,
        "run_id": run_id,
        "logical_date": logical_date,
        "data_interval_start": logical_date,
        "data_interval_end": logical_date,
        "ds": ds,
        "ds_nodash": ds.replace("-", ""),
        "ts": ts,
        "ts_nodash": logical_date.strftime("%Y%m%dT%H%M%S"),
        "ts_nodash_with_tz": ts.replace("-", "").replace(":", ""),
        "task_instance_key_str": f"{dag_id}__{task.task_id}__{ds.replace('-', '')}",
        "macros": macros,
        "params": {key: task.params[key] for key in task.params},
    }


def rendered_copy(task: T, logical_date: datetime.datetime) -> T:
    """A copy of the operator ``task`` with its template fields rendered for a manual run at
    ``logical_date`` (see :func:`sample_context`) and its arguments checked again."""
    import copy

    import jinja2

    from airflow_anylaunch._operator_args import check_operator_args
    from airflow_anylaunch.exceptions import AnylaunchInputError

    if not isinstance(logical_date, datetime.datetime):
        raise AnylaunchInputError(
            f"logical_date={type(logical_date).__name__} is invalid: must be a datetime. "
            "Fix: pass e.g. datetime(2026, 1, 1)"
        )
    op = copy.copy(task)  # rendering replaces the template fields, never the task's own
    try:
        op.render_template_fields(sample_context(op, logical_date))  # type: ignore[arg-type]
    except jinja2.UndefinedError as e:
        raise AnylaunchInputError(
            f"a dry run cannot render a template of task {task.task_id}: {e}. Fix: only "
            "dates, ids, params and macros exist in a dry run; `airflow tasks test` renders "
            "var, conn and ti"
        ) from None
    check_operator_args(op, parse_time=False)
    return op
