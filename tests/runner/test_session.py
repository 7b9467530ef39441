"""The session driver (``anylaunch.runner.session``) on real local_cwd apps, with faults
injected only into the status calls (``faulty_local``): what every engine now relies on."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import anylaunch.specs as specs
from anylaunch.runner import Runner, get_runner
from anylaunch.runner.session import AppSession, cancel_app
from anylaunch.specs import AppState
from tests.integrations.lifecycle.faulty_local import INJECTED, write_rules
from tests.integrations.lifecycle.matrix import faulty_local_plugin as faulty_local_plugin

SECRET = "s3cr3t-value-123"


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runner]:
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    faults = tmp_path / "faults"
    write_rules(faults, [])
    monkeypatch.setenv("ANYLAUNCH_TEST_FAULTS", str(faults))
    with get_runner() as runner:
        yield runner


def _app(name: str, code: str, env: dict[str, str] | None = None) -> specs.AppDef:
    role = specs.Role("w", ".", entrypoint=sys.executable, args=["-c", code], env=env or {})
    return specs.AppDef(name, [role])


class Said(list[tuple[int, str]]):
    """A sink that keeps every record."""

    def __call__(self, level: int, text: str) -> None:
        self.append((level, text))

    def texts(self, level: int | None = None) -> list[str]:
        return [t for lvl, t in self if level is None or lvl == level]


def test_a_run_says_each_state_once_streams_every_line_masked_and_succeeds(
    runner: Runner,
) -> None:
    code = "import os\nfor i in range(3): print(f'line {i}', os.environ['API_TOKEN'], flush=True)"
    handle = runner.run(_app("lines", code, {"API_TOKEN": SECRET}), "local_cwd")
    said, registered = Said(), []
    session = AppSession(
        runner,
        handle,
        sink=said,
        poll_interval=0.2,
        learn_secrets=True,
        on_secrets=registered.append,
    )
    outcome = session.run()

    assert outcome.kind == "succeeded" and outcome.message == "" and outcome.category is None
    assert registered == [(SECRET,)]  # told to the engine's masker, once
    lines = [t for t in said.texts(logging.INFO) if t.startswith("w/0 ")]
    assert lines == [f"w/0 line {i} ***" for i in range(3)]  # one record per line, masked
    states = [t for t in said.texts() if t.startswith(f"anylaunch app {handle} is ")]
    assert states == sorted(set(states), key=states.index)  # each state said once
    assert states[-1] == f"anylaunch app {handle} is SUCCEEDED"
    assert not any(SECRET in t for t in said.texts())
    assert outcome.tail == tuple(lines)


def test_the_state_the_caller_already_told_is_not_said_again(runner: Runner) -> None:
    handle = runner.run(_app("told", "import time; time.sleep(3)"), "local_cwd")
    deadline = time.monotonic() + 60
    while (status := runner.status(handle)) is None or status.state != AppState.RUNNING:
        assert time.monotonic() < deadline, status
        time.sleep(0.1)
    said = Said()  # the caller has told RUNNING (e.g. in its launch line)
    outcome = AppSession(
        runner, handle, sink=said, poll_interval=0.2, said_state=AppState.RUNNING
    ).run()

    assert outcome.kind == "succeeded"
    states = [t for t in said.texts() if t.startswith(f"anylaunch app {handle} is ")]
    assert states == [f"anylaunch app {handle} is SUCCEEDED"], said


@pytest.mark.usefixtures("faulty_local_plugin")
def test_poll_errors_warn_once_per_streak_and_the_recovery_is_said(
    runner: Runner, tmp_path: Path
) -> None:
    handle = runner.run(_app("flaky", "import time; time.sleep(3)"), "faulty_local")
    write_rules(tmp_path / "faults", ["flaky errors 3"])
    said = Said()
    outcome = AppSession(runner, handle, sink=said, poll_interval=0.2, logs="off").run()

    assert outcome.kind == "succeeded"
    warnings = said.texts(logging.WARNING)
    assert len(warnings) == 1 and INJECTED in warnings[0], warnings
    assert any("answers again after 3 failed call(s)" in t for t in said.texts(logging.INFO))


@pytest.mark.usefixtures("faulty_local_plugin")
def test_a_watch_lost_to_errors_cancels_the_app_by_the_cancel_rule(
    runner: Runner, tmp_path: Path
) -> None:
    handle = runner.run(_app("gone", "import time; time.sleep(120)"), "faulty_local")
    write_rules(tmp_path / "faults", ["gone down after 1"])
    said = Said()
    session = AppSession(
        runner, handle, sink=said, poll_interval=0.1, max_poll_errors=3, cancel_wait_s=0
    )
    outcome = session.run()

    assert outcome.kind == "lost" and outcome.cancelled and session.cancelled
    assert "failed status calls in a row" in outcome.message
    assert any(f"cancelling anylaunch app {handle}" in t for t in said.texts(logging.WARNING))
    write_rules(tmp_path / "faults", [])  # the status API is back: the app was cancelled
    deadline = time.monotonic() + 60
    while (status := runner.status(handle)) is not None and not status.is_terminal():
        assert time.monotonic() < deadline, status
        time.sleep(0.1)
    assert status is not None and status.state == AppState.CANCELLED


def test_a_run_timeout_cancels_and_waits_for_the_end(runner: Runner) -> None:
    code = "import time; print('started', flush=True); time.sleep(120)"
    handle = runner.run(_app("slow", code), "local_cwd")
    said = Said()
    outcome = AppSession(
        runner, handle, sink=said, poll_interval=0.2, run_timeout=1, cancel_wait_s=30
    ).run()

    assert outcome.kind == "run_timeout" and outcome.cancelled
    # the session waited for the end: the outcome carries the end state, not RUNNING
    assert outcome.status is not None and outcome.status.state == AppState.CANCELLED
    assert outcome.message.startswith(f"anylaunch app {handle} did not finish within 1s")
    assert f"anylaunch app {handle} ended CANCELLED" in said.texts(logging.WARNING)


def test_an_interruption_cancels_the_app_before_it_propagates(runner: Runner) -> None:
    handle = runner.run(_app("interrupted", "import time; time.sleep(120)"), "local_cwd")

    class Killed(Exception):
        pass

    ticks = 0

    def tick() -> None:  # the engine's timeout fires while the session waits
        nonlocal ticks
        ticks += 1
        if ticks == 5:
            raise Killed

    session = AppSession(runner, handle, poll_interval=0.2, on_tick=tick, logs="off")
    with pytest.raises(Killed):
        session.run(interrupt_cancels=(Killed,))
    assert session.cancelled
    assert runner.cancel_requested(handle)


def test_the_cursor_reads_by_position_and_resumes_where_it_stopped(runner: Runner) -> None:
    code = "for i in range(4): print(f'row {i}', flush=True)"
    handle = runner.run(_app("cursor", code), "local_cwd")
    assert runner.wait(handle, wait_interval=0.2) is not None
    first = AppSession(runner, handle, logs="cursor", log_positions={"w/0": 1})
    assert first.step().kind == "done"
    assert first.read_logs() == 3
    assert first.tail == ["w/0 row 1", "w/0 row 2", "w/0 row 3"]
    assert first.log_positions == {"w/0": 4}
    again = AppSession(runner, handle, logs="cursor", log_positions=first.log_positions)
    again.step()
    assert again.read_logs() == 0  # a restarted driver shows no line twice


def test_arun_is_the_asyncio_twin(runner: Runner) -> None:
    handle = runner.run(_app("async", "print('hello', flush=True)"), "local_cwd")
    said = Said()
    outcome = asyncio.run(AppSession(runner, handle, sink=said, poll_interval=0.2).arun())
    assert outcome.kind == "succeeded"
    assert "w/0 hello" in said.texts(logging.INFO)


def test_a_vanished_app_is_lost_without_a_cancel(runner: Runner) -> None:
    handle = runner.run(_app("deleted", "import time; time.sleep(120)"), "local_cwd")
    runner.cancel(handle)
    runner.delete(handle)
    outcome = AppSession(runner, handle, poll_interval=0.2, logs="off").run()
    assert outcome.kind == "lost" and not outcome.cancelled
    assert "no longer exists" in outcome.message


def test_cancel_app_is_a_no_op_for_an_ended_app(runner: Runner) -> None:
    handle = runner.run(_app("ended", "pass"), "local_cwd")
    ended = runner.wait(handle, wait_interval=0.2)
    assert ended is not None and ended.state == AppState.SUCCEEDED
    status = cancel_app(handle, runner=runner)
    assert status is not None and status.state == AppState.SUCCEEDED
    assert not runner.cancel_requested(handle)


def test_a_wait_between_polls_wakes_on_the_change_feed(runner: Runner) -> None:
    """Every driver, the Airflow operator's sync wait included, waits on the scheduler's feed:
    each pause of 120 s ends as soon as the app changes (local_cwd: inotify on its state), so
    the whole watch of a 2 s app takes far less than one pause."""
    from anylaunch.runner.watch import Poll

    handle = runner.run(_app("woken", "import time; time.sleep(2)"), "local_cwd")
    session = AppSession(runner, handle, poll_interval=120, logs="off")
    began = time.monotonic()
    decision = session.step()
    while decision.kind == "poll":
        session.pause(Poll(120.0, resync=120.0))
        decision = session.step()
    assert decision.kind == "done"
    assert time.monotonic() - began < 60, "a pause slept on instead of waking on the feed"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"sink": "print"}, "sink"),
        ({"logs": "all"}, "logs"),
        ({"log_roles": "trainer"}, "log_roles"),
        ({"log_replicas": [-1]}, "log_replicas"),
        ({"log_positions": {"w/0": "3"}}, "log_positions"),
        ({"tail_size": 2.5}, "tail_size"),
        ({"cancel_wait_s": float("nan")}, "cancel_wait_s"),
        ({"poll_interval": float("inf")}, "poll_interval"),
        ({"learn_secrets": "yes"}, "learn_secrets"),
        ({"secrets": ["s3cr3t-value-123"]}, "secrets"),
        ({"names": ("a", "b", "c")}, "names"),
        ({"said_state": "PENDING"}, "said_state"),
    ],
)
def test_bad_arguments_are_refused_naming_the_field(
    runner: Runner, kwargs: dict[str, object], field: str
) -> None:
    from anylaunch.specs.errors import InvalidSpecError

    with pytest.raises(InvalidSpecError, match=f"^{field}=") as err:
        AppSession(runner, "local_cwd://s/app-1", **kwargs)  # type: ignore[arg-type]
    assert "Fix:" in str(err.value)


def test_cancel_app_and_change_feed_refuse_bad_input(runner: Runner) -> None:
    from anylaunch.specs.errors import (
        InvalidSpecError,
        MalformedAppHandleException,
        UnknownSchedulerException,
    )

    with pytest.raises(MalformedAppHandleException):
        cancel_app("not a handle", runner=runner)
    with pytest.raises(InvalidSpecError, match=r"^wait_s="):
        cancel_app("local_cwd://s/app-1", float("nan"), runner=runner)
    with pytest.raises(UnknownSchedulerException):
        runner.change_feed(["local_cwd"])  # type: ignore[arg-type]


def test_an_outcome_shows_no_secret(runner: Runner) -> None:
    code = "import os, sys; print(os.environ['API_TOKEN'], file=sys.stderr); sys.exit(2)"
    handle = runner.run(_app("leaky", code, {"API_TOKEN": SECRET}), "local_cwd")
    outcome = AppSession(runner, handle, poll_interval=0.2, learn_secrets=True).run()
    assert outcome.kind == "failed"
    assert SECRET not in repr(outcome) and SECRET not in outcome.message
    assert outcome.status is not None and SECRET not in repr(outcome.status)
