"""The app lifecycle as one policy that does no I/O: every engine drives it.

A :class:`WatchPolicy` is fed observations of one app (a status, a failed status call, the app
having vanished) with the time they were made, and answers what to do next:

========================  ===============================================================
decision                  the driver ...
========================  ===============================================================
:class:`Poll`             sleeps ``after`` seconds (jittered backoff, capped), then polls again;
                          a driver that a change feed wakes may wait up to ``resync`` instead
:class:`Done`             the app is terminal: drains its logs, then succeeds or fails
:class:`StartupTimedOut`  the app did not start by the startup deadline: cancels it if
                          ``decision.cancel``, and fails with ``decision.message``
:class:`RunTimedOut`      the app did not finish by the run deadline: likewise
:class:`Lost`             the app vanished, or the backend failed too often or for good:
                          cancels it if ``decision.cancel`` (best effort), and fails
========================  ===============================================================

The same rules hold in every engine (the behaviour table is in ``docs/lifecycle.md``):

- **Started** means RUNNING or terminal (:func:`has_started`). An app seen started stays
  started, even if it is preempted back to PENDING.
- **Startup timeout** counts from the start of the watch; **run timeout** from the first
  observation that the app started. Either may instead be an absolute deadline (epoch seconds,
  as an Airflow trigger persists them across triggerer restarts); the earlier one wins.
- **Poll errors**: a failed status call is retried with the same backoff; after
  ``max_poll_errors`` consecutive failures, or at once for an error that retrying cannot fix
  (bad input), the watch is :class:`Lost` and the app is cancelled (``cancel_on_failure``),
  so a wait that gives up never leaves an app running.
- **Vanished**: an app the scheduler no longer knows is :class:`Lost` (nothing to cancel).
- **Change feeds**: a driver woken by its scheduler's change feed polls a healthy app only every
  :data:`FEED_RESYNC_S` (``Poll.resync``: a resync that catches a change the feed missed), or
  the poll interval if longer, and always by the next deadline; the poll after a wake-up stays
  the source of truth. After a failed poll it retries on the backoff as without a feed.

>>> from anylaunch.specs.api import AppState, AppStatus
>>> policy = WatchPolicy(poll_interval=5, startup_timeout=60, now=0.0, rng=random.Random(0))
>>> policy.observe(AppStatus(AppState.PENDING), now=1.0).kind
'poll'
>>> timed_out = policy.observe(AppStatus(AppState.PENDING), now=61.0)
>>> timed_out.kind, timed_out.cancel
('startup_timeout', True)
>>> policy.observe(AppStatus(AppState.SUCCEEDED), now=62.0).kind  # final decisions stick
'startup_timeout'
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from anylaunch.specs.api import AppState, AppStatus
from anylaunch.specs.checks import check_seconds
from anylaunch.specs.errors import InvalidSpecError

__all__ = [
    "DEFAULT_MAX_POLL_ERRORS",
    "FEED_RESYNC_S",
    "Decision",
    "Done",
    "Lost",
    "Poll",
    "PollError",
    "RunTimedOut",
    "StartupTimedOut",
    "Vanished",
    "WatchPolicy",
    "has_started",
    "is_permanent_error",
    "poll_intervals",
]

#: Consecutive failed status calls after which a watch gives up.
DEFAULT_MAX_POLL_ERRORS = 10
#: The first poll delay; polls back off from here up to the poll interval.
INITIAL_POLL_S = 0.1
#: How often a driver that a change feed wakes polls a healthy app anyway (the resync), unless
#: its poll interval is longer: thousands of waiters in one process then cost almost nothing
#: between changes, and a change the feed missed is still seen within this time.
FEED_RESYNC_S = 30.0

_NOT_STARTED = frozenset(
    {AppState.UNSUBMITTED, AppState.SUBMITTED, AppState.PENDING, AppState.UNKNOWN}
)


def has_started(state: AppState) -> bool:
    """The one meaning of "started": RUNNING or already terminal.

    >>> has_started(AppState.RUNNING), has_started(AppState.FAILED), has_started(AppState.PENDING)
    (True, True, False)
    """
    return state not in _NOT_STARTED


def is_permanent_error(exc: BaseException) -> bool:
    """True for a status-call error that retrying cannot fix: bad input (a malformed handle,
    an unknown scheduler, an invalid option). Everything else (network, API server, a
    controller restarting, a missing SDK being installed) is worth retrying.

    >>> is_permanent_error(InvalidSpecError("f", 1, "bad", "fix")), is_permanent_error(OSError())
    (True, False)
    """
    from anylaunch.specs.errors import UnknownSchedulerException

    return isinstance(exc, (InvalidSpecError, UnknownSchedulerException))


def _check_optional(field_name: str, value: object, *, positive: bool = False) -> float | None:
    return None if value is None else check_seconds(field_name, value, positive=positive)


def _check_interval_name(interval_name: object) -> None:
    if not isinstance(interval_name, str) or not interval_name:
        raise InvalidSpecError(
            "interval_name", interval_name, "must be a non-empty str", "e.g. 'wait_interval'"
        )


def _checked_names(option_names: object, interval_name: object) -> tuple[str, str]:
    """The caller's names of the startup and run timeouts, checked (they name its errors)."""
    _check_interval_name(interval_name)
    if (
        not isinstance(option_names, tuple)
        or len(option_names) != 2
        or not all(isinstance(n, str) and n for n in option_names)
    ):
        raise InvalidSpecError(
            "option_names",
            option_names,
            "must be two non-empty names (the startup timeout's, the run timeout's)",
            "e.g. ('startup_timeout_s', 'run_timeout_s')",
        )
    return option_names[0], option_names[1]


