"""The operator's steps for a placed app (``targets``; see ``_placement`` for the design).

- **launch**: every target's request goes into the task log (masked), then
  ``Runner.run(app, placement=...)`` places the app and returns its stable handle;
- **reattach** (a retry that finds the handle): ``Runner.attach`` first, so that this task's
  status calls move the app; the core reattach rule then applies unchanged;
- **a move in deferred mode**: the trigger hands the app back (``placement_move``); the worker
  attaches, makes the move with one status call, says what changed and defers again on the
  same handle, its deadlines as they were, the log cursor starting on the new attempt.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from airflow_anylaunch._common import XCOM_UI_URL, status_dict, ui_url_xcom
from airflow_anylaunch._placement import due_move, push_placement
from airflow_anylaunch.exceptions import AnylaunchAppError, AnylaunchAppLost, AnylaunchInputError

if TYPE_CHECKING:
    from airflow.sdk.definitions.context import Context

    from airflow_anylaunch.hooks import AnylaunchSettings
    from airflow_anylaunch.operators import AnylaunchOperator
    from anylaunch.runner import Runner
    from anylaunch.runner.placement import Placement
    from anylaunch.specs.api import AppDef, AppStatus

__all__ = ["attach_placed", "find_placed_labelled", "placement_of", "resume_move", "run_placed"]

#: Status calls the worker makes to move a handed-back app before failing the task (its
#: retry reattaches and moves it), with a growing pause between them.
MOVE_TRIES = 3


def placement_of(op: AnylaunchOperator, runner: Runner, settings: AnylaunchSettings) -> Placement:
    """The rendered ``targets`` as a Placement, each target's cfg over the connection's
    (rendered strings cast to their options' types).

    Raises:
        InvalidSpecError: a target, its cfg or the budget cannot work (naming it)
    """
    from airflow_anylaunch._operator_args import typed_cfg
    from airflow_anylaunch._placement import resolve_targets
    from anylaunch.runner.placement import Placement

    def cfg_of(scheduler: str, cfg: Mapping[str, Any] | None, field: str) -> dict[str, Any]:
        return typed_cfg(runner, scheduler, settings.cfg_for(runner, scheduler), cfg, field)

    targets = resolve_targets(op.targets, runner, cfg_of)
    return Placement(targets, op.max_infra_retries, op.checkpoint_root or None)


def run_placed(op: AnylaunchOperator, app: AppDef, parent: str) -> str:
    """Places ``app`` (its requests already logged); returns the stable handle."""
    from anylaunch.runner.placed import NoTargetCanRunError
    from anylaunch.specs.errors import InvalidSpecError, UnknownSchedulerException

    assert op._runner is not None and op._placement is not None
    try:
        return op._runner.run(
            app, workspace=op.workspace, parent_run_id=parent, placement=op._placement
        )
    except NoTargetCanRunError as e:  # nothing submitted; a retry may find room
        failure = op._failure(AnylaunchAppError, op._mask(str(e)), None, None, "startup")
        raise failure from None
    except (InvalidSpecError, UnknownSchedulerException) as e:
        raise AnylaunchInputError(f"{type(e).__name__}: {e}") from e


def attach_placed(op: AnylaunchOperator, context: Context, handle: str) -> None:
    """Makes this task the driver of the placed app ``handle`` (a retry, or a deferred
    task resumed for a move): its status calls move the app from now on. An app whose
    record cannot be found is only watched (its status then says what is wrong)."""
    from anylaunch.specs.errors import InvalidSpecError

    assert op._runner is not None and op._placement is not None
    parent, label = op._parent_and_label(context)
    app = op._labelled_app(label)
    op._redact = op._redactor_for(app)
    try:
        op._runner.attach(handle, app, op._placement, op.workspace, parent)
    except InvalidSpecError as e:
        op.log.warning(
            "cannot drive placed anylaunch app %s from this task: %s",
            handle,
            op._mask(str(e)),
        )
        return
    op.log.info("this task drives placed anylaunch app %s (moves it if needed)", handle)


def find_placed_labelled(op: AnylaunchOperator, label: str) -> str | None:
    """The stable handle of this task instance's live placed app (Airflow < 3.3: found
    by the label its attempts carry, on any target), or None."""
    from airflow_anylaunch._placement import placed_handle_of
    from airflow_anylaunch._reattach import ENV_TASK_INSTANCE
    from anylaunch.runner.rediscover import find_live_apps

    assert op._runner is not None and op._placement is not None
    found: list[str] = []
    seen: set[str] = set()
    for target in op._placement.resolved_targets:
        if target.scheduler in seen:
            continue
        seen.add(target.scheduler)
        found += find_live_apps(op._runner, target.scheduler, ENV_TASK_INSTANCE, label, target.cfg)
    for concrete in reversed(found):  # the newest first
        handle = placed_handle_of(op._runner, concrete)
        if handle is not None:
            return handle
    return None


def resume_move(op: AnylaunchOperator, context: Context, event: Mapping[str, Any]) -> NoReturn:
    """The trigger handed the app back because a move is due: attach, move it, and defer
    again on the same handle (the next trigger says the history's new entries)."""
    from airflow_anylaunch._deferral import defer
    from anylaunch.specs.handles import is_placed

    handle = str(event.get("app_handle"))
    op.ui_url_pushed = True  # by the try that deferred
    op._scheduler_cfg = op._prepare(context)
    try:
        if op._placement is None or not is_placed(handle):
            raise AnylaunchAppError(
                f"anylaunch app {handle} must move ({event.get('message')}), but this "
                "task has no targets to move it between (was the DAG changed?)",
                handle,
            )
        attach_placed(op, context, handle)
        status = _move(op, handle)
        if due_move(status):  # not driven here (no record to attach to): never ping-pong
            raise AnylaunchAppLost(
                f"anylaunch app {handle} must move ({op._mask(due_move(status))}), but this "
                "task cannot move it (see the warning above)",
                handle,
            )
    except BaseException:
        op._close_runner()
        raise
    history = status.placement if status is not None else None
    if history is not None:
        current = history.current
        op.log.warning(
            "moved anylaunch app %s (%s): attempt %d on %s (%s) is %s",
            handle,
            op._mask(str(event.get("message") or "")),
            history.attempt,
            current.scheduler,
            current.handle,
            status.state.name if status is not None else "UNKNOWN",
        )
    result = status_dict(handle, status, op._mask)
    push_placement(context, result)
    context["ti"].xcom_push(key=XCOM_UI_URL, value=ui_url_xcom(result.get("ui_url")))
    clock = event.get("clock")
    attempt = history.attempt if history is not None else None
    defer(op, context, handle, clock=clock if isinstance(clock, Mapping) else {}, attempt=attempt)


def _move(op: AnylaunchOperator, handle: str) -> AppStatus | None:
    """One status call as the driver (it makes the due move), tried a few times."""
    assert op._runner is not None
    for tried in range(1, MOVE_TRIES + 1):
        try:
            return op._runner.status(handle)
        except Exception as e:
            error = op._mask(f"{type(e).__name__}: {e}")
            if tried == MOVE_TRIES:
                raise AnylaunchAppLost(
                    f"could not move placed anylaunch app {handle}: {error}", handle
                ) from None
            op.log.warning("moving placed anylaunch app %s failed (%s); again", handle, error)
            time.sleep(2.0**tried)
    raise AssertionError("unreachable")  # pragma: no cover
