"""One driver for one app's life: every engine, ``Runner.wait`` and the CLI watch apps here.

:class:`~anylaunch.runner.watch.WatchPolicy` decides; an :class:`AppSession` acts. It owns
everything a watcher does besides deciding, so that each engine is a thin adapter:

- **status calls**: a failing call becomes a :class:`~anylaunch.runner.watch.PollError`
  observation, warned about once per streak of failures (and said when it recovers);
- **state changes**: one INFO record per change of the app's state;
- **waiting**: on the scheduler's change feed (woken when the app changes, else at the
  policy's resync), forwarding log lines every :data:`~anylaunch.runner.wake.TICK_S` while
  they flow (:data:`~anylaunch.runner.wake.IDLE_TICK_S` while the app is quiet);
- **logs**: one record per app line, prefixed ``role/replica`` and masked, read either by
  reader threads (``logs="pump"``) or by position on each step (``logs="cursor"``, for a
  driver that keeps no threads and persists its position, such as the Airflow trigger), and
  drained at the end;
- **the cancel rule**: :func:`~anylaunch.runner.driver.cancel_and_wait`, then a wait of at most
  ``cancel_wait_s`` (:data:`CANCEL_WAIT_S` unless the engine has its own setting) for the end;
- **the outcome**: an :class:`Outcome` (failure summary, last lines, failure category);
- **secrets**: one redactor over all it says, learnt from the app's env where asked.

Everything it says goes to one ``sink(level, text)`` from the thread that drives it (engines
keep their run context in thread-locals): :meth:`AppSession.emit`, never from a reader thread.

``run()`` blocks; ``arun()`` is its asyncio twin; a driver with its own event loop and batched
status calls uses the steps (``observe``, ``poll_failed``, ``read_logs``, ``finish``).

>>> import tempfile
>>> from anylaunch.runner import get_runner
>>> from anylaunch.specs import AppDef, Role
>>> app = AppDef("hello", [Role("greeter", image=".", entrypoint="echo", args=["hi"])])
>>> said = []
>>> with (
...     tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as state,
...     get_runner(state_dir=state) as runner,
... ):
...     handle = runner.run(app, "local_cwd")
...     outcome = AppSession(runner, handle, sink=lambda level, text: said.append(text),
...                          poll_interval=0.2).run()
>>> outcome.kind, "greeter/0 hi" in said
('succeeded', True)
"""

from __future__ import annotations

import asyncio
import logging
import queue
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from anylaunch.runner.driver import cancel_and_wait
from anylaunch.runner.lines import TAIL_LINES, LineBuffer
from anylaunch.runner.outcome import Outcome, failure_summary, masked_status, state_record
from anylaunch.runner.session_options import (
    DEFAULT_OPTION_NAMES,
    OptionNames,
    check_session_arguments,
)
from anylaunch.runner.session_placement import AttemptFollower
from anylaunch.runner.wake import (
    IDLE_TICK_S,
    AsyncChangeWaiter,
    await_on_feed,
    change_feed_of,
    scheduler_change_feed,
    wait_on_feed,
)
from anylaunch.runner.watch import (
    DEFAULT_MAX_POLL_ERRORS,
    Decision,
    Done,
    Poll,
    PollError,
    WatchPolicy,
    has_started,
)
from anylaunch.specs.api import AppState, AppStatus, parse_app_handle
from anylaunch.specs.checks import check_seconds
from anylaunch.specs.secrets import Redactor, secret_values

if TYPE_CHECKING:
    from anylaunch.runner.api import Runner
    from anylaunch.runner.logs import LogFollower, LogPump
    from anylaunch.schedulers.api import Stream
    from anylaunch.schedulers.common.changes import ChangeFeed

__all__ = [
    "CANCEL_WAIT_S",
    "DRAIN_TIMEOUT_S",
    "AppSession",
    "LogSink",
    "cancel_app",
    "logger_sink",
]

#: The one wait after a cancel: how long a session waits for a cancelled app to end (its last
#: lines and end state are then in the outcome) unless the engine sets its own
#: (Dagster's ``cancel_timeout_s``, Prefect's ``cancel_wait_s``).
CANCEL_WAIT_S = 10.0
#: How long to keep reading an ended app's logs (its readers stop when they reach the end).
DRAIN_TIMEOUT_S = 30.0
#: How long to read the last lines of an app the session cancelled.
DRAIN_AFTER_CANCEL_S = 2.0
#: Least seconds between two reads of a running app's logs in ``cursor`` mode (a read costs a
#: request per replica on most backends); every line still comes out with the final read.
LOG_READ_INTERVAL_S = 30.0