def poll_intervals(
    cap: float,
    initial: float = INITIAL_POLL_S,
    factor: float = 2.0,
    rng: random.Random | None = None,
    *,
    interval_name: str = "cap",
) -> Iterator[float]:
    """Yields sleep times for status polling: exponential backoff from ``initial``, capped at
    ``cap``, each jittered down to between half and all of its step so that many waiters do
    not poll in lockstep. Never yields 0 or more than ``cap``.

    >>> import itertools
    >>> delays = list(itertools.islice(poll_intervals(2.0, rng=random.Random(0)), 10))
    >>> all(0.05 <= d <= 2.0 for d in delays), delays[0] <= 0.1, delays[-1] >= 1.0
    (True, True, True)
    >>> poll_intervals(float("inf"), interval_name="wait_interval")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: wait_interval=inf is invalid: ...

    Args:
        cap: the longest delay, in seconds (> 0)
        initial: the first step, in seconds (> 0)
        factor: how much each step grows (>= 1)
        rng: the jitter's random source (tests pass a seeded one)
        interval_name: how the caller names ``cap`` (e.g. ``"wait_interval"``), for its error

    Raises:
        InvalidSpecError: an argument cannot work, naming it
    """
    _check_interval_name(interval_name)
    cap = check_seconds(interval_name, cap, positive=True)
    initial = check_seconds("initial", initial, positive=True)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1 <= factor < 1e6:
        raise InvalidSpecError("factor", factor, "must be a number >= 1", "pass e.g. 2")
    return _jittered(min(initial, cap), cap, float(factor), rng or random.Random())


def _jittered(step: float, cap: float, factor: float, rng: random.Random) -> Iterator[float]:
    while True:
        yield rng.uniform(step / 2, step)
        step = min(step * factor, cap)


# --- observations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PollError:
    """A status call failed with ``error``."""

    error: BaseException


@dataclass(frozen=True)
class _VanishedType:
    def __repr__(self) -> str:
        return "Vanished"


#: The scheduler no longer knows the app (a status call returned None).
Vanished = _VanishedType()

Observation = AppStatus | PollError | _VanishedType | None


# --- decisions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Poll:
    """Poll again after ``after`` seconds; a driver that a change feed wakes may wait up to
    ``resync`` seconds instead (None: ``after``).

    >>> Poll(2.0).wait(feed=True), Poll(2.0, resync=30.0).wait(feed=True)
    (2.0, 30.0)
    >>> Poll(2.0, resync=30.0).wait(feed=False)
    2.0
    """

    after: float
    resync: float | None = None
    kind: Literal["poll"] = field(default="poll", repr=False)

    def wait(self, *, feed: bool) -> float:
        """The longest wait before the next poll, for a driver with (or without) a change
        feed that wakes it when the app changes."""
        return self.resync if feed and self.resync is not None else self.after


@dataclass(frozen=True)
class Done:
    """The app is terminal (SUCCEEDED, FAILED or CANCELLED)."""

    status: AppStatus
    kind: Literal["done"] = field(default="done", repr=False)

    @property
    def succeeded(self) -> bool:
        """True if the app SUCCEEDED."""
        return self.status.state == AppState.SUCCEEDED


@dataclass(frozen=True)
class _TimedOut:
    status: AppStatus
    cancel: bool
    message: str = field(default="", repr=False)


@dataclass(frozen=True)
class StartupTimedOut(_TimedOut):
    """The app did not start (RUNNING) by the startup deadline."""

    kind: Literal["startup_timeout"] = field(default="startup_timeout", repr=False)


@dataclass(frozen=True)
class RunTimedOut(_TimedOut):
    """The app did not finish by the run deadline."""

    kind: Literal["run_timeout"] = field(default="run_timeout", repr=False)


