"""``AnylaunchAppTrigger``: waits for an app in the triggerer, streaming its logs.

Every backend call runs in a worker thread, never on the event loop. Status polls of all the
triggers of one event loop that watch apps of the same scheduler are batched into one
``Runner.status_many`` call per round (one ``Scheduler.describe_many``), so a triggerer
watching many apps makes one backend call where the backend supports it.

The trigger yields exactly one event, a dict:

- ``status``: ``success`` | ``failed`` (FAILED or CANCELLED) | ``timeout`` (a startup or run
  deadline passed) | ``error`` (the watch was lost: the app vanished, or its scheduler kept
  failing) | ``placement_move`` (a placed app must move to another attempt, which only a
  process holding the app can make: the operator attaches, moves it and defers again; the
  event's ``clock`` keeps the deadlines)
- ``app_handle``, ``app_status`` (``AppStatus.to_dict()`` plus the handle, or None)
- ``message`` (the core failure summary; an array's names its failed indices), ``log_tail`` and ``log_positions`` (the cursor)

The lifecycle decisions are the core policy's (:class:`anylaunch.runner.watch.WatchPolicy`);
the trigger only acts on them. Every text in the event and the log is masked by the app's
:class:`~anylaunch.specs.secrets.Redactor` (events are stored in the metadata DB).
"""

from __future__ import annotations

import asyncio
import inspect
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_anylaunch._arrays import XCOM_ARRAY, with_array_summary
from airflow_anylaunch._common import (
    XCOM_UI_URL,
    check_handle,
    interval,
    seconds,
    status_dict,
    ui_url_xcom,
)
from airflow_anylaunch._compat import amask_secret
from airflow_anylaunch._cursor import LogCursor
from airflow_anylaunch._placement import EVENT_MOVE, XCOM_PLACEMENT, due_move

# imported with the module (the triggerer imports it once), never on the event loop later
from anylaunch.runner import get_runner
from anylaunch.runner.outcome import Outcome
from anylaunch.runner.session import AppSession, cancel_app, logger_sink
from anylaunch.runner.session_options import OptionNames
from anylaunch.runner.wake import AsyncChangeWaiter, scheduler_change_feed
from anylaunch.runner.watch import DEFAULT_MAX_POLL_ERRORS, Done, Lost, Poll, PollError
from anylaunch.specs.api import AppStatus, parse_app_handle
from anylaunch.specs.errors import InvalidSpecError, UnknownSchedulerException, did_you_mean
from anylaunch.specs.handles import PLACEMENT_SCHEME
from anylaunch.specs.secrets import Redactor

if TYPE_CHECKING:
    from anylaunch.runner import Runner
    from anylaunch.schedulers.common.changes import ChangeFeed

__all__ = ["AnylaunchAppTrigger"]

T = TypeVar("T")


def _flag(field: str, value: object) -> bool:
    """A boolean kwarg: a real bool (serialized kwargs always are), never a truthy string."""
    if not isinstance(value, bool):
        raise InvalidSpecError(field, value, "must be True or False", "pass a bool")
    return value


def _names(field: str, value: object, example: str) -> list[str] | None:
    """A list of non-empty names (or None), never a bare string split into characters."""
    if value is None:
        return None
    if (
        isinstance(value, (str, bytes))
        or not isinstance(value, Sequence)
        or not all(isinstance(n, str) and n for n in value)
    ):
        raise InvalidSpecError(field, value, "must be a list of names", example)
    return list(value)


