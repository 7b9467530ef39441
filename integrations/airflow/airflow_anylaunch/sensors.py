"""``AnylaunchAppSensor``: waits for an app launched elsewhere (usually by an upstream task).

Succeeds when the app SUCCEEDED (returning its final status), fails when it ended FAILED or
CANCELLED or does not exist, with the core failure summary (secrets masked). An array app is
one sensor: its state is the array rule's (``min_success_ratio``), a failure names the failed
indices, and the per-index outcomes go to XCom (``array``) whatever the end. Works in ``poke``, ``reschedule`` and
deferrable modes; ``soft_fail`` turns a failure into a skip. The sensor does not own the app:
killing the sensor never cancels it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_anylaunch._arrays import with_array_summary
from airflow_anylaunch._common import (
    check_handle,
    is_template,
    register_secrets,
    status_dict,
)
from airflow_anylaunch._compat import BaseSensorOperator, PokeReturnValue, conf
from airflow_anylaunch._outcome import push_outcome
from airflow_anylaunch.exceptions import AnylaunchInputError, AnylaunchSensorError
from airflow_anylaunch.links import AnylaunchArchiveLink

if TYPE_CHECKING:
    from airflow.sdk.definitions.context import Context

    from anylaunch.runner import Runner
    from anylaunch.runner.session import AppSession
    from anylaunch.specs.secrets import Redactor

__all__ = ["AnylaunchAppSensor"]


class AnylaunchAppSensor(BaseSensorOperator):
    """Waits for the app behind ``app_handle`` to end.

    What a poke concludes is the core lifecycle policy's
    (:class:`anylaunch.runner.watch.WatchPolicy`): a terminal app is done; an app its scheduler
    no longer knows is lost (the sensor fails); a failed status call is logged and poked again,
    until the policy's limit of failed calls in a row (10; counted within one worker slot: in
    ``reschedule`` mode each poke starts afresh, and the sensor's ``timeout`` bounds the wait)
    or at once for an error that retrying cannot fix. The sensor never cancels the app.

    Args:
        app_handle: ``{scheduler}://{session}/{app_id}``, e.g.
            ``"{{ ti.xcom_pull(task_ids='launch', key='app_handle') }}"`` - templated
        deferrable: wait in the triggerer (default: ``[operators] default_deferrable``)
        stream_logs: in deferrable mode, copy the app's log lines into the task log
        secret_env_names: env names whose values are secret besides those matching the
            built-in patterns: masked in the task log, failures and XCom
        poke_interval, timeout, mode, soft_fail, ...: as for any Airflow sensor

    Returns the app's final status dict (pushed as the XCom ``return_value``).
    """

    template_fields: Sequence[str] = ("app_handle",)
    ui_color = "#e4f0e8"
    operator_extra_links = (AnylaunchArchiveLink(),)

    def __init__(
        self,
        *,
        app_handle: str,
        deferrable: bool | None = None,
        stream_logs: bool = False,
        secret_env_names: Sequence[str] | None = None,
        poke_interval: float | timedelta = 30,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        from anylaunch.specs.errors import InvalidSpecError

        if not is_template(app_handle):
            check_handle("app_handle", app_handle)
        self.app_handle = app_handle
        if deferrable is None:
            deferrable = conf.getboolean("operators", "default_deferrable", fallback=False)
        for name, value in (("deferrable", deferrable), ("stream_logs", stream_logs)):
            if not isinstance(value, bool):
                raise InvalidSpecError(name, value, "must be True or False", "pass a bool")
        self.deferrable = deferrable
        self.stream_logs = stream_logs
        if secret_env_names is not None and (
            isinstance(secret_env_names, (str, bytes))
            or not isinstance(secret_env_names, Sequence)
            or not all(isinstance(n, str) and n.strip() for n in secret_env_names)
        ):
            raise InvalidSpecError(
                "secret_env_names",
                secret_env_names,
                "must be a list of env names",
                "e.g. secret_env_names=['DB_URL']",
            )
        self.secret_env_names = None if secret_env_names is None else list(secret_env_names)
        # what the pokes of this worker slot have seen (see the class docstring)
        self._runner: Runner | None = None
        self._session: AppSession | None = None

    def _handle(self) -> str:
        from anylaunch.specs.errors import InvalidSpecError

        try:
            return check_handle("app_handle", self.app_handle)
        except InvalidSpecError as e:
            raise AnylaunchInputError(f"{type(e).__name__}: {e}") from e

    def poke(self, context: Context) -> bool | PokeReturnValue:
        handle = self._handle()
        session = self._session
        if session is None:
            from anylaunch.runner import get_runner
            from anylaunch.runner.session import AppSession, logger_sink

            self._runner = get_runner()
            session = self._session = AppSession(
                self._runner,
                handle,
                sink=logger_sink(self.log),
                poll_interval=max(float(self.poke_interval), 0.1),
                cancel_on_timeout=False,
                cancel_on_failure=False,  # the sensor does not own the app
                secret_env_names=self.secret_env_names or (),
                learn_secrets=True,
                on_secrets=register_secrets,
                logs="off",
            )
        decision = session.step()
        session.emit()
        if decision.kind == "poll":
            return False
        outcome = session.outcome(decision)
        result = status_dict(handle, outcome.status, session.redactor)
        # an array's per-index outcomes, what its job tracked: whatever its end
        push_outcome(context, result, session.redactor)
        if not outcome.succeeded:  # failed, or lost: vanished, or its scheduler keeps failing
            message = with_array_summary(outcome.message, outcome.status)
            raise AnylaunchSensorError(message, handle, result)
        return PokeReturnValue(is_done=True, xcom_value=result)

    def execute(self, context: Context) -> Any:
        try:
            return self._execute(context)
        finally:
            runner, self._runner, self._session = self._runner, None, None
            if runner is not None:
                runner.close()

    def _execute(self, context: Context) -> Any:
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
                secret_env_names=self.secret_env_names,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def _secrets_of(self, handle: object) -> Redactor:
        """The app's secret env values (built-in names and ``secret_env_names``), as the
        pokes learn them: the trigger's event carries none. An app that cannot be described
        has none to learn."""
        from anylaunch.runner import get_runner
        from anylaunch.specs.secrets import Redactor, app_redactor

        if not isinstance(handle, str) or not handle:
            return Redactor()
        try:
            with get_runner() as runner:
                app = runner.describe(handle)
        except Exception as e:  # the outcome is pushed all the same
            self.log.warning("cannot read the env of %s to mask its secrets: %s", handle, e)
            return Redactor()
        return app_redactor(app, self.secret_env_names or ())

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Resumes after the trigger fired."""
        event = event or {}
        app_status = event.get("app_status")
        if isinstance(app_status, dict):
            push_outcome(context, app_status, self._secrets_of(event.get("app_handle")))
        if event.get("status") == "success":
            return event.get("app_status")
        raise AnylaunchSensorError(
            event.get("message") or f"anylaunch app {event.get('app_handle')}: {event!r}",
            event.get("app_handle"),
            event.get("app_status"),
        )