@dataclass(frozen=True)
class Lost:
    """The watch cannot go on: the app vanished, or the backend kept failing.

    ``status`` is the last status seen (None if none was); ``error`` the last poll error.
    """

    reason: Literal["vanished", "poll_errors", "permanent_error"]
    message: str
    cancel: bool
    status: AppStatus | None = None
    error: BaseException | None = field(default=None, repr=False)
    kind: Literal["lost"] = field(default="lost", repr=False)


Decision = Poll | Done | StartupTimedOut | RunTimedOut | Lost


def _short(status: AppStatus) -> AppStatus:
    return AppStatus(status.state, num_restarts=status.num_restarts, msg=status.msg)


# --- the policy -----------------------------------------------------------------------------


class WatchPolicy:
    """Decides the next step of watching one app; does no I/O and never sleeps.

    Args:
        poll_interval: the longest delay between polls, in seconds (> 0)
        startup_timeout: seconds from the start of the watch by which the app must have
            started (None: no limit)
        run_timeout: seconds from the app's start by which it must be done (None: no limit)
        startup_deadline: the same as an absolute time (epoch seconds, like ``now``)
        run_deadline: an absolute time by which the app must be done
        now: when the watch starts (default: ``time.time()``); observations use the same clock
        max_poll_errors: consecutive failed status calls after which the watch is lost
        cancel_on_timeout: whether a timed-out app is to be cancelled
        cancel_on_failure: whether an app is to be cancelled when the watch gives up on it
        handle: the app's handle, for messages
        already_started: the app is known to have started already (e.g. a resumed watch)
        rng: the jitter's random source (tests pass a seeded one)
        option_names: how the caller names the startup and run timeouts, for the fix in a
            timeout's message (e.g. ``("startup_timeout_s", "run_timeout_s")``)
        interval_name: how the caller names ``poll_interval``, for its error (e.g.
            ``"wait_interval"``)
    """

    def __init__(
        self,
        poll_interval: float,
        *,
        startup_timeout: float | None = None,
        run_timeout: float | None = None,
        startup_deadline: float | None = None,
        run_deadline: float | None = None,
        now: float | None = None,
        max_poll_errors: int = DEFAULT_MAX_POLL_ERRORS,
        cancel_on_timeout: bool = True,
        cancel_on_failure: bool = True,
        handle: str = "",
        already_started: bool = False,
        rng: random.Random | None = None,
        option_names: tuple[str, str] = ("startup_timeout", "run_timeout"),
        interval_name: str = "poll_interval",
    ) -> None:
        startup_name, run_name = _checked_names(option_names, interval_name)
        self.poll_interval = check_seconds(interval_name, poll_interval, positive=True)
        # named as the caller names them (e.g. Prefect's startup_timeout_s), not as we do
        self.startup_timeout = _check_optional(startup_name, startup_timeout)
        self.run_timeout = _check_optional(run_name, run_timeout)
        start_deadline = _check_optional("startup_deadline", startup_deadline)
        finish_deadline = _check_optional("run_deadline", run_deadline)
        if isinstance(max_poll_errors, bool) or not isinstance(max_poll_errors, int):
            raise InvalidSpecError(
                "max_poll_errors", max_poll_errors, "must be a whole number >= 1", "pass e.g. 10"
            )
        if max_poll_errors < 1:
            raise InvalidSpecError(
                "max_poll_errors", max_poll_errors, "must be a whole number >= 1", "pass e.g. 10"
            )
        if now is None:
            import time

            now = time.time()
        self.began = check_seconds("now", now, positive=False)
        self.max_poll_errors = max_poll_errors
        self.cancel_on_timeout = bool(cancel_on_timeout)
        self.cancel_on_failure = bool(cancel_on_failure)
        self.handle = handle
        self._option_names = option_names
        #: the absolute startup deadline (None: none), the earlier of timeout and deadline
        self.startup_deadline = _earliest(
            start_deadline,
            None if self.startup_timeout is None else self.began + self.startup_timeout,
        )
        self._fixed_run_deadline = finish_deadline
        #: when the app was first seen started (None: not yet)
        self.started_at: float | None = self.began if already_started else None
        #: the last status observed (None: none yet)
        self.last_status: AppStatus | None = None
        #: consecutive failed status calls so far
        self.poll_errors = 0
        self.last_error: BaseException | None = None
        # validated once, above
        self._intervals = _jittered(
            min(INITIAL_POLL_S, self.poll_interval), self.poll_interval, 2.0, rng or random.Random()
        )
        self._decision: Decision | None = None

    # --- what the driver may read --------------------------------------------------------

    @property
    def started(self) -> bool:
        """True once the app has been seen started (see :func:`has_started`)."""
        return self.started_at is not None

    @property
    def run_deadline(self) -> float | None:
        """The absolute run deadline in force (None: none yet or none at all)."""
        from_timeout = (
            None
            if self.run_timeout is None or self.started_at is None
            else self.started_at + self.run_timeout
        )
        return _earliest(self._fixed_run_deadline, from_timeout)

    @property
    def finished(self) -> Decision | None:
        """The final decision once one was made (anything but :class:`Poll`), else None."""
        return self._decision

    # --- observe -------------------------------------------------------------------------

    def observe(self, observation: Observation, now: float) -> Decision:
        """Takes one observation made at ``now`` and answers the next step.

        ``observation`` is the app's status, a :class:`PollError`, or :data:`Vanished` (or
        None, as ``Runner.status`` returns for an unknown app). Once a final decision was made,
        it is returned again for any later observation.
        """
        if self._decision is not None:
            return self._decision
        if isinstance(observation, PollError):
            return self._poll_failed(observation.error, now)
        if observation is None or observation is Vanished:
            return self._finish(
                Lost(
                    "vanished",
                    f"anylaunch app {self.handle} no longer exists: the scheduler has no record "
                    "of it (deleted, or purged after it ended). Fix: check the handle with "
                    f"`anylaunch status {self.handle}`",
                    cancel=False,
                    status=self.last_status,
                )
            )
        assert isinstance(observation, AppStatus)
        status = observation
        self.poll_errors = 0
        self.last_status = status
        if self.started_at is None and has_started(status.state):
            self.started_at = now
        if status.is_terminal():
            return self._finish(Done(status))
        timed_out = self._deadline_passed(status, now)
        if timed_out is not None:
            return self._finish(timed_out)
        return Poll(self._next_delay(now), resync=self._resync_delay(now))

    def _deadline_passed(self, status: AppStatus, now: float) -> Decision | None:
        run_deadline = self.run_deadline
        if run_deadline is not None and now >= run_deadline:
            return RunTimedOut(
                _short(status),
                self.cancel_on_timeout,
                self._timeout_text("run", status, self._option_names[1]),
            )
        if (
            self.started_at is None
            and self.startup_deadline is not None
            and now >= self.startup_deadline
        ):
            return StartupTimedOut(
                _short(status),
                self.cancel_on_timeout,
                self._timeout_text("startup", status, self._option_names[0]),
            )
        return None

    def _poll_failed(self, error: BaseException, now: float) -> Decision:
        self.poll_errors += 1
        self.last_error = error
        # a deadline is the user's hard limit: it passes whether or not the backend answers
        timed_out = self._deadline_passed(self.last_status or AppStatus(AppState.UNKNOWN), now)
        if timed_out is not None:
            return self._finish(timed_out)
        if is_permanent_error(error):
            return self._finish(
                Lost(
                    "permanent_error",
                    f"cannot get the status of anylaunch app {self.handle}: {error}",
                    self.cancel_on_failure,
                    self.last_status,
                    error,
                )
            )
        if self.poll_errors >= self.max_poll_errors:
            return self._finish(
                Lost(
                    "poll_errors",
                    f"gave up on anylaunch app {self.handle} after {self.poll_errors} failed "
                    f"status calls in a row; the last one: {error}"
                    + ("; the app is being cancelled" if self.cancel_on_failure else ""),
                    self.cancel_on_failure,
                    self.last_status,
                    error,
                )
            )
        return Poll(self._next_delay(now))

    def _next_delay(self, now: float) -> float:
        return self._by_deadline(next(self._intervals), now)

    def _resync_delay(self, now: float) -> float:
        return self._by_deadline(max(self.poll_interval, FEED_RESYNC_S), now)

    def _by_deadline(self, delay: float, now: float) -> float:
        # poll right after a deadline rather than up to a whole interval later
        for deadline in (self.run_deadline, None if self.started else self.startup_deadline):
            if deadline is not None:
                delay = min(delay, max(deadline - now, 0.0) + 0.001)
        return delay

    def _timeout_text(self, which: str, status: AppStatus, option: str) -> str:
        limit = self.startup_timeout if which == "startup" else self.run_timeout
        what = "start (RUNNING)" if which == "startup" else "finish"
        within = f"within {limit:g}s" if limit is not None else "by its deadline"
        action = "it is being cancelled" if self.cancel_on_timeout else "it was left running"
        return (
            f"anylaunch app {self.handle} did not {what} {within} (it was {status.state.name}); "
            f"{action}. Fix: raise {option}, or find out why it is slow with "
            f"`anylaunch status {self.handle}`"
        )

    def _finish(self, decision: Decision) -> Decision:
        self._decision = decision
        return decision


def _earliest(*deadlines: float | None) -> float | None:
    known = [d for d in deadlines if d is not None]
    return min(known) if known else None
