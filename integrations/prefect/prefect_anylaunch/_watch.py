"""Watching a launched app: status polling with startup/run timeouts, log lines forwarded to
a logger, secret masking. Shared by the sync and async waits; nothing here imports Prefect.

The app's log lines are read on reader threads (one per replica) but logged only by the
thread that waits: Prefect's run logger takes the flow/task run and the API settings from
context variables, which plain threads do not carry.
"""

from __future__ import annotations

import json
import logging
import queue
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from anylaunch.runner import poll_intervals
from anylaunch.specs.api import NONE, AppHandle, AppState, AppStatus
from anylaunch.specs.errors import UnknownAppException
from prefect_anylaunch.errors import AnylaunchAppFailedError, AnylaunchAppTimeoutError

if TYPE_CHECKING:
    from anylaunch.runner import LogPump, Runner

#: Shortest secret that is masked: masking every "a" would make logs unreadable.
MIN_SECRET_LEN = 3
#: App lines logged as one message at most (a chatty app must not send one record per line).
MAX_LINES_PER_MESSAGE = 100
#: How long to keep reading the logs once the app has ended.
DRAIN_TIMEOUT_S = 30.0
_MASK = "***"
_NOT_STARTED = frozenset(
    {AppState.UNSUBMITTED, AppState.SUBMITTED, AppState.PENDING, AppState.UNKNOWN}
)
_LINE = -1  # queue tag of an app log line (other items carry a logging level)


