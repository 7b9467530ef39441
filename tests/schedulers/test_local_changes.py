"""The local_cwd change feed on real apps: inotify on the state files, the pidfd of the
supervisor, and the stat-polling fallback.

A feed's ``wait`` returns True when woken by a change and False on its timeout: the tests
assert which one happened (the timeouts are long where a wake is expected), never durations.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from anylaunch.schedulers.local import state as ls
from anylaunch.schedulers.local.changes import LocalChangeFeed, feed_for
from anylaunch.schedulers.local_scheduler import LocalScheduler, create_scheduler
from anylaunch.specs import AppState
from tests.schedulers.local_helpers import py_role, run, wait_done, wait_running

# a replica that runs until the file named by its argument exists
UNTIL_FILE = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.01)\n"
WAKE_TIMEOUT_S = 60.0  # a wake that needs the timeout fails the test (wait returns False)


@pytest.fixture
def sched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalScheduler]:
    monkeypatch.setenv(ls.STATE_DIR_ENV, str(tmp_path / "state"))
    scheduler = create_scheduler("test")
    yield scheduler
    for app in scheduler.list():
        if not app.state.is_terminal():
            scheduler.cancel(app.app_id)
            wait_done(scheduler, app.app_id)
    scheduler.change_feed().close()


def drain(feed: LocalChangeFeed, app_id: str) -> None:
    """Consumes the changes of ``app_id`` seen so far, until none came for a while (the
    first wait arms the watch; the polling watcher sees a change up to a poll later)."""
    while feed.wait([app_id], timeout=4 * feed.poll_interval):
        pass


def wait_for_end(sched: LocalScheduler, feed: LocalChangeFeed, app_id: str) -> AppState:
    """Waits on the feed between polls until the app ended; every wait must be a wake."""
    while True:
        desc = sched.describe(app_id)
        assert desc is not None
        if desc.state.is_terminal():
            return desc.state
        assert feed.wait([app_id], timeout=WAKE_TIMEOUT_S), "the app's change did not wake"


@pytest.mark.parametrize("use_inotify", [True, False], ids=["inotify", "polling"])
def test_the_end_of_an_app_wakes_its_waiter(
    sched: LocalScheduler, tmp_path: Path, use_inotify: bool
) -> None:
    feed = LocalChangeFeed(sched.state_root(), use_inotify=use_inotify)
    try:
        assert feed.uses_inotify is (use_inotify and sys.platform.startswith("linux"))
        go = tmp_path / "go"
        app_id = run(sched, py_role("w", UNTIL_FILE, str(go)))
        assert feed.wait([app_id], timeout=0.0), "the first wait returns at once (arming)"
        wait_running(sched, app_id)
        drain(feed, app_id)
        assert not feed.wait([app_id], timeout=0.2), "nothing changed since: no wake"
        go.touch()
        assert wait_for_end(sched, feed, app_id) == AppState.SUCCEEDED
    finally:
        feed.close()


def test_an_unrelated_app_does_not_wake_the_waiter(sched: LocalScheduler, tmp_path: Path) -> None:
    feed = sched.change_feed()
    waited = run(sched, py_role("w", UNTIL_FILE, str(tmp_path / "never")), name="waited")
    other = run(sched, py_role("w", UNTIL_FILE, str(tmp_path / "go")), name="other")
    feed.wait([waited, other], timeout=0.0)
    wait_running(sched, waited)
    wait_running(sched, other)
    drain(feed, waited)
    drain(feed, other)
    (tmp_path / "go").touch()
    assert wait_for_end(sched, feed, other) == AppState.SUCCEEDED
    # the other app's end (several state writes) is not a change of the waited one
    assert not feed.wait([waited], timeout=0.3)
    desc = sched.describe(waited)
    assert desc is not None and desc.state == AppState.RUNNING


def test_a_cancel_wakes_the_waiter(sched: LocalScheduler, tmp_path: Path) -> None:
    feed = sched.change_feed()
    app_id = run(sched, py_role("w", UNTIL_FILE, str(tmp_path / "never")))
    feed.wait([app_id], timeout=0.0)
    wait_running(sched, app_id)
    drain(feed, app_id)
    sched.cancel(app_id)
    assert wait_for_end(sched, feed, app_id) == AppState.CANCELLED


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this platform")
def test_a_dead_supervisor_wakes_the_waiter(sched: LocalScheduler, tmp_path: Path) -> None:
    # it dies without recording anything: only its pidfd can tell
    feed = sched.change_feed()
    app_id = run(sched, py_role("w", UNTIL_FILE, str(tmp_path / "never")))
    desc = wait_running(sched, app_id)
    feed.wait([app_id], timeout=0.0)
    drain(feed, app_id)
    os.kill(int(desc.metadata["supervisor_pid"]), signal.SIGKILL)
    assert feed.wait([app_id], timeout=WAKE_TIMEOUT_S)
    end = wait_done(sched, app_id)  # the poll after the wake ends the app for it
    assert end.state == AppState.FAILED and end.msg.startswith("supervisor died")


def test_deleting_an_app_wakes_its_waiter(sched: LocalScheduler) -> None:
    feed = sched.change_feed()
    app_id = run(sched, py_role("w", "pass"))
    wait_done(sched, app_id)
    feed.wait([app_id], timeout=0.0)
    drain(feed, app_id)
    sched.delete(app_id)
    assert feed.wait([app_id], timeout=WAKE_TIMEOUT_S)
    assert sched.describe(app_id) is None


def test_one_feed_per_state_root(tmp_path: Path) -> None:
    a = LocalScheduler("a", state_dir=tmp_path / "one")
    b = LocalScheduler("b", state_dir=tmp_path / "one")
    c = LocalScheduler("c", state_dir=tmp_path / "two")
    try:
        assert a.change_feed() is b.change_feed() is feed_for(tmp_path / "one")
        assert a.change_feed() is not c.change_feed()
    finally:
        a.change_feed().close()
        c.change_feed().close()
    # a closed feed leaves the registry: the next caller gets a working one
    assert a.change_feed() is not feed_for(tmp_path / "two")
    a.change_feed().close()


def test_a_forked_child_gets_a_working_feed(sched: LocalScheduler, tmp_path: Path) -> None:
    feed = sched.change_feed()
    app_id = run(sched, py_role("w", UNTIL_FILE, str(tmp_path / "go")))
    feed.wait([app_id], timeout=0.0)  # the parent's watcher runs
    wait_running(sched, app_id)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the watcher thread did not survive the fork
        code = 1
        try:
            child_feed = sched.change_feed()
            child_feed.wait([app_id], timeout=0.0)
            drain(child_feed, app_id)
            os.write(write_end, b"armed")
            woke = child_feed.wait([app_id], timeout=WAKE_TIMEOUT_S)
            code = 0 if woke else 2
        finally:
            os._exit(code)
    os.close(write_end)
    assert os.read(read_end, 16) == b"armed"
    os.close(read_end)
    (tmp_path / "go").touch()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert wait_done(sched, app_id).state == AppState.SUCCEEDED
