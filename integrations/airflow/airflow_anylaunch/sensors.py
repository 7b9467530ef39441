"""``AnylaunchAppSensor``: waits for an app launched elsewhere (usually by an upstream task).

Succeeds when the app SUCCEEDED (returning its final status), fails when it ended FAILED or
CANCELLED or does not exist, with the core failure summary (secrets masked). Works in ``poke``, ``reschedule`` and
deferrable modes; ``soft_fail`` turns a failure into a skip. The sensor does not own the app:
killing the sensor never cancels it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_anylaunch._common import (
    check_handle,
    is_template,
    status_dict,
)
from airflow_anylaunch._compat import BaseSensorOperator, PokeReturnValue, conf
from airflow_anylaunch.exceptions import AnylaunchInputError, AnylaunchSensorError

if TYPE_CHECKING:
    from airflow.sdk.definitions.context import Context

    from anylaunch.runner import Runner
    from anylaunch.runner.watch import WatchPolicy
    from anylaunch.specs.api import AppStatus
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
        self._policy: WatchPolicy | None = None
        self._redact: Redactor | None = None
        self._state: str | None = None

    def _handle(self) -> str:
        from anylaunch.specs.errors import InvalidSpecError

        try:
            return check_handle("app_handle", self.app_handle)
        except InvalidSpecError as e:
            raise AnylaunchInputError(f"{type(e).__name__}: {e}") from e

    def _redactor(self, runner: Runner, handle: str) -> Redactor:
        """Masks the app's secret env values (read from its description once it can be);
        they are told to Airflow's own masker too."""
        from airflow_anylaunch._compat import mask_secret
        from anylaunch.specs.secrets import Redactor, secret_values

        if self._redact is None:
            try:
                app = runner.describe(handle)
            except Exception:  # asked again at the next poke; nothing to mask yet
                return Redactor()
            names = self.secret_env_names or ()
            values = [
                v for role in (app.roles if app else []) for v in secret_values(role.env, names)
            ]
            for value in values:
                mask_secret(value)
            self._redact = Redactor(values)
        return self._redact

    def poke(self, context: Context) -> bool | PokeReturnValue:
        import time

        from anylaunch.runner import get_runner
        from anylaunch.runner.outcome import failure_summary
        from anylaunch.runner.watch import Done, Poll, PollError, WatchPolicy

        handle = self._handle()
        if self._policy is None:
            self._policy = WatchPolicy(
                max(float(self.poke_interval), 0.1),
                handle=handle,
                cancel_on_timeout=False,
                cancel_on_failure=False,  # the sensor does not own the app
            )
        observation: AppStatus | PollError | None
        with get_runner() as runner:
            try:
                observation = runner.status(handle)
            except Exception as e:  # the policy decides whether poking again can help
                observation = PollError(e)
            redact = self._redactor(runner, handle)
        if isinstance(observation, PollError):
            self.log.warning(
                "status of anylaunch app %s failed (%d/%d in a row): %s",
                handle,
                self._policy.poll_errors + 1,
                self._policy.max_poll_errors,
                redact(f"{type(observation.error).__name__}: {observation.error}"),
            )
        elif observation is not None and observation.state.name != self._state:
            self._state = observation.state.name
            self.log.info("anylaunch app %s is %s", handle, self._state)
        decision = self._policy.observe(observation, time.time())
        if isinstance(decision, Poll):
            return False
        status = self._policy.last_status
        if not isinstance(decision, Done):  # lost: vanished, or its scheduler keeps failing
            text = failure_summary(handle, status, (), redact, headline=decision.message)
            raise AnylaunchSensorError(text, handle, status_dict(handle, status, redact))
        result = status_dict(handle, decision.status, redact)
        if not decision.succeeded:
            text = failure_summary(handle, decision.status, (), redact)
            raise AnylaunchSensorError(text, handle, result)
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
                secret_env_names=self.secret_env_names,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Resumes after the trigger fired."""
        event = event or {}
        if event.get("status") == "success":
            return event.get("app_status")
        raise AnylaunchSensorError(
            event.get("message") or f"anylaunch app {event.get('app_handle')}: {event!r}",
            event.get("app_handle"),
            event.get("app_status"),
        )