class Redactor:
    """Replaces every secret value in a text with ``***``.

    >>> redact = Redactor(["s3cr3t-token", "", "ab"])
    >>> redact("token=s3cr3t-token ab")
    'token=*** ab'
    >>> bool(redact), bool(Redactor([]))
    (True, False)
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        # longest first: a secret that contains another is masked whole
        self._secrets = sorted(
            {s for s in secrets if len(s) >= MIN_SECRET_LEN}, key=len, reverse=True
        )

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, _MASK)
        return text

    def __bool__(self) -> bool:
        return bool(self._secrets)


def failure_detail(status: AppStatus) -> str:
    """What the scheduler says beyond the app's message: the tail of a replica's stderr when
    the structured error has one, else the structured error itself.

    >>> failure_detail(AppStatus(AppState.FAILED, structured_error_msg='{"stderr_tail": ["a", "b"]}'))
    'last stderr: a | b'
    >>> failure_detail(AppStatus(AppState.FAILED))
    ''
    """
    raw = status.structured_error_msg
    if not raw or raw == NONE:
        return ""
    try:
        data = json.loads(raw)
    except ValueError:
        return raw[:1000]
    tail = data.get("stderr_tail") if isinstance(data, dict) else None
    if isinstance(tail, list) and tail:
        return "last stderr: " + " | ".join(str(line) for line in tail[-10:])
    return raw[:1000]


def replica_rows(status: AppStatus) -> list[dict[str, Any]]:
    """One row per replica: role, replica id, state, host and error (a table artifact).

    >>> from anylaunch.specs.api import ReplicaStatus, RoleStatus
    >>> s = AppStatus(AppState.SUCCEEDED, roles=[RoleStatus("w", [
    ...     ReplicaStatus(0, AppState.SUCCEEDED, "w", "localhost")])])
    >>> replica_rows(s)
    [{'role': 'w', 'replica': 0, 'state': 'SUCCEEDED', 'host': 'localhost', 'error': ''}]
    """
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


class _LineQueue:
    """The LogPump sink: queues each ``role/k line`` for the waiter to log."""

    def __init__(self, items: queue.SimpleQueue[tuple[int, str]]) -> None:
        self._items = items
        self.dropping = False

    def __call__(self, role: str, k: int, line: str) -> None:
        if not self.dropping:  # nobody logs the lines any more: do not pile them up
            self._items.put((_LINE, f"{role}/{k} {line}"))


class Waiter:
    """Polls one app until it ends, enforcing the startup and run timeouts and streaming the
    logs of its replicas into ``logger``.

    Drive it with :meth:`step` (which may block on the scheduler: run it on a worker thread
    in async code) and :meth:`pause` / :meth:`apause` for the returned delay, then
    :meth:`drain` / :meth:`adrain` and :meth:`raise_unless_succeeded`; always :meth:`close`.

    Args:
        runner: the runner to use (not closed here)
        app_handle: the app to watch
        logger: where state changes and the app's lines go
        poll_interval_s: the longest sleep between polls (polls back off up to it)
        startup_timeout_s: how long the app may take to start running (None: forever)
        run_timeout_s: how long the app may run (None: forever)
        cancel_on_timeout: cancel the app when a timeout expires
        log_roles: the roles whose replicas' logs are streamed (None: all; []: none)
        log_stream: "combined", "stdout" or "stderr"
        redact: masks secrets in everything logged
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
        self._intervals = poll_intervals(poll_interval_s)
        self._startup_timeout_s = startup_timeout_s
        self._run_timeout_s = run_timeout_s
        self._cancel_on_timeout = cancel_on_timeout
        self._log_roles = None if log_roles is None else list(log_roles)
        self._log_stream = log_stream
        self._redact = redact or Redactor([])
        self._items: queue.SimpleQueue[tuple[int, str]] = queue.SimpleQueue()
        self._lines = _LineQueue(self._items)
        self._pump: LogPump | None = None
        self._pump_tried = False
        self._began = time.monotonic()
        self._running_since: float | None = None

    # --- polling (may block: call from any thread) -------------------------------------

    def step(self) -> float | None:
        """Polls once. Returns how long to pause before the next poll, or None once the app
        has ended.

        Raises:
            UnknownAppException: the scheduler does not know the app
            AnylaunchAppTimeoutError: a timeout expired (the app was cancelled if configured)
        """
        status = self._runner.status(self.app_handle)
        if status is None:
            raise UnknownAppException(self.app_handle)
        if self.status is None or status.state != self.status.state:
            self._say(logging.INFO, f"app {self.app_handle} is {status.state.name}")
        self.status = status
        now = time.monotonic()
        started = status.state not in _NOT_STARTED
        if started and self._running_since is None:
            self._running_since = now
        if started:
            self._start_pump()
        if status.is_terminal():
            return None
        if self._running_since is None:
            deadline = self._deadline(self._began, self._startup_timeout_s)
            if deadline is not None and now >= deadline:
                self._time_out("startup", self._startup_timeout_s, status.state)
        else:
            deadline = self._deadline(self._running_since, self._run_timeout_s)
            if deadline is not None and now >= deadline:
                self._time_out("run", self._run_timeout_s, status.state)
        delay = next(self._intervals)
        if deadline is not None:
            delay = min(delay, max(deadline - now, 0.01))  # poll right after a deadline
        return delay

    @staticmethod
    def _deadline(start: float, timeout: float | None) -> float | None:
        return None if timeout is None else start + timeout

    def _time_out(self, which: str, timeout_s: float | None, state: AppState) -> None:
        if self._cancel_on_timeout:
            self._say(logging.WARNING, f"{which} timeout expired: cancelling {self.app_handle}")
            self._runner.cancel(self.app_handle)
        raise AnylaunchAppTimeoutError(
            self.app_handle, which, float(timeout_s or 0), state, self._cancel_on_timeout
        )

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
        """Sleeps ``seconds``, logging the app's lines as they arrive."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                first = self._items.get(timeout=remaining)
            except queue.Empty:
                break
            self._emit([first, *self._take()])

    async def apause(self, seconds: float) -> None:
        """Async :meth:`pause`: forwards lines every 0.1 s while sleeping."""
        import anyio

        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            self._emit(self._take())
            await anyio.sleep(min(remaining, 0.1))
        self._emit(self._take())

    def drain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """After the end: logs the rest of the lines (waiting at most ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while not self._pump_done() and time.monotonic() < deadline:
            self.pause(0.1)
        self._finish_drain()

    async def adrain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """Async :meth:`drain`."""
        deadline = time.monotonic() + timeout_s
        while not self._pump_done() and time.monotonic() < deadline:
            await self.apause(0.1)
        self._finish_drain()

    def _pump_done(self) -> bool:
        return self._pump is None or self._pump.join(timeout=0)

    def _finish_drain(self) -> None:
        self._emit(self._take())
        if not self._pump_done():
            self._say(logging.WARNING, "gave up waiting for the rest of the app's logs")
        for role, k, error in self._pump.errors if self._pump else []:
            self._say(logging.WARNING, f"could not read the logs of {role}/{k}: {error}")
        self._emit(self._take())

    def close(self) -> None:
        """Logs what is queued and stops forwarding (reader threads of a running app end
        with it)."""
        self._lines.dropping = True
        self._emit(self._take())

    def raise_unless_succeeded(self) -> AppStatus:
        """Returns the final status; raises if the app did not succeed.

        Raises:
            AnylaunchAppFailedError: the app ended FAILED or CANCELLED
        """
        status = self.status
        if status is None or not status.is_terminal():
            raise RuntimeError("raise_unless_succeeded() before the app ended")
        if status.state != AppState.SUCCEEDED:
            masked = AppStatus.from_dict(status.to_dict())
            masked.msg = self._redact(status.msg)
            raise AnylaunchAppFailedError(
                self.app_handle, masked, self._redact(failure_detail(status))
            )
        return status

    # --- internals ---------------------------------------------------------------------

    def _say(self, level: int, message: str) -> None:
        self._items.put((level, message))

    def _take(self) -> list[tuple[int, str]]:
        items = []
        while True:
            try:
                items.append(self._items.get_nowait())
            except queue.Empty:
                return items

    def _emit(self, items: list[tuple[int, str]]) -> None:
        batch: list[str] = []

        def flush() -> None:
            if batch:
                self._logger.info("%s", self._redact("\n".join(batch)))
                batch.clear()

        for level, text in items:
            if level == _LINE:
                batch.append(text)
                if len(batch) >= MAX_LINES_PER_MESSAGE:
                    flush()
            else:
                flush()
                self._logger.log(level, "%s", self._redact(text))
        flush()
