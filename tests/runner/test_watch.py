"""The lifecycle policy on its own: a fake clock, scripted observations, no backend."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import pytest

from anylaunch.runner.watch import (
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
from anylaunch.specs.errors import InvalidSpecError, UnknownSchedulerException

S = AppState
FLAKY = PollError(ConnectionError("connection refused"))


def status(state: AppState) -> AppStatus:
    return AppStatus(state)


def run(policy: WatchPolicy, script: Sequence[tuple[float, Any]]) -> list[str]:
    """Feeds (time, observation) pairs; returns the decision kinds."""
    return [policy.observe(obs, now).kind for now, obs in script]


def policy(**kwargs: Any) -> WatchPolicy:
    kwargs.setdefault("now", 0.0)
    kwargs.setdefault("rng", random.Random(0))
    return WatchPolicy(kwargs.pop("poll_interval", 5.0), **kwargs)


CASES = [
    # name, policy kwargs, script, expected kinds
    (
        "succeeds",
        {},
        [(1, status(S.PENDING)), (2, status(S.RUNNING)), (3, status(S.SUCCEEDED))],
        ["poll", "poll", "done"],
    ),
    ("fails", {}, [(1, status(S.RUNNING)), (2, status(S.FAILED))], ["poll", "done"]),
    ("cancelled elsewhere", {}, [(1, status(S.CANCELLED))], ["done"]),
    (
        "startup timeout",
        {"startup_timeout": 10},
        [(5, status(S.PENDING)), (10, status(S.PENDING))],
        ["poll", "startup_timeout"],
    ),
    (
        "started in time",
        {"startup_timeout": 10},
        [(9, status(S.RUNNING)), (50, status(S.RUNNING))],
        ["poll", "poll"],
    ),
    (
        "ended before startup deadline",
        {"startup_timeout": 10},
        [(20, status(S.SUCCEEDED))],
        ["done"],
    ),
    (
        "run timeout counts from start",
        {"run_timeout": 10},
        [
            (100, status(S.PENDING)),
            (105, status(S.RUNNING)),
            (114, status(S.RUNNING)),
            (115, status(S.RUNNING)),
        ],
        ["poll", "poll", "poll", "run_timeout"],
    ),
    (
        "absolute run deadline",
        {"run_deadline": 30.0},
        [(10, status(S.PENDING)), (30, status(S.PENDING))],
        ["poll", "run_timeout"],
    ),
    (
        "earlier of deadline and timeout",
        {"startup_timeout": 100, "startup_deadline": 20.0},
        [(19, status(S.SUBMITTED)), (20, status(S.SUBMITTED))],
        ["poll", "startup_timeout"],
    ),
    (
        "preempted stays started",
        {"startup_timeout": 10},
        [(1, status(S.RUNNING)), (20, status(S.PENDING))],
        ["poll", "poll"],
    ),
    (
        "UNKNOWN is not started",
        {"startup_timeout": 10},
        [(1, status(S.UNKNOWN)), (10, status(S.UNKNOWN))],
        ["poll", "startup_timeout"],
    ),
    (
        "errors then recovery",
        {"max_poll_errors": 3},
        [
            (1, FLAKY),
            (2, FLAKY),
            (3, status(S.RUNNING)),
            (4, FLAKY),
            (5, FLAKY),
            (6, status(S.SUCCEEDED)),
        ],
        ["poll", "poll", "poll", "poll", "poll", "done"],
    ),
    (
        "backend gone for good",
        {"max_poll_errors": 3},
        [(1, status(S.RUNNING)), (2, FLAKY), (3, FLAKY), (4, FLAKY)],
        ["poll", "poll", "poll", "lost"],
    ),
    (
        "bad input is lost at once",
        {},
        [(1, PollError(InvalidSpecError("app_handle", "x", "bad", "fix")))],
        ["lost"],
    ),
    (
        "unknown scheduler is lost at once",
        {},
        [(1, PollError(UnknownSchedulerException("nope")))],
        ["lost"],
    ),
    ("vanished (None)", {}, [(1, status(S.RUNNING)), (2, None)], ["poll", "lost"]),
    ("vanished (marker)", {}, [(1, Vanished)], ["lost"]),
    (
        "final decisions stick",
        {},
        [(1, status(S.FAILED)), (2, status(S.RUNNING))],
        ["done", "done"],
    ),
]


@pytest.mark.parametrize(
    ("kwargs", "script", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decisions(kwargs: dict[str, Any], script: list[Any], expected: list[str]) -> None:
    assert run(policy(**kwargs), script) == expected


def test_what_a_lost_watch_says_and_whether_it_cancels() -> None:
    gone = policy(max_poll_errors=2)
    gone.observe(status(S.RUNNING), 1)
    gone.observe(FLAKY, 2)
    decision = gone.observe(FLAKY, 3)
    assert isinstance(decision, Lost)
    assert (decision.reason, decision.cancel) == ("poll_errors", True)
    assert "2 failed status calls" in decision.message and "connection refused" in decision.message
    assert decision.status is not None and decision.status.state == S.RUNNING

    vanished = policy().observe(None, 1)
    assert isinstance(vanished, Lost) and (vanished.reason, vanished.cancel) == ("vanished", False)

    keep = policy(max_poll_errors=1, cancel_on_failure=False).observe(FLAKY, 1)
    assert isinstance(keep, Lost) and not keep.cancel


def test_timeouts_say_what_to_raise_and_honour_cancel_on_timeout() -> None:
    p = policy(startup_timeout=5, handle="h://s/a", option_names=("startup_s", "run_s"))
    decision = p.observe(status(S.PENDING), 6)
    assert isinstance(decision, StartupTimedOut) and decision.cancel
    assert "did not start (RUNNING) within 5s" in decision.message
    assert "raise startup_s" in decision.message and "h://s/a" in decision.message

    keep = policy(run_timeout=1, cancel_on_timeout=False)
    keep.observe(status(S.RUNNING), 0)
    decision = keep.observe(status(S.RUNNING), 2)
    assert isinstance(decision, RunTimedOut) and not decision.cancel
    assert "left running" in decision.message


def test_delays_back_off_are_jittered_capped_and_never_overshoot_a_deadline() -> None:
    p = policy(poll_interval=2.0)
    delays = [p.observe(status(S.RUNNING), t).after for t in range(30)]  # type: ignore[union-attr]
    assert all(0 < d <= 2.0 for d in delays)
    assert delays[0] <= 0.1 and max(delays[-5:]) > 1.0  # backed off to near the cap
    near = policy(poll_interval=60.0, run_deadline=10.0)
    for t in (0, 9.5):
        decision = near.observe(status(S.RUNNING), t)
        assert isinstance(decision, Poll) and t + decision.after <= 10.0 + 0.01
    # an error resets nothing but the counter, and polls back off too
    errors = policy(poll_interval=1.0, max_poll_errors=100)
    assert all(isinstance(errors.observe(FLAKY, t), Poll) for t in range(50))


def test_started_and_deadlines_are_readable() -> None:
    p = policy(startup_timeout=10, run_timeout=20)
    assert (p.started, p.startup_deadline, p.run_deadline) == (False, 10.0, None)
    p.observe(status(S.RUNNING), 4)
    assert (p.started, p.started_at, p.run_deadline) == (True, 4, 24)
    resumed = policy(run_timeout=20, already_started=True, now=100.0)
    assert resumed.run_deadline == 120.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"poll_interval": 0}, "poll_interval"),
        ({"poll_interval": math.nan}, "poll_interval"),
        ({"poll_interval": math.inf}, "poll_interval"),
        ({"poll_interval": True}, "poll_interval"),
        ({"startup_timeout": -1}, "startup_timeout"),
        ({"run_timeout": math.inf}, "run_timeout"),
        ({"run_deadline": math.nan}, "run_deadline"),
        ({"startup_deadline": "soon"}, "startup_deadline"),
        ({"max_poll_errors": 0}, "max_poll_errors"),
        ({"max_poll_errors": 2.5}, "max_poll_errors"),
    ],
)
def test_invalid_arguments_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidSpecError) as err:
        policy(**kwargs)
    assert err.value.field == field


def test_the_one_meaning_of_started() -> None:
    assert [s.name for s in AppState if has_started(s)] == [
        "RUNNING",
        "SUCCEEDED",
        "FAILED",
        "CANCELLED",
    ]


def test_poll_intervals_rejects_what_cannot_work() -> None:
    for cap in (0, -1, math.inf, math.nan):
        with pytest.raises(InvalidSpecError):
            poll_intervals(cap)
    with pytest.raises(InvalidSpecError):
        poll_intervals(1.0, factor=0.5)
    assert isinstance(next(poll_intervals(1.0)), float)
    assert isinstance(Done(status(S.SUCCEEDED)).succeeded, bool)