#: Where a session says everything: ``(logging level, masked text)``, one call per record.
LogSink = Callable[[int, str], None]

_LEVEL_METHODS = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warning",
    logging.ERROR: "error",
}


def logger_sink(logger: Any) -> LogSink:
    """A sink for a logger with ``info``/``warning``/``error`` methods that take ``"%s"``
    arguments (a stdlib logger or adapter, Airflow's task logger, Prefect's run logger).

    >>> import logging
    >>> records = []
    >>> class Keep(logging.Handler):
    ...     def emit(self, record): records.append((record.levelname, record.getMessage()))
    >>> log = logging.getLogger("anylaunch.doctest.sink"); log.addHandler(Keep())
    >>> logger_sink(log)(logging.WARNING, "100% done")
    >>> records
    [('WARNING', '100% done')]
    """

    def sink(level: int, text: str) -> None:
        getattr(logger, _LEVEL_METHODS.get(level, "info"))("%s", text)

    return sink


_UNSET: Any = object()


class AppSession:
    """Watches one app to its end for one caller (see the module docstring).

    Args:
        runner: the caller's runner (status calls, describes, log reads and cancels; used
            from one thread at a time). A step-wise driver that makes its runner later (the
            Airflow trigger's shared poller) passes None and sets :attr:`runner` then
        app_handle: the app
        sink: where state changes, warnings and the app's lines go (None: nowhere)
        poll_interval: the longest delay between polls (the limits below are those of
            :class:`~anylaunch.runner.watch.WatchPolicy`, under the same names)
        startup_timeout: seconds the app may take to start (None: no limit)
        run_timeout: seconds the app may run once started (None: no limit)
        startup_deadline, run_deadline: absolute startup / run deadlines (epoch seconds)
        already_started: the app is known to have started already
        said_state: the state the caller has already told (e.g. in its launch line): the
            session says the app's state from the first change after it
        max_poll_errors: consecutive failed status calls after which the watch is lost
        cancel_on_timeout: cancel the app when a deadline passes
        names: the caller's names of the poll interval and the timeouts (for its messages)
        cancel_on_failure: cancel the app when the watch is lost (None: ``cancel_on_timeout``)
        secrets: the secrets the caller knows (e.g. the env it launched the app with)
        secret_env_names: env names that are secret besides the built-in patterns
        learn_secrets: read the app's env from its scheduler (one describe) for more secrets;
            the app's lines are streamed only once that worked, so none leaks unmasked
        on_secrets: called once with every secret value once known (an engine's masker)
        logs: ``pump`` (reader threads), ``cursor`` (by position, each :meth:`read_logs`) or ``off``
        log_roles, log_replicas: only these roles' / replica ids' lines (None: all)
        log_stream: which output to read (None: the scheduler's choice)
        log_positions: where a ``cursor`` starts (lines already read per ``role/replica``)
        replicas: the app's ``(role, replica)`` pairs, if known (else found as it starts)
        reader_runner: makes each log reader thread's runner (default: siblings of ``runner``)
        tail_size: how many of the last lines the outcome keeps
        on_status: sees every status observed (None: the app is unknown), e.g. a live view
        on_tick: called whenever the session emits (at least every ``IDLE_TICK_S`` in a wait)
        cancel_wait_s: the most seconds to wait for a cancelled app to end
        clock: the policy's clock (epoch seconds)
    """

    def __init__(
        self,
        runner: Runner | None,
        app_handle: str,
        *,
        sink: LogSink | None = None,
        poll_interval: float = 10.0,
        startup_timeout: float | None = None,
        run_timeout: float | None = None,
        startup_deadline: float | None = None,
        run_deadline: float | None = None,
        already_started: bool = False,
        said_state: AppState | None = None,
        max_poll_errors: int = DEFAULT_MAX_POLL_ERRORS,
        cancel_on_timeout: bool = True,
        cancel_on_failure: bool | None = None,
        names: OptionNames = DEFAULT_OPTION_NAMES,
        secrets: Redactor | None = None,
        secret_env_names: Iterable[str] = (),
        learn_secrets: bool = False,
        on_secrets: Callable[[tuple[str, ...]], None] | None = None,
        logs: Literal["pump", "cursor", "off"] = "pump",
        log_roles: Sequence[str] | None = None,
        log_replicas: Sequence[int] | None = None,
        log_stream: Stream | None = None,
        log_positions: Mapping[str, int] | None = None,
        replicas: Sequence[tuple[str, int]] | None = None,
        reader_runner: Callable[[], Runner] | None = None,
        tail_size: int = TAIL_LINES,
        on_status: Callable[[AppStatus | None], None] | None = None,
        on_tick: Callable[[], None] | None = None,
        cancel_wait_s: float = CANCEL_WAIT_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        parse_app_handle(app_handle)  # a malformed handle names its fix here
        check_session_arguments(
            runner=runner,
            callbacks={
                "sink": sink,
                "on_secrets": on_secrets,
                "on_status": on_status,
                "on_tick": on_tick,
                "reader_runner": reader_runner,
                "clock": clock,
            },
            flags={
                "already_started": already_started,
                "cancel_on_timeout": cancel_on_timeout,
                "learn_secrets": learn_secrets,
            },
            logs=logs,
            names={"log_roles": log_roles, "secret_env_names": secret_env_names},
            log_replicas=log_replicas,
            log_positions=log_positions,
            tail_size=tail_size,
            option_names=names,
            secrets=secrets,
            cancel_on_failure=cancel_on_failure,
            said_state=said_state,
        )
        cancel_wait_s = check_seconds("cancel_wait_s", cancel_wait_s, positive=False)
        self.handle = app_handle
        #: the runner of the session's calls (see ``runner`` above)
        self.runner = runner
        self.policy = WatchPolicy(
            poll_interval,
            startup_timeout=startup_timeout,
            run_timeout=run_timeout,
            startup_deadline=startup_deadline,
            run_deadline=run_deadline,
            now=clock(),
            max_poll_errors=max_poll_errors,
            cancel_on_timeout=cancel_on_timeout,
            cancel_on_failure=cancel_on_timeout if cancel_on_failure is None else cancel_on_failure,
            handle=app_handle,
            already_started=already_started,
            option_names=(names.startup, names.run),
            interval_name=names.interval,
        )
        #: the session cancelled the app (an engine's kill handler need not cancel it again)
        self.cancelled = False
        self._sink = sink
        self._on_status = on_status
        self._on_tick = on_tick
        self._clock = clock
        self._secret_names = tuple(secret_env_names)
        self._redact = secrets or Redactor()
        self._secrets_known = not learn_secrets
        self._told_no_env = False
        self._on_secrets = on_secrets
        if self._secrets_known and on_secrets is not None and self._redact:
            on_secrets(self._redact.values)
        self._logs = logs
        self._log_roles = None if log_roles is None else set(log_roles)
        self._log_replicas = None if log_replicas is None else set(log_replicas)
        self._log_stream = log_stream
        self._replicas = None if replicas is None else list(replicas)
        self._reader_runner = reader_runner
        self.cancel_wait_s = cancel_wait_s
        self._lines = LineBuffer(self.redactor, tail_size=max(tail_size, 0))
        self._notes: queue.SimpleQueue[tuple[int, str]] = queue.SimpleQueue()
        self._pump: LogPump | None = None
        self._old_pumps: list[LogPump] = []  # a placed app's earlier attempts' readers
        self._attempts = AttemptFollower()
        self._pump_tried = False
        self._pump_errors_told = 0
        self._follower: LogFollower | None = None
        if logs == "cursor":
            from anylaunch.runner.logs import LogFollower

            self._follower = LogFollower(log_positions, log_roles, log_replicas)
        self._logs_read_at = time.monotonic()  # the first read of a running app waits a while
        self._state: str | None = None if said_state is None else said_state.name
        self._feed: ChangeFeed | None = None
        self._app_id = parse_app_handle(app_handle).app_id
        self._feed_found = False

    # --- what the caller reads -----------------------------------------------------------

    @property
    def status(self) -> AppStatus | None:
        """The last status seen (None: none yet)."""
        return self.policy.last_status

    def redactor(self, text: str) -> str:
        """``text`` with every secret known so far masked."""
        return self._redact(text)

    @property
    def secrets(self) -> Redactor:
        """The redactor of every secret known so far (its ``values`` are for an engine's own
        masker; never log them)."""
        return self._redact

    @property
    def secrets_known(self) -> bool:
        """True once the app's secrets are known (lines are streamed from then on)."""
        return self._secrets_known

    @property
    def tail(self) -> list[str]:
        """The last lines seen (masked), oldest first."""
        return self._lines.tail

    @property
    def log_positions(self) -> dict[str, int]:
        """The ``cursor``'s positions: lines read per ``role/replica`` (JSON-friendly)."""
        return dict(self._follower.positions) if self._follower is not None else {}

    # --- steps (blocking ones say so) ------------------------------------------------------

    def poll(self) -> AppStatus | PollError | None:
        """One status call (blocking); a failure becomes a :class:`PollError` (warned about
        once per streak)."""
        try:
            return self._runner().status(self.handle)
        except Exception as e:  # the policy decides whether retrying can help
            return self.poll_failed(e)

    def poll_failed(self, error: Exception) -> PollError:
        """A status call made elsewhere failed with ``error``: the observation to hand to
        :meth:`observe` (the first failure of a streak is warned about)."""
        if self.policy.poll_errors == 0:
            self.say(
                logging.WARNING,
                f"status of anylaunch app {self.handle} failed (retried up to "
                f"{self.policy.max_poll_errors} times in a row): {type(error).__name__}: {error}",
            )
        return PollError(error)

    def observe(self, observation: AppStatus | PollError | None) -> Decision:
        """Feeds one observation to the policy (saying a state change or a recovery once)
        and answers its decision. Does no I/O."""
        if not isinstance(observation, PollError):
            if self.policy.poll_errors:
                self.say(
                    logging.INFO,
                    f"status of anylaunch app {self.handle} answers again after "
                    f"{self.policy.poll_errors} failed call(s)",
                )
            for level, note in self._attempts.notes(observation):
                self.say(level, f"anylaunch app {self.handle}: {note}")
            if isinstance(observation, AppStatus) and observation.state.name != self._state:
                self._state = observation.state.name
                self.say(*state_record(self.handle, observation))
            if self._on_status is not None:
                self._on_status(observation)
        return self.policy.observe(observation, self._clock())

    def step(self, observation: AppStatus | PollError | None = _UNSET) -> Decision:
        """Polls (unless given the ``observation``), observes, and starts following the
        logs once the app has started (blocking)."""
        if not self._feed_found:
            self._feed, _ = change_feed_of(self._runner(), self.handle)
            self._feed_found = True
            if self._redact:  # masked in what the runner writes about the app (its archive)
                self._runner().note_secrets(self.handle, self._redact)
        if observation is _UNSET:
            observation = self.poll()
        if not self._secrets_known and not isinstance(observation, PollError):
            self.learn_secrets()
        decision = self.observe(observation)
        if self._attempts.moved(self.policy.last_status) and self._pump is not None:
            self._old_pumps.append(self._pump)  # it ends with its attempt
            self._pump, self._pump_tried = None, False
        last = self.policy.last_status
        if self.policy.started and (not isinstance(last, AppStatus) or has_started(last.state)):
            self._start_pump()
            self._pump_started_indices()
        return decision

    def learn_secrets(self) -> bool:
        """Reads the app's env from its scheduler for its secrets (blocking); True once
        they are known. A failure is said once and tried again at the next step."""
        if self._secrets_known:
            return True
        try:
            app = self._runner().describe(self.handle)
        except Exception as e:
            if not self._told_no_env:
                self._told_no_env = True
                self.say(
                    logging.WARNING,
                    f"cannot read the env of anylaunch app {self.handle} yet (to mask its "
                    f"secrets; its lines are streamed once it can be read): {type(e).__name__}",
                )
            return False
        values = [
            v
            for role in (app.roles if app else [])
            for v in secret_values(role.env, self._secret_names)
        ]
        self._redact = self._redact | Redactor(values)
        self._secrets_known = True
        self._runner().note_secrets(self.handle, self._redact)
        if self._on_secrets is not None and self._redact:
            self._on_secrets(self._redact.values)
        return True

    def logs_due(self, decision: Decision) -> bool:
        """``cursor`` mode: whether :meth:`read_logs` is due now (at the end, or once
        :data:`LOG_READ_INTERVAL_S` passed since the last read of a running app)."""
        if self._follower is None or not self._secrets_known:
            return False
        if not isinstance(self.policy.last_status, AppStatus):
            return False
        return (
            not isinstance(decision, Poll)
            or time.monotonic() - self._logs_read_at >= LOG_READ_INTERVAL_S
        )

    def read_logs(self) -> int:
        """``cursor`` mode: reads the lines written since the last read (blocking; the
        caller then :meth:`emit` s them); returns how many."""
        status = self.policy.last_status
        if self._follower is None or status is None or not self._secrets_known:
            return 0
        self._logs_read_at = time.monotonic()
        lines = self._follower.poll(
            self._runner(), self.handle, status, lambda text: self.say(logging.WARNING, text)
        )
        for line in lines:
            self._lines.add(line)
        return len(lines)

    def say(self, level: int, text: str) -> None:
        """Queues a record for the sink (masked when emitted); any thread may call it."""
        self._notes.put((level, text))

    def emit(self) -> bool:
        """Hands what was said and the app's new lines to the sink: call it from the thread
        that may log. True if there was any."""
        pump, said = self._pump, False
        errors = pump.errors if pump is not None else []
        for role, k, error in errors[self._pump_errors_told :]:
            self.say(
                logging.WARNING,
                f"stopped streaming the logs of {role}/{k} of {self.handle}: {error}",
            )
        self._pump_errors_told = len(errors)
        while True:
            try:
                level, text = self._notes.get_nowait()
            except queue.Empty:
                break
            said = True
            if self._sink is not None:
                self._sink(level, self._redact(text))
        for line in self._lines.take():
            said = True
            if self._sink is not None:
                self._sink(logging.INFO, line)
        if self._on_tick is not None:
            self._on_tick()
        return said

    def pause(self, decision: Poll) -> None:
        """Waits as ``decision`` says, woken early by the scheduler's change feed, emitting
        what arrives meanwhile."""
        wait = decision.wait(feed=self._feed is not None)
        wait_on_feed(self._feed, self._app_id, wait, tick=self.emit, idle_tick_s=IDLE_TICK_S)

    async def apause(self, decision: Poll, waiter: AsyncChangeWaiter | None = None) -> None:
        """Async :meth:`pause`; with a ``waiter`` (one thread watching the feed for many
        sessions of an event loop), woken through it."""
        if waiter is not None:
            self.emit()
            await waiter.wait(self._app_id, decision.wait(feed=True))
            return
        await await_on_feed(
            self._feed, self._app_id, decision.wait(feed=self._feed is not None), tick=self.emit
        )

    def cancel(self, why: str, *, own_runner: bool = False) -> AppStatus | None:
        """The one cancel rule (blocking): cancels the app unless it ended, then waits up to
        ``cancel_wait_s`` for its end, emitting its last lines meanwhile. Returns its end
        status (None: gone, unknown, or it did not end in time). Never raises: a cancel that
        fails is said, and the caller's reason for ending stands.

        Args:
            why: the reason, said before the cancel
            own_runner: cancel through a runner of its own (:meth:`Runner.sibling`), for a
                caller whose runner another thread may be using meanwhile
        """
        self.say(logging.WARNING, f"{why}: cancelling anylaunch app {self.handle} unless it ended")
        try:
            if own_runner:
                with self._runner().sibling() as runner:
                    status = cancel_and_wait(runner, self.handle, self.cancel_wait_s)
            else:
                status = cancel_and_wait(
                    self._runner(), self.handle, self.cancel_wait_s, sleep=self._emitting
                )
        except Exception as e:
            self.say(
                logging.ERROR,
                f"could not cancel anylaunch app {self.handle}: {type(e).__name__}: {e}",
            )
            return None
        self.cancelled = True
        if status is not None and not status.is_terminal():
            self.say(
                logging.ERROR,
                f"anylaunch app {self.handle} did not end within {self.cancel_wait_s:g}s of "
                f"cancelling (still {status.state.name}); check it with "
                f"`anylaunch status {self.handle}`",
            )
            return None
        self.say(
            logging.WARNING,
            f"anylaunch app {self.handle} ended {status.state.name if status else 'gone'}",
        )
        return status

    def drain(self, timeout: float = DRAIN_TIMEOUT_S) -> None:
        """Emits the rest of an ended app's lines, waiting at most ``timeout`` for its
        readers (``cursor`` mode: reads once more)."""
        if self._follower is not None:
            self.read_logs()
        deadline = time.monotonic() + max(timeout, 0.0)
        while not self._pump_done() and time.monotonic() < deadline:
            wait_on_feed(
                None, self._app_id, min(0.1, max(deadline - time.monotonic(), 0.0)), tick=self.emit
            )
        self._drained()

    async def adrain(self, timeout: float = DRAIN_TIMEOUT_S) -> None:
        """Async :meth:`drain`."""
        if self._follower is not None:
            await asyncio.to_thread(self.read_logs)
        deadline = time.monotonic() + max(timeout, 0.0)
        while not self._pump_done() and time.monotonic() < deadline:
            await await_on_feed(
                None, self._app_id, min(0.1, max(deadline - time.monotonic(), 0.0)), tick=self.emit
            )
        self._drained()

    def outcome(self, decision: Decision, status: AppStatus | None = _UNSET) -> Outcome:
        """The :class:`Outcome` of a final ``decision`` (``status``: the app's end status
        when known, e.g. after a cancel; default: the last one seen). Does no I/O."""
        last = self.policy.last_status if status is _UNSET or status is None else status
        tail = self._lines.tail
        if isinstance(decision, Done):
            message = (
                ""
                if decision.succeeded
                else failure_summary(self.handle, decision.status, tail, self._redact)
            )
            last = decision.status
        else:
            headline = self._redact(getattr(decision, "message", ""))
            message = failure_summary(self.handle, last, tail, self._redact, headline=headline)
        if last is not None and self._redact:  # what the engine shows: never a secret
            last = masked_status(last, self._redact)
        return Outcome(self.handle, decision, last, message, tuple(tail), self.cancelled)

    def act_on(self, decision: Decision, *, own_runner: bool = False) -> AppStatus | None:
        """Cancels the app if the final ``decision`` says so (blocking; see :meth:`cancel`);
        returns its end status (None: no cancel, or its end was not seen)."""
        if isinstance(decision, (Done, Poll)) or not decision.cancel:
            return None
        why = {"startup_timeout": "startup timeout", "run_timeout": "run timeout"}
        return self.cancel(
            why.get(decision.kind, "gave up watching the app"), own_runner=own_runner
        )

    def finish(self, decision: Decision) -> Outcome:
        """Acts on a final decision (blocking): cancels the app if the policy says so, drains
        its logs, and returns the outcome."""
        ended = self.act_on(decision)
        done = isinstance(decision, Done)
        self.drain(DRAIN_TIMEOUT_S if done else self._drain_after_cancel(ended))
        return self.outcome(decision, ended)

    async def afinish(self, decision: Decision) -> Outcome:
        """Async :meth:`finish`."""
        ended = await asyncio.to_thread(self.act_on, decision)
        done = isinstance(decision, Done)
        await self.adrain(DRAIN_TIMEOUT_S if done else self._drain_after_cancel(ended))
        return self.outcome(decision, ended)

    # --- whole watches ---------------------------------------------------------------------

    def watch(
        self, first: AppStatus | PollError | None = _UNSET, *, until_started: bool = False
    ) -> Decision:
        """Steps and waits until the policy's final decision (blocking), and returns it
        without acting on it; with ``until_started``, returns the :class:`Poll` decision as
        soon as the app has started (e.g. to read its logs next).

        Args:
            first: the first observation, if the caller already made it
        """
        decision = self.step(first)
        self.emit()
        while isinstance(decision, Poll) and not (until_started and self.policy.started):
            self.pause(decision)
            decision = self.step()
            self.emit()
        return decision

    def run(
        self,
        first: AppStatus | PollError | None = _UNSET,
        *,
        interrupt_cancels: tuple[type[BaseException], ...] = (),
    ) -> Outcome:
        """Watches the app to its end (blocking), acts on the final decision (cancel, drain)
        and returns the outcome.

        Args:
            first: the first observation, if the caller already made it
            interrupt_cancels: exceptions that, raised while waiting (an engine's timeout or
                termination), make the session cancel the app before they propagate
        """
        try:
            return self.finish(self.watch(first))
        except interrupt_cancels as e:
            if not self.cancelled:
                self.cancel(f"the wait was interrupted ({type(e).__name__})")
            raise
        finally:
            self.close()

    async def arun(self, *, interrupt_cancels: tuple[type[BaseException], ...] = ()) -> Outcome:
        """Async :meth:`run`: status calls, cancels and log reads run in worker threads;
        lines are emitted on the event loop."""
        try:
            decision = await asyncio.to_thread(self.step)
            self.emit()
            while isinstance(decision, Poll):
                await self.apause(decision)
                decision = await asyncio.to_thread(self.step)
                self.emit()
            return await self.afinish(decision)
        except interrupt_cancels as e:
            if not self.cancelled:
                await asyncio.to_thread(
                    self.cancel, f"the wait was interrupted ({type(e).__name__})"
                )
            raise
        finally:
            self.close()

    def close(self) -> None:
        """Emits what is queued and stops listening to the readers (they end with the app)."""
        self.emit()
        self._lines.close()

    # --- internals ---------------------------------------------------------------------

    def _runner(self) -> Runner:
        if self.runner is None:
            raise RuntimeError(f"AppSession of {self.handle}: set its runner before this call")
        return self.runner

    def _emitting(self, seconds: float) -> None:
        wait_on_feed(None, self._app_id, seconds, tick=self.emit)

    def _drain_after_cancel(self, ended: AppStatus | None) -> float:
        return min(DRAIN_AFTER_CANCEL_S, self.cancel_wait_s) if ended is not None else 0.0

    def _pump_done(self) -> bool:
        pumps = [*self._old_pumps, *([self._pump] if self._pump is not None else [])]
        return all(pump.join(timeout=0) for pump in pumps)

    def _drained(self) -> None:
        self.emit()
        if not self._pump_done():
            self.say(
                logging.WARNING,
                f"gave up waiting for the rest of the logs of anylaunch app {self.handle}",
            )
        self.emit()

    def _pump_started_indices(self) -> None:
        """Adds the reader of each array index that started since the last step."""
        status = self.policy.last_status
        if self._pump is None or not isinstance(status, AppStatus) or status.array is None:
            return
        if self._replicas is not None:
            return
        from anylaunch.runner.logs import started_replicas

        self._pump.add(
            (role, k)
            for role, k in started_replicas(status)
            if (self._log_roles is None or role in self._log_roles)
            and (self._log_replicas is None or k in self._log_replicas)
        )

    def _reader_runners(self, handle: str) -> Callable[[], Runner]:
        """Each log reader's runner: a sibling of the session's, on its change feed too, so
        that a reader's describes (is its replica over?) come from the feed's cache."""
        sibling, scheduler = self._runner().sibling, parse_app_handle(handle)[0]
        if self._feed is None:
            return sibling

        def reader_runner() -> Runner:
            runner = sibling()
            scheduler_change_feed(runner, scheduler)  # the process-wide feed: taken, not made
            return runner

        return reader_runner

    def _start_pump(self) -> None:
        """Starts the reader threads once the app has started and its secrets are known
        (once: a replica whose log cannot be read is reported, not retried)."""
        if self._pump_tried or self._logs != "pump" or not self._secrets_known:
            return
        self._pump_tried = True
        from anylaunch.runner.logs import LogPump, find_replicas

        try:
            replicas = self._replicas
            status = self.policy.last_status
            if replicas is None and isinstance(status, AppStatus) and status.array is not None:
                replicas = []  # an array's indices join as they start (_pump_started_indices)
            if replicas is None:
                replicas = find_replicas(self._runner(), self.handle)
            replicas = [
                (role, k)
                for role, k in replicas
                if (self._log_roles is None or role in self._log_roles)
                and (self._log_replicas is None or k in self._log_replicas)
            ]
            reader_handle = self._attempts.reader_handle(self.handle, status)
            self._pump = LogPump(
                self._reader_runner or self._reader_runners(reader_handle),
                reader_handle,
                replicas,
                self._lines,
                should_tail=True,
                streams=self._log_stream,
            ).start()
        except Exception as e:  # logs are a convenience: never fail the wait over them
            self.say(logging.WARNING, f"cannot stream the logs of anylaunch app {self.handle}: {e}")


def cancel_app(handle: str, wait_s: float = 0.0, runner: Runner | None = None) -> AppStatus | None:
    """The cancel rule for a caller without a session (a kill handler, a cleanup hook): cancels
    the app unless it ended and waits up to ``wait_s`` for its end; returns its last known
    status. Without a ``runner`` it uses one of its own (safe from a signal handler that
    interrupts the caller's runner mid-call).

    Raises:
        Exception: what the cancel call raised (the app may still run)
    """
    parse_app_handle(handle)  # a malformed handle names its fix here
    wait_s = check_seconds("wait_s", wait_s, positive=False)
    if runner is not None:
        return cancel_and_wait(runner, handle, wait_s)
    from anylaunch.runner.api import get_runner

    with get_runner(parse_app_handle(handle).session_name or None) as own:
        return cancel_and_wait(own, handle, wait_s)
