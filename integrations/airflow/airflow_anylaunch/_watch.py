"""The sync wait of :class:`~airflow_anylaunch.operators.AnylaunchOperator`: a thin driver of
the core lifecycle policy (:class:`anylaunch.runner.watch.WatchPolicy`), run in the task.

Only the task's own thread logs (Airflow's task logger and its timeout signal live there):
reader threads (a core :class:`~anylaunch.runner.logs.LogPump`, one per replica) hand the app's
lines to a core :class:`~anylaunch.runner.lines.LineBuffer`, and the waiting thread logs them
between polls, one record per line, masked. Nothing here imports Airflow.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from anylaunch.runner.lines import LineBuffer
from anylaunch.runner.watch import Decision, PollError, WatchPolicy
from anylaunch.specs.api import AppStatus, parse_app_handle
from anylaunch.specs.secrets import Redactor

if TYPE_CHECKING:
    from anylaunch.runner import LogPump, Runner

__all__ = ["DRAIN_TIMEOUT_S", "SyncWatch"]

#: How long to keep reading an ended app's logs (its readers stop when they reach the end).
DRAIN_TIMEOUT_S = 30.0
#: How often the waiting thread logs the lines that arrived while it sleeps.
_EMIT_EVERY_S = 0.05


class TaskLog(Protocol):
    """What the watch logs through (the task's logger, stdlib or structlog)."""

    def info(self, event: Any, *args: Any) -> Any: ...

    def warning(self, event: Any, *args: Any) -> Any: ...


class SyncWatch:
    """Watches one app from the task's thread: polls it, feeds the policy, logs its lines.

    Drive it with :meth:`observe` (the first observation) and then :meth:`pause` and
    :meth:`poll` for as long as the decision is to poll; :meth:`drain` once the app ended;
    always :meth:`close`. Acting on a final decision (cancel, raise) is the caller's.

    Args:
        runner: the task's runner (used from this thread only)
        app_handle: the app
        policy: decides every step
        log: the task's logger
        redactor: returns the app's redactor, or None while it cannot be known yet (a
            reattached task reads the app's env from its scheduler); asked once per poll until
            it answers. Lines are streamed only once it is known, so none leaks unmasked.
        stream_logs: log the app's lines
        log_roles: only these roles' lines (None: all)
        log_replicas: only these replica ids' lines (None: all)
    """

    def __init__(
        self,
        runner: Runner,
        app_handle: str,
        policy: WatchPolicy,
        log: TaskLog,
        redactor: Callable[[], Redactor | None],
        *,
        stream_logs: bool = True,
        log_roles: Sequence[str] | None = None,
        log_replicas: Sequence[int] | None = None,
    ) -> None:
        self.app_handle = app_handle
        self.policy = policy
        self._runner = runner
        self._log = log
        self._redactor = redactor
        self._redact: Redactor | None = None
        self._stream_logs = stream_logs
        self._log_roles = None if log_roles is None else set(log_roles)
        self._log_replicas = None if log_replicas is None else set(log_replicas)
        self._lines: LineBuffer | None = None
        self._pump: LogPump | None = None
        self._pump_tried = False
        self._errors_told = 0
        self._state: str | None = None

    # --- what the caller reads -----------------------------------------------------------

    def mask(self, text: str) -> str:
        """``text`` with the app's secrets masked (as far as they are known yet)."""
        return (self._redact or Redactor())(text)

    @property
    def redact(self) -> Redactor:
        """The app's redactor (an empty one while it is unknown)."""
        return self._redact or Redactor()

    @property
    def tail(self) -> list[str]:
        """The last lines logged (masked), for the failure text."""
        return self._lines.tail if self._lines is not None else []

    # --- driving the policy --------------------------------------------------------------

    def observe(self, observation: AppStatus | PollError | None) -> Decision:
        """Feeds one observation to the policy (logging a state change once) and answers its
        decision."""
        if self._redact is None:
            self._redact = self._redactor()
        if isinstance(observation, AppStatus) and observation.state.name != self._state:
            self._state = observation.state.name
            self._log.info("anylaunch app %s is %s", self.app_handle, self._state)
        return self.policy.observe(observation, time.time())

    def poll(self) -> AppStatus | PollError | None:
        """One status call; a failure is logged (WARNING) and handed to the policy."""
        try:
            return self._runner.status(self.app_handle)
        except Exception as e:  # the policy decides whether retrying can help
            self._log.warning(
                "status of anylaunch app %s failed (%d/%d in a row): %s",
                self.app_handle,
                self.policy.poll_errors + 1,
                self.policy.max_poll_errors,
                self.mask(f"{type(e).__name__}: {e}"),
            )
            return PollError(e)

    def pause(self, seconds: float) -> None:
        """Sleeps ``seconds``, logging the app's lines as they arrive."""
        self._start_pump()
        deadline = time.monotonic() + max(seconds, 0.0)
        while True:
            self.emit()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            time.sleep(min(remaining, _EMIT_EVERY_S))

    def drain(self, timeout: float = DRAIN_TIMEOUT_S) -> None:
        """Once the app ended: logs the rest of its lines, waiting at most ``timeout``."""
        self._start_pump()
        deadline = time.monotonic() + timeout
        while (
            self._pump is not None
            and not self._pump.join(timeout=0)
            and time.monotonic() < deadline
        ):
            self.pause(0.1)
        self.emit()
        if self._pump is not None and not self._pump.join(timeout=0):
            self._log.warning(
                "gave up waiting for the rest of the logs of anylaunch app %s", self.app_handle
            )

    def emit(self) -> None:
        """Logs the lines queued so far: one record per app line."""
        if self._lines is None:
            return
        errors = self._pump.errors if self._pump is not None else []
        for role, k, error in errors[self._errors_told :]:
            self._log.warning(
                "stopped streaming the logs of %s/%s of %s: %s",
                role,
                k,
                self.app_handle,
                self.mask(str(error)),
            )
        self._errors_told = len(errors)
        for line in self._lines.take():
            self._log.info("%s", line)

    def close(self) -> None:
        """Logs what is queued and stops listening to the readers (they end with the app)."""
        self.emit()
        if self._lines is not None:
            self._lines.close()

    # --- internals -----------------------------------------------------------------------

    def _start_pump(self) -> None:
        """Starts following the replicas' logs once the app has started and its secrets are
        known (once: a replica whose log cannot be read is reported, not retried)."""
        if (
            self._pump_tried
            or not self._stream_logs
            or not self.policy.started
            or self._redact is None
        ):
            return
        self._pump_tried = True
        from anylaunch.runner import get_runner
        from anylaunch.runner.logs import LogPump, find_replicas

        self._lines = LineBuffer(self._redact)
        try:
            replicas = [
                (role, k)
                for role, k in find_replicas(self._runner, self.app_handle)
                if (self._log_roles is None or role in self._log_roles)
                and (self._log_replicas is None or k in self._log_replicas)
            ]
            # a runner per reader: this thread keeps polling with its own, and schedulers
            # need not be thread-safe
            session = parse_app_handle(self.app_handle).session_name or None
            self._pump = LogPump(
                functools.partial(get_runner, session),
                self.app_handle,
                replicas,
                self._lines,
                should_tail=True,
            ).start()
        except Exception as e:  # logs are a convenience: never fail the wait over them
            self._log.warning(
                "cannot stream the logs of anylaunch app %s: %s",
                self.app_handle,
                self.mask(str(e)),
            )