def _positions(value: object) -> dict[str, int]:
    """The persisted log cursor: ``{"role/replica": lines shown}``, counts whole and >= 0."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidSpecError(
            "log_positions",
            value,
            "must be a mapping of role/replica to a line count",
            "e.g. {'trainer/0': 12}, or None",
        )
    for key, count in value.items():
        if not isinstance(key, str) or not key:
            raise InvalidSpecError(
                "log_positions", key, "keys must be 'role/replica' names", "e.g. 'trainer/0'"
            )
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidSpecError(
                f"log_positions[{key!r}]", count, "must be a whole number >= 0", "e.g. 12"
            )
    return dict(value)


#: Consecutive failed status polls after which the trigger gives up (with an error event).
MAX_POLL_ERRORS = DEFAULT_MAX_POLL_ERRORS


class _StatusPoller:
    """Runs the blocking calls of one event loop's triggers for one scheduler+session, in one
    worker thread, a batch at a time.

    The status requests that arrived since the last batch go to the backend as one
    ``Runner.status_many`` call; the log reads queued meanwhile run right after it in the
    same thread. One thread per poller (rather than one pool job per trigger) keeps the loop
    from waiting on the GIL behind many busy threads, and uses the runner (and its
    scheduler) from one thread at a time only.
    """

    def __init__(self, runner: Runner, feed: ChangeFeed | None = None) -> None:
        #: used by the status polls and the log reads (in the poller's thread)
        self.runner = runner
        #: wakes the triggers of apps that changed (None: they sleep their poll interval)
        self.waiter = AsyncChangeWaiter(feed) if feed is not None else None
        self._status: dict[str, list[asyncio.Future[Any]]] = {}
        self._calls: list[tuple[Callable[[], Any], asyncio.Future[Any]]] = []
        self._task: asyncio.Task[None] | None = None

    def _wake(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def status(self, app_handle: str) -> AppStatus | None:
        """The app's status (None: unknown app), from the next batch."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._status.setdefault(app_handle, []).append(future)
        self._wake()
        return cast("AppStatus | None", await future)

    async def call(self, fn: Callable[[], T]) -> T:
        """Runs ``fn`` in the poller's thread with the next batch."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._calls.append((fn, future))
        self._wake()
        return cast(T, await future)

    def _run(
        self, handles: list[str], calls: list[Callable[[], Any]]
    ) -> tuple[Any, list[tuple[bool, Any]]]:
        """The batch, in the worker thread: each outcome is (ok, result or exception)."""
        found: Any = {}
        if handles:
            try:
                found = self.runner.status_many(handles)
            except Exception as e:
                found = e
        outcomes: list[tuple[bool, Any]] = []
        for fn in calls:
            try:
                outcomes.append((True, fn()))
            except Exception as e:
                outcomes.append((False, e))
        return found, outcomes

    async def _drain(self) -> None:
        await asyncio.sleep(0)  # let triggers woken in the same tick join this batch
        while self._status or self._calls:
            status, self._status = self._status, {}
            calls, self._calls = self._calls, []
            waiting = [f for fs in status.values() for f in fs] + [f for _, f in calls]
            try:
                found, outcomes = await asyncio.to_thread(
                    self._run, list(status), [fn for fn, _ in calls]
                )
            except asyncio.CancelledError:  # the loop is closing: do not leave waiters hanging
                for future in waiting:
                    future.cancel()
                raise
            except Exception as e:  # e.g. the executor is shutting down
                for future in waiting:
                    if not future.done():
                        future.set_exception(e)
                continue
            for handle, futures in status.items():
                for future in futures:
                    if future.done():
                        continue
                    if isinstance(found, Exception):
                        future.set_exception(found)
                    else:
                        future.set_result(found.get(handle))
            for (_, future), (ok, value) in zip(calls, outcomes, strict=True):
                if future.done():
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)


# One poller per event loop and scheduler+session (a triggerer runs one loop; dag.test() runs
# one per trigger). The entry is the task creating it, so that triggers starting together
# share one creation instead of each making its own.
_POLLERS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, str], asyncio.Task[_StatusPoller]]
]
_POLLERS = weakref.WeakKeyDictionary()


def _make_poller(backend: str, session: str) -> _StatusPoller:
    runner = get_runner(session or None)
    if backend == PLACEMENT_SCHEME:  # each placed app follows its own attempt: no one feed
        return _StatusPoller(runner)
    if backend not in runner.scheduler_backends():
        raise UnknownSchedulerException(backend, runner.scheduler_backends())
    # creates the scheduler now, so that one that cannot be created (e.g. its SDK is not
    # installed) fails the trigger at once instead of failing every status poll
    runner.scheduler_run_opts(backend)
    # the scheduler's shared change feed (e.g. a Kubernetes watch), started here, off the loop
    return _StatusPoller(runner, scheduler_change_feed(runner, backend))


async def _poller(backend: str, session: str) -> _StatusPoller:
    loop = asyncio.get_running_loop()
    pollers = _POLLERS.setdefault(loop, {})
    making = pollers.get((backend, session))
    if making is None or (making.done() and (making.cancelled() or making.exception() is not None)):
        # creating a scheduler may read entry points or config files: off the loop
        making = loop.create_task(asyncio.to_thread(_make_poller, backend, session))
        pollers[(backend, session)] = making
    # shielded: one trigger being cancelled must not cancel the others' poller
    return await asyncio.shield(making)


def _task_success_event() -> Callable[..., Any] | None:
    """Airflow's ``TaskSuccessEvent`` (>= 2.10), or None on older versions."""
    try:
        from airflow.triggers.base import TaskSuccessEvent
    except ImportError:
        return None
    return cast("Callable[..., Any]", TaskSuccessEvent)


