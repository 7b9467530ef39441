"""The one reattach rule (``runner.driver.status_for_reattach``) on real local_cwd apps: an
app whose cancel was requested is never adopted, even while it is still stopping."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import anylaunch.specs as specs
from anylaunch.runner import Runner, get_runner
from anylaunch.runner.driver import AppBeingCancelledError, status_for_reattach

#: Runs until cancelled, then takes ``argv[1]`` seconds to stop.
SLOW_STOP = (
    "import signal, sys, time\n"
    "def stop(*_):\n"
    "    time.sleep(float(sys.argv[1]))\n"
    "    sys.exit(143)\n"
    "signal.signal(signal.SIGTERM, stop)\n"
    "print('up', flush=True)\n"
    "time.sleep(300)\n"
)


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runner]:
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    with get_runner() as runner:
        yield runner


def _running(runner: Runner, stop_s: float) -> str:
    app = specs.AppDef(
        "slowstop",
        [specs.Role("w", ".", entrypoint=sys.executable, args=["-c", SLOW_STOP, str(stop_s)])],
    )
    handle = runner.run(app, "local_cwd", cfg={"cancel_grace_s": 60})
    deadline = time.monotonic() + 120
    while not list(runner.log_lines(handle, "w", 0)):
        assert time.monotonic() < deadline, "the app never started"
        time.sleep(0.05)
    return handle


def test_a_running_app_is_adopted(runner: Runner) -> None:
    handle = _running(runner, 0)
    status = status_for_reattach(runner, handle, timeout_s=5)
    assert status is not None and status.state == specs.AppState.RUNNING
    assert not runner.cancel_requested(handle)
    runner.cancel(handle)


def test_an_app_being_cancelled_is_waited_for_and_not_adopted(runner: Runner) -> None:
    handle = _running(runner, 3)
    runner.cancel(handle)  # a request: the app takes 3 s to stop
    status = runner.status(handle)
    assert status is not None and status.state == specs.AppState.RUNNING  # still stopping
    assert runner.cancel_requested(handle)

    status = status_for_reattach(runner, handle, timeout_s=120)
    assert status is not None and status.state == specs.AppState.CANCELLED


def test_an_app_that_does_not_stop_in_time_is_neither_adopted_nor_doubled(runner: Runner) -> None:
    handle = _running(runner, 30)
    runner.cancel(handle)
    with pytest.raises(AppBeingCancelledError, match="being cancelled"):
        status_for_reattach(runner, handle, timeout_s=1)


def test_an_app_whose_try_the_user_ended_is_cancelled_and_not_adopted(runner: Runner) -> None:
    """No cancel was requested yet (the earlier try's own cleanup may come later): the engine's
    word that the user ended that try decides, and the cancel is recorded on the app."""
    handle = _running(runner, 1)
    assert not runner.cancel_requested(handle)

    status = status_for_reattach(runner, handle, timeout_s=120, ended_by_user=True)
    assert status is not None and status.state == specs.AppState.CANCELLED
    assert runner.cancel_requested(handle)
    # an app that already ended is only reported: there is nothing to cancel
    status = status_for_reattach(runner, handle, timeout_s=1, ended_by_user=True)
    assert status is not None and status.state == specs.AppState.CANCELLED
