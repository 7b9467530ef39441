"""The lifecycle policy on its own: a fake clock (every observation says when it was made),
scripted observations, no backend.

Each row of the tables is one line of the behaviour table in docs/lifecycle.md (or one of its
definitions): what the policy is fed, and the decision kinds it must answer.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import pytest

from anylaunch.runner.watch import (
    FEED_RESYNC_S,
    Decision,
    Done,
    Lost,
    Poll,
    PollError,
    RunTimedOut,
    StartupTimedOut,
    Vanished,
    WatchPolicy,
    has_started,
    poll_intervals,
)
from anylaunch.specs.api import AppState, AppStatus
from anylaunch.specs.errors import (
    InvalidSpecError,
    MalformedAppHandleException,
    UnknownSchedulerException,
)

S = AppState
FLAKY = PollError(ConnectionError("connection refused"))
PENDING, RUNNING = AppStatus(S.PENDING), AppStatus(S.RUNNING)
SUCCEEDED, FAILED, CANCELLED = AppStatus(S.SUCCEEDED), AppStatus(S.FAILED), AppStatus(S.CANCELLED)


def policy(**kwargs: Any) -> WatchPolicy:
    """A policy whose watch starts at t=0 with seeded jitter."""
    kwargs.setdefault("now", 0.0)
    kwargs.setdefault("rng", random.Random(0))
    return WatchPolicy(kwargs.pop("poll_interval", 5.0), **kwargs)


def feed(p: WatchPolicy, script: Sequence[tuple[float, Any]]) -> list[Decision]:
    """Feeds (time, observation) pairs; returns the decisions."""
    return [p.observe(observation, now) for now, observation in script]


# --- every decision kind, one table --------------------------------------------------------

CASES: list[tuple[str, dict[str, Any], list[tuple[float, Any]], list[str]]] = [
    # id, policy kwargs, script, the decision kinds it must answer
    ("succeeds", {}, [(1, PENDING), (2, RUNNING), (3, SUCCEEDED)], ["poll", "poll", "done"]),
    ("fails", {}, [(1, RUNNING), (2, FAILED)], ["poll", "done"]),
    ("cancelled elsewhere", {}, [(1, CANCELLED)], ["done"]),
    ("no timeouts: waits forever", {}, [(1, PENDING), (1e9, RUNNING)], ["poll", "poll"]),
    # startup timeout: counted from the start of the watch
    (
        "startup timeout",
        {"startup_timeout": 10},
        [(5, PENDING), (9.99, AppStatus(S.SUBMITTED)), (10, PENDING)],
        ["poll", "poll", "startup_timeout"],
    ),
    (
        "startup timeout of 0: at the first not-started status",
        {"startup_timeout": 0},
        [(0, PENDING)],
        ["startup_timeout"],
    ),
    ("started in time", {"startup_timeout": 10}, [(9, RUNNING), (50, RUNNING)], ["poll", "poll"]),
    ("ended before the startup deadline", {"startup_timeout": 10}, [(20, FAILED)], ["done"]),
    (
        "UNKNOWN is not started",
        {"startup_timeout": 10},
        [(1, AppStatus(S.UNKNOWN)), (10, AppStatus(S.UNKNOWN))],
        ["poll", "startup_timeout"],
    ),
    # run timeout: counted from the first observation that the app started
    (
        "run timeout counts from the first started observation",
        {"run_timeout": 10},
        [(100, PENDING), (105, RUNNING), (114.9, RUNNING), (115, RUNNING)],
        ["poll", "poll", "poll", "run_timeout"],
    ),
    (
        "run timeout does not count the time spent pending",
        {"run_timeout": 10, "startup_timeout": 1000},
        [(500, PENDING), (501, RUNNING), (510, RUNNING)],
        ["poll", "poll", "poll"],
    ),
    (
        "ended after the run deadline but seen terminal: done",
        {"run_timeout": 10},
        [(1, RUNNING), (50, SUCCEEDED)],
        ["poll", "done"],
    ),
    (
        "preempted RUNNING -> PENDING stays started (no startup timeout)",
        {"startup_timeout": 10},
        [(1, RUNNING), (5, PENDING), (20, PENDING)],
        ["poll", "poll", "poll"],
    ),
    (
        "preempted: the run timeout still counts from the first start",
        {"run_timeout": 10},
        [(1, RUNNING), (5, PENDING), (8, RUNNING), (10.9, PENDING), (11, PENDING)],
        ["poll", "poll", "poll", "poll", "run_timeout"],
    ),
    # durations vs absolute deadlines: the earlier wins
    (
        "startup deadline earlier than the startup timeout",
        {"startup_timeout": 100, "startup_deadline": 20.0},
        [(19, PENDING), (20, PENDING)],
        ["poll", "startup_timeout"],
    ),
    (
        "startup timeout earlier than the startup deadline",
        {"startup_timeout": 20, "startup_deadline": 100.0},
        [(19, PENDING), (20, PENDING)],
        ["poll", "startup_timeout"],
    ),
    (
        "run deadline earlier than the run timeout",
        {"run_timeout": 100, "run_deadline": 30.0},
        [(10, RUNNING), (29, RUNNING), (30, RUNNING)],
        ["poll", "poll", "run_timeout"],
    ),
    (
        "run timeout earlier than the run deadline",
        {"run_timeout": 10, "run_deadline": 100.0},
        [(10, RUNNING), (19, RUNNING), (20, RUNNING)],
        ["poll", "poll", "run_timeout"],
    ),
    (
        "an absolute run deadline holds before the app started",
        {"run_deadline": 30.0},
        [(10, PENDING), (30, PENDING)],
        ["poll", "run_timeout"],
    ),
    # failed status calls: retried with backoff, the counter resets on success
    (
        "errors then recovery",
        {"max_poll_errors": 3},
        [(1, FLAKY), (2, FLAKY), (3, RUNNING), (4, FLAKY), (5, FLAKY), (6, SUCCEEDED)],
        ["poll", "poll", "poll", "poll", "poll", "done"],
    ),
    (
        "backend gone for good: lost after max_poll_errors in a row",
        {"max_poll_errors": 3},
        [(1, RUNNING), (2, FLAKY), (3, FLAKY), (4, FLAKY)],
        ["poll", "poll", "poll", "lost"],
    ),
    (
        "the default error budget is 10",
        {},
        [(t, FLAKY) for t in range(10)],
        ["poll"] * 9 + ["lost"],
    ),
    (
        "errors do not stop the startup clock",
        {"startup_timeout": 10},
        [(5, FLAKY), (11, PENDING)],
        ["poll", "startup_timeout"],
    ),
    (
        "a run deadline passes while status calls fail: the run timeout decides",
        {"run_timeout": 10},
        [(0, RUNNING), (5, FLAKY), (10, FLAKY)],
        ["poll", "poll", "run_timeout"],
    ),
    (
        "a startup deadline passes while status calls fail: the startup timeout decides",
        {"startup_timeout": 10},
        [(1, FLAKY), (10, FLAKY)],
        ["poll", "startup_timeout"],
    ),
    # errors that retrying cannot fix: lost at once
    (
        "bad input is lost at once",
        {},
        [(1, PollError(InvalidSpecError("app_handle", "x", "bad", "fix")))],
        ["lost"],
    ),
    (
        "a malformed handle is lost at once",
        {},
        [(1, PollError(MalformedAppHandleException("nope")))],
        ["lost"],
    ),
    (
        "an unknown scheduler is lost at once",
        {},
        [(1, PollError(UnknownSchedulerException("nope")))],
        ["lost"],
    ),
    # the app is unknown to the scheduler
    ("vanished (None)", {}, [(1, RUNNING), (2, None)], ["poll", "lost"]),
    ("vanished (the marker)", {}, [(1, Vanished)], ["lost"]),
    # final decisions stick, whatever comes next
    ("done sticks", {}, [(1, FAILED), (2, RUNNING), (3, None)], ["done"] * 3),
    (
        "a startup timeout sticks",
        {"startup_timeout": 1},
        [(1, PENDING), (2, SUCCEEDED), (3, FLAKY)],
        ["startup_timeout"] * 3,
    ),
    (
        "a run timeout sticks",
        {"run_timeout": 1},
        [(0, RUNNING), (1, RUNNING), (2, SUCCEEDED)],
        ["poll", "run_timeout", "run_timeout"],
    ),
    (
        "lost sticks",
        {"max_poll_errors": 1},
        [(1, FLAKY), (2, SUCCEEDED), (3, RUNNING)],
        ["lost"] * 3,
    ),
    ("vanished sticks", {}, [(1, None), (2, RUNNING)], ["lost", "lost"]),
]


@pytest.mark.parametrize(
    ("kwargs", "script", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decisions(kwargs: dict[str, Any], script: list[Any], expected: list[str]) -> None:
    assert [d.kind for d in feed(policy(**kwargs), script)] == expected


def test_a_sticking_decision_is_the_same_object() -> None:
    p = policy(startup_timeout=1)
    first = p.observe(PENDING, 2)
    assert p.observe(SUCCEEDED, 3) is first and p.finished is first


# --- what each decision carries ------------------------------------------------------------


def test_done_carries_the_terminal_status() -> None:
    ok = policy().observe(SUCCEEDED, 1)
    failed = policy().observe(AppStatus(S.FAILED, msg="exit 3"), 1)
    assert isinstance(ok, Done) and ok.succeeded
    assert isinstance(failed, Done) and not failed.succeeded and failed.status.msg == "exit 3"


@pytest.mark.parametrize(
    ("reason", "script", "cancel_on_failure", "cancels"),
    [
        ("poll_errors", [(1, RUNNING), (2, FLAKY), (3, FLAKY)], True, True),
        ("poll_errors", [(1, FLAKY), (2, FLAKY)], False, False),
        ("permanent_error", [(1, PollError(UnknownSchedulerException("x")))], True, True),
        ("permanent_error", [(1, PollError(UnknownSchedulerException("x")))], False, False),
        ("vanished", [(1, RUNNING), (2, None)], True, False),  # nothing left to cancel
    ],
)
def test_lost_says_why_and_whether_to_cancel(
    reason: str, script: list[Any], cancel_on_failure: bool, cancels: bool
) -> None:
    p = policy(max_poll_errors=2, cancel_on_failure=cancel_on_failure, handle="h://s/a")
    decision = feed(p, script)[-1]
    assert isinstance(decision, Lost)
    assert (decision.reason, decision.cancel) == (reason, cancels)
    assert "h://s/a" in decision.message
    if reason == "poll_errors":
        assert "2 failed status calls in a row" in decision.message
        assert "connection refused" in decision.message
        assert isinstance(decision.error, ConnectionError)
    if reason == "vanished":
        assert decision.status is not None and decision.status.state == S.RUNNING
        assert "no longer exists" in decision.message


def test_lost_keeps_the_last_status_seen() -> None:
    p = policy(max_poll_errors=2)
    decision = feed(p, [(1, RUNNING), (2, FLAKY), (3, FLAKY)])[-1]
    assert isinstance(decision, Lost)
    assert decision.status is not None and decision.status.state == S.RUNNING
    assert policy(max_poll_errors=1).observe(FLAKY, 1).status is None  # type: ignore[union-attr]


@pytest.mark.parametrize("cancel_on_timeout", [True, False])
def test_timeouts_say_what_to_raise_and_whether_to_cancel(cancel_on_timeout: bool) -> None:
    names = ("startup_s", "run_s")
    startup = policy(
        startup_timeout=5, handle="h://s/a", option_names=names, cancel_on_timeout=cancel_on_timeout
    ).observe(PENDING, 6)
    assert isinstance(startup, StartupTimedOut) and startup.cancel is cancel_on_timeout
    assert startup.status.state == S.PENDING
    assert "did not start (RUNNING) within 5s" in startup.message
    assert "raise startup_s" in startup.message and "h://s/a" in startup.message

    p = policy(run_timeout=1, option_names=names, cancel_on_timeout=cancel_on_timeout)
    run = feed(p, [(0, RUNNING), (2, RUNNING)])[-1]
    assert isinstance(run, RunTimedOut) and run.cancel is cancel_on_timeout
    assert "did not finish within 1s" in run.message and "raise run_s" in run.message
    assert ("being cancelled" in run.message) is cancel_on_timeout
    assert ("left running" in run.message) is not cancel_on_timeout


def test_a_deadline_without_a_duration_says_so() -> None:
    decision = policy(run_deadline=5.0).observe(RUNNING, 5)
    assert isinstance(decision, RunTimedOut) and "by its deadline" in decision.message


# --- the state the policy exposes ----------------------------------------------------------


def test_started_and_deadlines_are_readable() -> None:
    p = policy(startup_timeout=10, run_timeout=20)
    assert (p.started, p.startup_deadline, p.run_deadline) == (False, 10.0, None)
    p.observe(PENDING, 2)
    assert (p.started, p.run_deadline) == (False, None)
    p.observe(RUNNING, 4)
    assert (p.started, p.started_at, p.run_deadline) == (True, 4, 24)
    p.observe(PENDING, 6)  # preempted
    assert (p.started, p.started_at, p.run_deadline) == (True, 4, 24)
    assert p.last_status is not None and p.last_status.state == S.PENDING


def test_durations_count_from_the_watch_start_given_as_now() -> None:
    p = policy(startup_timeout=10, now=1000.0)
    assert p.startup_deadline == 1010.0
    assert p.observe(PENDING, 1009).kind == "poll"
    assert p.observe(PENDING, 1010).kind == "startup_timeout"


def test_a_resumed_watch_of_a_started_app_counts_its_run_from_now() -> None:
    resumed = policy(run_timeout=20, already_started=True, now=100.0, startup_timeout=1)
    assert (resumed.started, resumed.run_deadline) == (True, 120.0)
    assert resumed.observe(PENDING, 110).kind == "poll"  # no startup timeout: it started
    assert resumed.observe(RUNNING, 120).kind == "run_timeout"


def test_the_error_counter_resets_on_success() -> None:
    p = policy(max_poll_errors=3)
    counts = []
    script: list[tuple[float, Any]] = [(1, FLAKY), (2, FLAKY), (3, RUNNING), (4, FLAKY)]
    for now, observation in script:
        p.observe(observation, now)
        counts.append(p.poll_errors)
    assert counts == [1, 2, 0, 1]
    assert isinstance(p.last_error, ConnectionError)


def test_the_one_meaning_of_started() -> None:
    assert [s.name for s in AppState if has_started(s)] == [
        "RUNNING",
        "SUCCEEDED",
        "FAILED",
        "CANCELLED",
    ]


# --- polling delays ------------------------------------------------------------------------


def test_delays_back_off_from_a_tenth_of_a_second_jittered_and_capped() -> None:
    p = policy(poll_interval=2.0)
    delays = [p.observe(RUNNING, t).after for t in range(30)]  # type: ignore[union-attr]
    assert all(0 < d <= 2.0 for d in delays)
    assert delays[0] <= 0.1 and max(delays[-5:]) > 1.0  # backed off to near the cap
    assert len(set(delays[-10:])) > 1  # jittered, not in lockstep
    errors = policy(poll_interval=1.0, max_poll_errors=100)
    error_delays = [errors.observe(FLAKY, t).after for t in range(50)]  # type: ignore[union-attr]
    assert all(0 < d <= 1.0 for d in error_delays) and error_delays[0] <= 0.1


@pytest.mark.parametrize(
    ("kwargs", "script", "deadline"),
    [
        ({"run_deadline": 10.0}, [(0, RUNNING), (9.5, RUNNING), (9.99, PENDING)], 10.0),
        ({"run_timeout": 10}, [(2, RUNNING), (11.9, RUNNING)], 12.0),
        ({"startup_timeout": 10}, [(0, PENDING), (9.8, PENDING)], 10.0),
        ({"startup_deadline": 7.0}, [(3, PENDING), (6.5, PENDING)], 7.0),
        ({"run_deadline": 10.0, "max_poll_errors": 100}, [(1, FLAKY), (9.9, FLAKY)], 10.0),
    ],
    ids=["run deadline", "run timeout", "startup timeout", "startup deadline", "errors"],
)
def test_a_delay_never_overshoots_a_deadline(
    kwargs: dict[str, Any], script: list[Any], deadline: float
) -> None:
    p = policy(poll_interval=60.0, **kwargs)
    for now, observation in script:
        decision = p.observe(observation, now)
        assert isinstance(decision, Poll)
        assert decision.after > 0 and now + decision.after <= deadline + 0.01


def test_a_deadline_passing_while_status_calls_fail_ends_the_watch() -> None:
    p = policy(poll_interval=1.0, run_deadline=3.0, max_poll_errors=10_000)
    now, decision = 0.0, p.observe(RUNNING, 0.0)
    for _ in range(100):
        if not isinstance(decision, Poll):
            break
        now += decision.after
        decision = p.observe(FLAKY, now)
    assert not isinstance(decision, Poll), f"still polling at t={now:.3f} (deadline 3)"
    assert now < 3.0 + 1.0


def test_once_started_the_startup_deadline_no_longer_shortens_delays() -> None:
    p = policy(poll_interval=2.0, startup_timeout=1)
    p.observe(RUNNING, 0.5)
    delays = [p.observe(RUNNING, t).after for t in range(1, 30)]  # type: ignore[union-attr]
    assert max(delays) > 1.0


def test_a_driver_with_a_change_feed_resyncs_a_healthy_app_rarely() -> None:
    p = policy(poll_interval=2.0)
    decision = p.observe(RUNNING, 0.0)
    assert isinstance(decision, Poll)
    assert decision.after <= 2.0 and decision.resync == FEED_RESYNC_S
    assert decision.wait(feed=True) == FEED_RESYNC_S and decision.wait(feed=False) <= 2.0
    # a poll interval longer than the resync is the user's choice: kept
    slow = policy(poll_interval=600.0).observe(RUNNING, 0.0)
    assert isinstance(slow, Poll) and slow.resync == 600.0


def test_the_resync_never_overshoots_a_deadline() -> None:
    for kwargs, observation, deadline in (
        ({"run_timeout": 5.0}, RUNNING, 5.0),
        ({"startup_timeout": 7.0}, PENDING, 7.0),
        ({"run_deadline": 3.0}, RUNNING, 3.0),
    ):
        decision = policy(poll_interval=2.0, **kwargs).observe(observation, 0.0)
        assert isinstance(decision, Poll) and decision.resync is not None
        assert 0 < decision.resync <= deadline + 0.01, kwargs


def test_after_a_failed_poll_the_backoff_holds_even_with_a_feed() -> None:
    p = policy(poll_interval=2.0)
    p.observe(RUNNING, 0.0)
    decision = p.observe(FLAKY, 1.0)
    assert isinstance(decision, Poll) and decision.resync is None
    assert decision.wait(feed=True) == decision.after <= 2.0


# --- bad arguments -------------------------------------------------------------------------

_SECONDS = ("poll_interval", "startup_timeout", "run_timeout", "startup_deadline", "run_deadline")
_BAD_SECONDS = [math.nan, math.inf, -math.inf, -1, True, False, "5", None]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (field, value)
        for field in (*_SECONDS, "now")
        for value in _BAD_SECONDS
        # None means "no limit" (or "the time now") for every argument but poll_interval
        if value is not None or field == "poll_interval"
    ],
    ids=repr,
)
def test_a_bad_number_of_seconds_names_its_field(field: str, value: object) -> None:
    with pytest.raises(InvalidSpecError) as err:
        policy(**{field: value})
    assert err.value.field == field


def test_poll_interval_must_be_positive() -> None:
    with pytest.raises(InvalidSpecError) as err:
        policy(poll_interval=0)
    assert err.value.field == "poll_interval"
    assert policy(startup_timeout=0, run_timeout=0).startup_deadline == 0.0  # 0 limits are fine


@pytest.mark.parametrize("value", [0, -1, 2.5, True, math.nan, "10", None])
def test_a_bad_error_budget_names_its_field(value: object) -> None:
    with pytest.raises(InvalidSpecError) as err:
        policy(max_poll_errors=value)
    assert err.value.field == "max_poll_errors"


def test_poll_intervals_rejects_what_cannot_work() -> None:
    for cap in (0, -1, math.inf, math.nan, True):
        with pytest.raises(InvalidSpecError) as err:
            poll_intervals(cap)
        assert err.value.field == "cap"
    for factor in (0.5, math.nan, math.inf, True):
        with pytest.raises(InvalidSpecError) as err:
            poll_intervals(1.0, factor=factor)
        assert err.value.field == "factor"
    with pytest.raises(InvalidSpecError) as err:
        poll_intervals(1.0, initial=-1)
    assert err.value.field == "initial"
    assert isinstance(next(poll_intervals(1.0)), float)
