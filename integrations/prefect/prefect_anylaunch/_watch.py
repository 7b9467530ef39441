"""Watching a launched app for Prefect: a thin driver of the core lifecycle policy
(:class:`anylaunch.runner.watch.WatchPolicy`). Shared by the sync and async waits; nothing here
imports Prefect.

The app's log lines are read on reader threads (one per replica) into a core
:class:`~anylaunch.runner.lines.LineBuffer` but logged only by the thread that waits, one
record per line: Prefect's run logger takes the flow/task run and the API settings from
context variables, which plain threads do not carry.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from anylaunch.runner.lines import LineBuffer
from anylaunch.runner.outcome import failure_summary
from anylaunch.runner.wake import await_on_feed, change_feed_of, wait_on_feed
from anylaunch.runner.watch import (
    Done,
    Lost,
    Poll,
    PollError,
    RunTimedOut,
    StartupTimedOut,
    WatchPolicy,
)
from anylaunch.specs.api import NONE, AppHandle, AppState, AppStatus
from anylaunch.specs.secrets import Redactor
from prefect_anylaunch.errors import (
    AnylaunchAppFailedError,
    AnylaunchAppLostError,
    AnylaunchAppTimeoutError,
)

if TYPE_CHECKING:
    from anylaunch.runner import LogPump, Runner
    from anylaunch.schedulers.common.changes import ChangeFeed

__all__ = ["DRAIN_TIMEOUT_S", "Waiter", "masked_status", "replica_rows"]

#: How long to keep reading the logs once the app has ended.
DRAIN_TIMEOUT_S = 30.0


def masked_status(status: AppStatus, redact: Callable[[str], str]) -> AppStatus:
    """A copy of ``status`` with secrets masked in its messages, errors and UI link (what a
    task result, an artifact or an exception may show).

    >>> from anylaunch.specs.api import ReplicaStatus, RoleStatus
    >>> s = AppStatus(AppState.FAILED, msg="bad s3cr3t", roles=[RoleStatus("w", [
    ...     ReplicaStatus(0, AppState.FAILED, "w", "h", '{"stderr_tail": ["s3cr3t"]}')])])
    >>> m = masked_status(s, Redactor(["s3cr3t"]))
    >>> m.msg, m.roles[0].replicas[0].structured_error_msg, s.msg
    ('bad ***', '{"stderr_tail": ["***"]}', 'bad s3cr3t')
    """
    return dataclasses.replace(
        status,
        msg=redact(status.msg),
        structured_error_msg=redact(status.structured_error_msg),
        ui_url=None if status.ui_url is None else redact(status.ui_url),
        roles=[
            dataclasses.replace(
                role,
                replicas=[
                    dataclasses.replace(rep, structured_error_msg=redact(rep.structured_error_msg))
                    for rep in role.replicas
                ],
            )
            for role in status.roles
        ],
    )


def replica_rows(
    status: AppStatus, redact: Callable[[str], str] | None = None
) -> list[dict[str, Any]]:
    """One row per replica: role, replica id, state, host and error (a table artifact),
    secrets masked by ``redact``.

    >>> from anylaunch.specs.api import ReplicaStatus, RoleStatus
    >>> s = AppStatus(AppState.SUCCEEDED, roles=[RoleStatus("w", [
    ...     ReplicaStatus(0, AppState.SUCCEEDED, "w", "localhost")])])
    >>> replica_rows(s)
    [{'role': 'w', 'replica': 0, 'state': 'SUCCEEDED', 'host': 'localhost', 'error': ''}]
    """
    if redact is not None:
        status = masked_status(status, redact)
    return [
        {
            "role": role.role,
            "replica": rep.id,
            "state": rep.state.name,
            "host": rep.hostname,
            "error": "" if rep.structured_error_msg == NONE else rep.structured_error_msg,
        }
        for role in status.roles
        for rep in role.replicas
    ]


class Waiter:
    """Polls one app until it ends, as the core lifecycle policy decides (startup and run
    timeouts, retried status calls, a vanished app), streaming its replicas' lines into
    ``logger`` (one record per line, secrets masked).

    Drive it with :meth:`step` (which may block on the scheduler: run it on a worker thread
    in async code) and :meth:`pause` / :meth:`apause` for the returned delay, then
    :meth:`drain` / :meth:`adrain` and :meth:`raise_unless_succeeded`; always :meth:`close`.

    Args:
        runner: the runner to use (not closed here)
        app_handle: the app to watch
        logger: where state changes and the app's lines go
        poll_interval_s: the longest sleep between polls (polls back off up to it)
        startup_timeout_s: how long the app may take to start running (None: forever)
        run_timeout_s: how long the app may run once started (None: forever)
        cancel_on_timeout: cancel the app when a timeout expires (and when the watch is lost)
        log_roles: the roles whose replicas' logs are streamed (None: all; []: none)
        log_stream: "combined", "stdout" or "stderr"
        redact: masks secrets in everything logged and raised
    """

    def __init__(
        self,
        runner: Runner,
        app_handle: AppHandle,
        logger: logging.Logger | logging.LoggerAdapter[Any],
        poll_interval_s: float,
        startup_timeout_s: float | None = None,
        run_timeout_s: float | None = None,
        cancel_on_timeout: bool = True,
        log_roles: Sequence[str] | None = None,
        log_stream: str = "combined",
        redact: Redactor | None = None,
    ) -> None:
        self.app_handle = app_handle
        self.status: AppStatus | None = None
        self._runner = runner
        self._logger = logger
        self._policy = WatchPolicy(
            poll_interval_s,
            startup_timeout=startup_timeout_s,
            run_timeout=run_timeout_s,
            cancel_on_timeout=cancel_on_timeout,
            cancel_on_failure=cancel_on_timeout,
            handle=app_handle,
            option_names=("startup_timeout_s", "run_timeout_s"),
        )
        self._log_roles = None if log_roles is None else list(log_roles)
        self._log_stream = log_stream
        self._redact = redact or Redactor()
        self._lines = LineBuffer(self._redact)
        # state changes and warnings, said by the polling thread, logged by the waiting one
        self._notes: queue.SimpleQueue[tuple[int, str]] = queue.SimpleQueue()
        self._pump: LogPump | None = None
        self._pump_tried = False
        # the scheduler's change feed, found by the first step (off any event loop)
        self._feed: ChangeFeed | None = None
        self._app_id = ""
        self._feed_found = False

    # --- polling (may block: call from any thread) -------------------------------------

    def step(self) -> float | None:
        """Polls once. Returns how long to pause before the next poll, or None once the app
        has ended.

        Raises:
            AnylaunchAppTimeoutError: a timeout expired (the app was cancelled if configured)
            AnylaunchAppLostError: the app vanished, or its scheduler kept failing
        """
        if not self._feed_found:
            self._feed, self._app_id = change_feed_of(self._runner, self.app_handle)
            self._feed_found = True
        try:
            observation: AppStatus | PollError | None = self._runner.status(self.app_handle)
        except Exception as e:  # the policy decides whether retrying can help
            observation = PollError(e)
            self._say(
                logging.WARNING,
                f"status of {self.app_handle} failed ({self._policy.poll_errors + 1}/"
                f"{self._policy.max_poll_errors}): {e}",
            )
        if isinstance(observation, AppStatus):
            if self.status is None or observation.state != self.status.state:
                self._say(logging.INFO, f"app {self.app_handle} is {observation.state.name}")
            self.status = observation
        decision = self._policy.observe(observation, time.time())
        if self._policy.started:
            self._start_pump()
        if isinstance(decision, Poll):  # with a feed, it wakes the pause when the app changes
            return decision.wait(feed=self._feed is not None)
        if isinstance(decision, Done):
            return None
        if decision.cancel:
            self._cancel(decision.message)
        headline = self._redact(decision.message)
        text = failure_summary(
            self.app_handle, self.status, self._lines.tail, self._redact, headline=headline
        )
        if isinstance(decision, (StartupTimedOut, RunTimedOut)):
            which = "startup" if isinstance(decision, StartupTimedOut) else "run"
            limit = self._policy.startup_timeout if which == "startup" else self._policy.run_timeout
            raise AnylaunchAppTimeoutError(
                self.app_handle,
                which,
                float(limit or 0),
                decision.status.state,
                decision.cancel,
                message=text,
            )
        assert isinstance(decision, Lost)
        last = None if self.status is None else masked_status(self.status, self._redact)
        raise AnylaunchAppLostError(self.app_handle, last, text, reason=decision.reason)

    def _cancel(self, why: str) -> None:
        self._say(logging.WARNING, f"{self._redact(why)}: cancelling {self.app_handle}")
        try:
            self._runner.cancel(self.app_handle)
        except Exception as e:  # best effort: the failure below still says why the wait ended
            self._say(logging.ERROR, f"could not cancel {self.app_handle}: {e}")

    def _start_pump(self) -> None:
        if self._pump_tried or self._log_roles == []:
            return
        self._pump_tried = True
        from anylaunch.runner.logs import LogPump, find_replicas
        from anylaunch.schedulers.api import Stream

        try:
            replicas = find_replicas(self._runner, self.app_handle)
            if self._log_roles is not None:
                replicas = [(r, k) for r, k in replicas if r in self._log_roles]
            self._pump = LogPump(
                self._runner,
                self.app_handle,
                replicas,
                self._lines,
                should_tail=True,
                streams=Stream(self._log_stream),
            ).start()
        except Exception as e:  # logs are a convenience: never fail the wait over them
            self._say(logging.WARNING, f"cannot stream the logs of {self.app_handle}: {e}")

    # --- forwarding (call from the thread that may log) ----------------------------------

    def pause(self, seconds: float) -> None:
        """Waits up to ``seconds``, logging the app's lines as they arrive; returns early
        when the scheduler's change feed says the app changed (the next step polls)."""
        wait_on_feed(self._feed, self._app_id, seconds, tick=self._emit)

    async def apause(self, seconds: float) -> None:
        """Async :meth:`pause`: forwards lines every 0.05 s while it waits."""
        await await_on_feed(self._feed, self._app_id, seconds, tick=self._emit)

    def drain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """After the end: logs the rest of the lines (waiting at most ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while not self._pump_done() and time.monotonic() < deadline:
            wait_on_feed(None, self._app_id, 0.1, tick=self._emit)  # the app is over
        self._finish_drain()

    async def adrain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """Async :meth:`drain`."""
        deadline = time.monotonic() + timeout_s
        while not self._pump_done() and time.monotonic() < deadline:
            await await_on_feed(None, self._app_id, 0.1, tick=self._emit)  # the app is over
        self._finish_drain()

    def _pump_done(self) -> bool:
        return self._pump is None or self._pump.join(timeout=0)

    def _finish_drain(self) -> None:
        self._emit()
        if not self._pump_done():
            self._say(logging.WARNING, "gave up waiting for the rest of the app's logs")
        for role, k, error in self._pump.errors if self._pump else []:
            self._say(logging.WARNING, f"could not read the logs of {role}/{k}: {error}")
        self._emit()

    def close(self) -> None:
        """Logs what is queued and stops forwarding (reader threads of a running app end
        with it)."""
        self._emit()
        self._lines.close()

    def raise_unless_succeeded(self) -> AppStatus:
        """Returns the final status; raises if the app did not succeed.

        Raises:
            AnylaunchAppFailedError: the app ended FAILED or CANCELLED
        """
        status = self.status
        if status is None or not status.is_terminal():
            raise RuntimeError("raise_unless_succeeded() before the app ended")
        if status.state != AppState.SUCCEEDED:
            text = failure_summary(self.app_handle, status, self._lines.tail, self._redact)
            masked = masked_status(status, self._redact)
            raise AnylaunchAppFailedError(self.app_handle, masked, message=text)
        return status

    # --- internals ---------------------------------------------------------------------

    def _say(self, level: int, message: str) -> None:
        self._notes.put((level, message))

    def _emit(self) -> None:
        """Logs the notes, then the app's lines: one record per line."""
        while True:
            try:
                level, text = self._notes.get_nowait()
            except queue.Empty:
                break
            self._logger.log(level, "%s", self._redact(text))
        for line in self._lines.take():
            self._logger.info("%s", line)
