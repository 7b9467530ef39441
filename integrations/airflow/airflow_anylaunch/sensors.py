"""``AnylaunchAppSensor``: waits for an app launched elsewhere (usually by an upstream task).

Succeeds when the app SUCCEEDED (returning its final status), fails when it ended FAILED or
CANCELLED or does not exist, with the app's message. Works in ``poke``, ``reschedule`` and
deferrable modes; ``soft_fail`` turns a failure into a skip. The sensor does not own the app:
killing the sensor never cancels it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue, conf

from airflow_anylaunch._common import (
    check_handle,
    is_template,
    status_dict,
)
from airflow_anylaunch.exceptions import AnylaunchInputError, AnylaunchSensorError

if TYPE_CHECKING:
    from airflow.sdk.definitions.context import Context

__all__ = ["AnylaunchAppSensor"]


class AnylaunchAppSensor(BaseSensorOperator):
    """Waits for the app behind ``app_handle`` to end.

    Args:
        app_handle: ``{scheduler}://{session}/{app_id}``, e.g.
            ``"{{ ti.xcom_pull(task_ids='launch', key='app_handle') }}"`` - templated
        deferrable: wait in the triggerer (default: ``[operators] default_deferrable``)
        stream_logs: in deferrable mode, copy the app's log lines into the task log
        poke_interval, timeout, mode, soft_fail, ...: as for any Airflow sensor

    Returns the app's final status dict (pushed as the XCom ``return_value``).
    """

    template_fields: Sequence[str] = ("app_handle",)
    ui_color = "#e4f0e8"

    def __init__(
        self,
        *,
        app_handle: str,
        deferrable: bool | None = None,
        stream_logs: bool = False,
        poke_interval: float | timedelta = 30,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        if not is_template(app_handle):
            check_handle("app_handle", app_handle)
        self.app_handle = app_handle
        if deferrable is None:
            deferrable = conf.getboolean("operators", "default_deferrable", fallback=False)
        for name, value in (("deferrable", deferrable), ("stream_logs", stream_logs)):
            if not isinstance(value, bool):
                from anylaunch.specs.errors import InvalidSpecError

                raise InvalidSpecError(name, value, "must be True or False", "pass a bool")
        self.deferrable = deferrable
        self.stream_logs = stream_logs

    def _handle(self) -> str:
        from anylaunch.specs.errors import InvalidSpecError

        try:
            return check_handle("app_handle", self.app_handle)
        except InvalidSpecError as e:
            raise AnylaunchInputError(f"{type(e).__name__}: {e}") from e

    def poke(self, context: Context) -> bool | PokeReturnValue:
        from anylaunch.runner import get_runner
        from anylaunch.runner.outcome import failure_summary
        from anylaunch.specs.api import AppState

        handle = self._handle()
        with get_runner() as runner:
            status = runner.status(handle)
        if status is None:
            raise AnylaunchSensorError(failure_summary(handle, None), handle)
        self.log.info("anylaunch app %s is %s", handle, status.state.name)
        if not status.is_terminal():
            return False
        result = status_dict(handle, status)
        if status.state != AppState.SUCCEEDED:
            raise AnylaunchSensorError(failure_summary(handle, status), handle, result)
        return PokeReturnValue(is_done=True, xcom_value=result)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        from airflow_anylaunch.triggers import AnylaunchAppTrigger

        done = self.poke(context)  # already over (or unknown): no need to defer
        if done:
            return done.xcom_value if isinstance(done, PokeReturnValue) else None
        self.defer(
            trigger=AnylaunchAppTrigger(
                app_handle=self._handle(),
                poll_interval=self.poke_interval if self.poke_interval > 0 else 1.0,
                stream_logs=self.stream_logs,
                cancel_on_kill=False,  # the sensor does not own the app
                cancel_on_timeout=False,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Resumes after the trigger fired."""
        event = event or {}
        if event.get("status") == "success":
            self.log.info("anylaunch app %s SUCCEEDED", event.get("app_handle"))
            return event.get("app_status")
        raise AnylaunchSensorError(
            event.get("message") or f"anylaunch app {event.get('app_handle')}: {event!r}",
            event.get("app_handle"),
            event.get("app_status"),
        )
