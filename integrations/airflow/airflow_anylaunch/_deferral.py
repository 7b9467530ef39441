"""The operator's deferral: hands the wait for an app to
:class:`~airflow_anylaunch.triggers.AnylaunchAppTrigger`, its deadlines made absolute."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from airflow_anylaunch._common import XCOM_APP_HANDLE, XCOM_UI_URL, seconds, ui_url_xcom

if TYPE_CHECKING:
    from airflow.sdk.definitions.context import Context

    from airflow_anylaunch.operators import AnylaunchOperator
    from anylaunch.runner.session import AppSession

__all__ = ["defer", "try_number"]


def try_number(context: Context) -> int | None:
    """The running try's number (None where the task instance has none, e.g. a bare test)."""
    number = getattr(context.get("ti"), "try_number", None)
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def defer(
    op: AnylaunchOperator,
    context: Context,
    handle: str,
    session: AppSession | None = None,
    *,
    clock: Mapping[str, Any] | None = None,
    attempt: int | None = None,
) -> NoReturn:
    """Hands the wait to the trigger, with the deadlines made absolute (they survive
    triggerer restarts). Without a ``session`` (a just-launched app, deferred without
    asking its scheduler first, as KubernetesPodOperator does) the clock starts now and
    ``ui_url`` is pushed empty, filled in at the end. ``clock``: the deadlines of the
    trigger that handed a placed app back for a move (``began``, ``started``,
    ``startup_deadline``, ``run_deadline``), kept as they were; ``attempt``: the placed
    app's attempt the trigger streams the logs of (its cursor starts there)."""
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    if session is None and clock is None:
        op._handle = handle
        ti = context["ti"]
        ti.xcom_push(key=XCOM_APP_HANDLE, value=handle)
        ti.xcom_push(key=XCOM_UI_URL, value=ui_url_xcom(None))  # the link reads it
        op.ui_url_pushed = True
    if session is not None:
        began, started = session.policy.began, session.policy.started
        startup_deadline = session.policy.startup_deadline
        run_deadline = session.policy.run_deadline
        last = session.status
        if attempt is None and last is not None and last.placement is not None:
            attempt = last.placement.attempt
    elif clock is not None:
        began = seconds("clock.began", clock.get("began")) or time.time()
        started = clock.get("started") is True
        startup_deadline = seconds("clock.startup_deadline", clock.get("startup_deadline"))
        run_deadline = seconds("clock.run_deadline", clock.get("run_deadline"))
    else:
        began, started = time.time(), False
        timeout = op.startup_timeout
        startup_deadline = None if timeout is None else began + timeout
        run_deadline = None
    if op.execution_timeout is not None:
        # the same deadline Airflow gives the trigger; ours fires first and cancels the app
        start = getattr(context["ti"], "start_date", None)
        begin = start.timestamp() if start is not None else began
        ends = begin + op.execution_timeout.total_seconds()
        run_deadline = ends if run_deadline is None else min(run_deadline, ends)
    trigger = AnylaunchAppTrigger(
        app_handle=handle,
        poll_interval=op.poll_interval,
        stream_logs=op.stream_logs,
        log_roles=op.log_roles,
        log_replicas=op.log_replicas,
        # once started, the startup deadline is moot and the run deadline is fixed
        startup_deadline=None if started else startup_deadline,
        run_deadline=run_deadline,
        cancel_on_kill=op.on_kill_action == "cancel",
        run_timeout=None if started else op.run_timeout,
        secret_env_names=op.secret_env_names,
        attempt=attempt,
        # the triggerer pushes the return value itself when it ends the task; without
        # do_xcom_push there must be none, so the task resumes here as before
        end_from_trigger=bool(op.do_xcom_push),
        try_number=try_number(context),
    )
    op.log.info("deferring: the triggerer waits for anylaunch app %s", handle)
    op._close_runner()
    op.defer(trigger=trigger, method_name="execute_complete")