class AnylaunchAppTrigger(BaseTrigger):
    """Fires once the app behind ``app_handle`` is terminal (or a deadline passed).

    Args:
        app_handle: ``{scheduler}://{session}/{app_id}``
        poll_interval: the most seconds between status polls (polls back off, jittered, from
            0.1 s up to this)
        stream_logs: write the app's new log lines into the trigger's log while waiting
        log_roles: only these roles' logs (default: all)
        log_replicas: only these replica ids' logs (default: all)
        log_positions: the log cursor to continue from (lines already shown per
            ``role/replica``)
        startup_deadline: epoch seconds by which the app must be RUNNING (or done)
        run_deadline: epoch seconds by which the app must be done
        cancel_on_kill: cancel the app when a user kills the deferred task (``on_kill``); a
            triggerer restart never cancels
        cancel_on_timeout: cancel the app when a deadline passes (or the watch is lost)
        run_timeout: seconds the app may run once the trigger sees it started (the operator
            turns it into ``run_deadline`` when the app already runs at deferral)
        max_poll_errors: consecutive failed status polls after which the trigger gives up
        secret_env_names: env names whose values are masked besides the built-in patterns
            (only names are serialized; the values come from the app's own description)
        end_from_trigger: end the task of an app that succeeded right here, in the triggerer
            (Airflow >= 2.10: a ``TaskSuccessEvent`` with the status as ``return_value``
            XCom), instead of resuming it on a worker; failures always go back to the operator
        try_number: the try of the task that deferred, copied into the event so that a
            later try resumed with this event can tell it is not its own (Airflow 3.0-3.1
            resume a retry with the previous try's event: apache/airflow#56704)
        attempt: a placed app's attempt the log positions belong to (the stored cursor is
            used only for it: a later attempt's logs start from their first line)

    The lifecycle decisions are the core policy's (:class:`anylaunch.runner.watch.WatchPolicy`):
    a trigger serialized by an older version (without the kwargs after ``cancel_on_timeout``)
    resumes as it was.
    """

    def __init__(
        self,
        app_handle: str,
        poll_interval: float = 10.0,
        stream_logs: bool = True,
        log_roles: Sequence[str] | None = None,
        log_replicas: Sequence[int] | None = None,
        log_positions: Mapping[str, int] | None = None,
        startup_deadline: float | None = None,
        run_deadline: float | None = None,
        cancel_on_kill: bool = True,
        cancel_on_timeout: bool = True,
        run_timeout: float | None = None,
        max_poll_errors: int = MAX_POLL_ERRORS,
        secret_env_names: Sequence[str] | None = None,
        end_from_trigger: bool = True,
        try_number: int | None = None,
        attempt: int | None = None,
        **unknown: Any,
    ) -> None:
        if unknown:  # a kwarg of another version, or a typo: never a bare TypeError
            name = sorted(unknown)[0]
            known = [p for p in inspect.signature(AnylaunchAppTrigger).parameters if p != "unknown"]
            raise InvalidSpecError(
                f"AnylaunchAppTrigger.{name}",
                type(unknown[name]).__name__,
                f"is not an argument of the trigger.{did_you_mean(name, known)}",
                f"pass only {', '.join(known)}",
            )
        super().__init__()  # type: ignore[no-untyped-call]
        self.app_handle = check_handle("app_handle", app_handle)
        self.poll_interval = interval("poll_interval", poll_interval)
        self.log_roles = _names("log_roles", log_roles, "e.g. ['trainer']")
        if log_replicas is not None and (
            isinstance(log_replicas, (str, bytes))
            or not isinstance(log_replicas, Sequence)
            or not all(
                isinstance(k, int) and not isinstance(k, bool) and k >= 0 for k in log_replicas
            )
        ):
            raise InvalidSpecError(
                "log_replicas", log_replicas, "must be replica ids >= 0", "e.g. [0]"
            )
        self.log_replicas = None if log_replicas is None else list(log_replicas)
        self.log_positions = _positions(log_positions)
        self.startup_deadline = seconds("startup_deadline", startup_deadline)
        self.run_deadline = seconds("run_deadline", run_deadline)
        self.cancel_on_kill = _flag("cancel_on_kill", cancel_on_kill)
        self.cancel_on_timeout = _flag("cancel_on_timeout", cancel_on_timeout)
        self.stream_logs = _flag("stream_logs", stream_logs)
        self.run_timeout = seconds("run_timeout", run_timeout)
        if (
            isinstance(max_poll_errors, bool)
            or not isinstance(max_poll_errors, int)
            or not 1 <= max_poll_errors <= 10_000
        ):
            raise InvalidSpecError(
                "max_poll_errors", max_poll_errors, "must be a whole number 1-10000", "e.g. 10"
            )
        self.max_poll_errors = max_poll_errors
        self.secret_env_names = _names("secret_env_names", secret_env_names, "e.g. ['DB_URL']")
        self.end_from_trigger = _flag("end_from_trigger", end_from_trigger)
        if try_number is not None and (
            isinstance(try_number, bool) or not isinstance(try_number, int) or try_number < 0
        ):
            raise InvalidSpecError(
                "try_number", try_number, "must be a whole number >= 0", "pass ti.try_number"
            )
        self.try_number = try_number
        if attempt is not None and (
            isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0
        ):
            raise InvalidSpecError(
                "attempt", attempt, "must be a whole number >= 0", "pass placement.attempt"
            )
        self.attempt = attempt
        self._told_no_env = False

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The classpath and JSON-friendly kwargs that rebuild this trigger."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "app_handle": self.app_handle,
                "poll_interval": self.poll_interval,
                "stream_logs": self.stream_logs,
                "log_roles": self.log_roles,
                "log_replicas": self.log_replicas,
                "log_positions": dict(self.log_positions),
                "startup_deadline": self.startup_deadline,
                "run_deadline": self.run_deadline,
                "cancel_on_kill": self.cancel_on_kill,
                "cancel_on_timeout": self.cancel_on_timeout,
                "run_timeout": self.run_timeout,
                "max_poll_errors": self.max_poll_errors,
                "secret_env_names": self.secret_env_names,
                "end_from_trigger": self.end_from_trigger,
                "try_number": self.try_number,
                "attempt": self.attempt,
            },
        )

    def _event(self, kind: str, outcome: Outcome, session: AppSession) -> TriggerEvent:
        """The one event; every text in it is masked (events are stored in the metadata DB)."""
        deferred_by = {} if self.try_number is None else {"try_number": self.try_number}
        status = outcome.status
        category = outcome.category
        positions = session.log_positions if self.stream_logs else self.log_positions
        return TriggerEvent(  # type: ignore[no-untyped-call]
            {
                **deferred_by,
                "status": kind,
                "failure_category": category.value if category is not None else None,
                "app_handle": self.app_handle,
                "app_status": None
                if status is None
                else status_dict(self.app_handle, status, session.redactor),
                "message": with_array_summary(outcome.message, status),
                "log_tail": list(outcome.tail),
                "log_positions": dict(positions),
            }
        )

    def _end_event(self, status: AppStatus | None, redact: Redactor) -> TriggerEvent | None:
        """The event ending the task of an app that succeeded here, in the triggerer, with
        the XCom the operator's ``execute_complete`` would have returned; None where that is
        not possible (Airflow < 2.10, no task instance, or not wanted): resume the operator."""
        if not self.end_from_trigger or self.task_instance is None:
            return None
        success = _task_success_event()
        if success is None:
            return None
        value = None if status is None else status_dict(self.app_handle, status, redact)
        self.log.info("anylaunch app %s succeeded: ending the task here", self.app_handle)
        ui_url = ui_url_xcom(None if value is None else value.get("ui_url"))
        xcoms = {"return_value": value, XCOM_UI_URL: ui_url}
        if value is not None and "array" in value:  # an array's per-index outcomes
            xcoms[XCOM_ARRAY] = value["array"]
        if value is not None and "placement" in value:  # where a placed app ran
            xcoms[XCOM_PLACEMENT] = value["placement"]
        return cast("TriggerEvent", success(xcoms=xcoms))

    async def _cancel(self, why: str) -> None:
        """Cancels the app (a kill), best effort: a failing cancel is logged, never raised."""
        self.log.warning("%s: cancelling anylaunch app %s", why, self.app_handle)
        try:
            await asyncio.to_thread(cancel_app, self.app_handle)
        except Exception as e:
            self.log.error(
                "could not cancel anylaunch app %s: %s", self.app_handle, type(e).__name__
            )

    def _session(self) -> AppSession:
        """The session of this wait: the trigger drives it step by step, its status calls
        batched by the shared poller and its logs read by position (a cursor that survives
        triggerer restarts)."""
        return AppSession(
            None,  # the shared poller's runner, once the poller exists
            self.app_handle,
            sink=logger_sink(self.log),
            poll_interval=self.poll_interval,
            run_timeout=self.run_timeout,
            startup_deadline=self.startup_deadline,
            run_deadline=self.run_deadline,
            max_poll_errors=self.max_poll_errors,
            cancel_on_timeout=self.cancel_on_timeout,
            names=OptionNames(run="execution_timeout (or run_timeout)"),
            # trigger kwargs hold only the secret names (they are stored in the metadata DB):
            # the values come from the app's own description
            secret_env_names=self.secret_env_names or (),
            learn_secrets=True,
            logs="cursor" if self.stream_logs else "off",
            log_roles=self.log_roles,
            log_replicas=self.log_replicas,
            log_positions=self.log_positions,
            # the triggerer's worker threads serve every trigger: a cancel does not wait
            cancel_wait_s=0.0,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Drives the core session step by step until the policy decides, then yields the
        one event."""
        backend, session_name, _ = parse_app_handle(self.app_handle)
        # where an earlier instance of this trigger (before a triggerer restart) got to
        cursor = LogCursor(self.task_instance, self.app_handle, self.attempt)
        if self.stream_logs:
            stored = await asyncio.to_thread(cursor.load)
            for key, position in stored.items():
                self.log_positions[key] = max(position, self.log_positions.get(key, 0))
        session = self._session()
        poller: _StatusPoller | None = None
        self.log.info("waiting for anylaunch app %s", self.app_handle)
        while True:
            observation: AppStatus | PollError | None
            try:
                if poller is None:
                    poller = await _poller(backend, session_name)
                    session.runner = poller.runner
                observation = await poller.status(self.app_handle)
            except Exception as e:  # a flaky backend: the policy decides how long to retry
                observation = session.poll_failed(e)
            if poller is not None and not isinstance(observation, PollError):
                await self._learn_secrets(session, poller)
            decision = session.observe(observation)
            # logs are read with a fresh status only (a failing backend is not asked more)
            logs_due = isinstance(observation, AppStatus) and session.logs_due(decision)
            if logs_due and poller is not None and await poller.call(session.read_logs) > 0:
                session.emit()  # after the lines went out: a restart repeats this batch
                await asyncio.to_thread(cursor.save, session.log_positions)
            session.emit()
            if not isinstance(decision, Poll):
                break
            move = due_move(observation)
            if move:  # only a process holding the app can move it: hand it back
                await self._before_move(session, poller, cursor)
                yield self._move_event(move, session)
                return
            # woken early when the scheduler's feed says the app changed
            await session.apause(decision, poller.waiter if poller is not None else None)
        ended = await asyncio.to_thread(session.act_on, decision, own_runner=True)
        session.emit()
        outcome = session.outcome(decision, ended)
        if isinstance(decision, Done):
            event = self._end_event(outcome.status, session.secrets) if outcome.succeeded else None
            yield event or self._event(
                "success" if outcome.succeeded else "failed", outcome, session
            )
            return
        yield self._event("error" if isinstance(decision, Lost) else "timeout", outcome, session)

    async def _before_move(
        self, session: AppSession, poller: _StatusPoller | None, cursor: LogCursor
    ) -> None:
        """The attempt being left: its last lines into the log (it has ended, or is left)."""
        self.log.info(
            "anylaunch app %s must move; handing it back to the task to move it", self.app_handle
        )
        readable = self.stream_logs and poller is not None and session.secrets_known
        if readable and poller is not None and await poller.call(session.read_logs) > 0:
            session.emit()
            await asyncio.to_thread(cursor.save, session.log_positions)
        session.emit()

    def _move_event(self, move: str, session: AppSession) -> TriggerEvent:
        """The event handing a placed app back for a move, with the clock of this wait (the
        next trigger keeps its deadlines) and the status that says why (masked)."""
        policy = session.policy
        status = policy.last_status
        deferred_by = {} if self.try_number is None else {"try_number": self.try_number}
        return TriggerEvent(  # type: ignore[no-untyped-call]
            {
                **deferred_by,
                "status": EVENT_MOVE,
                "failure_category": None,
                "app_handle": self.app_handle,
                "app_status": None
                if status is None
                else status_dict(self.app_handle, status, session.redactor),
                "message": session.redactor(move),
                "log_tail": list(session.tail),
                "log_positions": dict(session.log_positions),
                "clock": {
                    "began": policy.began,
                    "started": policy.started,
                    "startup_deadline": policy.startup_deadline,
                    "run_deadline": policy.run_deadline,
                },
            }
        )

    async def _learn_secrets(self, session: AppSession, poller: _StatusPoller) -> None:
        """Learns the app's secrets from its description (in the poller's thread) until it
        can; their values are told to Airflow's own masker too."""
        if session.secrets_known or not await poller.call(session.learn_secrets):
            return
        for value in session.secrets.values:
            await amask_secret(value)

    async def on_kill(self) -> None:
        """A user killed the deferred task (Airflow >= 3.3): cancel the app unless told not to.

        Not called on a triggerer restart. Airflow 3.3 also calls it in a triggerer that
        comes back after another one took its trigger over (redistribution): then the task
        instance still waits for this app, and the app keeps running (see ``_moved``).
        """
        if self.cancel_on_kill:
            from airflow_anylaunch._moved import moved

            if await asyncio.to_thread(moved, self.task_instance, self.app_handle):
                self.log.info(
                    "another triggerer took this trigger over: leaving anylaunch app %s to it",
                    self.app_handle,
                )
                return
            await self._cancel("the task was killed")
        else:
            self.log.info("task killed; leaving anylaunch app %s running", self.app_handle)
