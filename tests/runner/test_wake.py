"""The change feed and the waiter threads built on it: wake-ups are delivered once, memory
stays bounded and nothing keeps running (or spinning) once nobody waits."""

import asyncio
import threading
import time
from pathlib import Path

import pytest

from anylaunch.runner import get_runner
from anylaunch.runner.wake import AsyncChangeWaiter, scheduler_change_feed
from anylaunch.schedulers.common.changes import ChangeFeed, ManualChangeFeed
from anylaunch.specs.errors import UnknownSchedulerException


def thread_cpu_seconds(thread: threading.Thread) -> float:
    """CPU seconds one thread of this process has used (Linux: its /proc stat)."""
    import os

    with open(f"/proc/self/task/{thread.native_id}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_notify_all_wakes_each_app_once_even_with_unclaimed_changes_pending() -> None:
    feed = ManualChangeFeed()
    feed.notify("nobody-waits-on-this")
    feed.notify_all()
    feed.notify("also-unclaimed")
    assert feed.wait(["a"], 0.0) is True
    assert feed.wait(["a"], 0.0) is False  # taken: no endless wake-ups
    assert feed.wait(["b"], 0.0) is True  # every other app still gets its one wake-up
    assert feed.peek(["also-unclaimed"]) is True
    assert feed.peek(["also-unclaimed"]) is True  # peek leaves it pending
    assert feed.wait(["also-unclaimed"], 0.0) is True


def test_unclaimed_changes_are_bounded_and_degrade_to_one_extra_wake_up() -> None:
    feed = ManualChangeFeed(max_tracked=100)
    for i in range(1000):
        feed.notify(f"app-{i}")
    assert len(feed._changed) <= 100
    assert feed.wait(["app-5"], 0.0) is True  # forgotten specifics still wake their app
    assert feed.wait(["app-5"], 0.0) is False
    for i in range(200):  # the apps that caught up are bounded too
        feed.wait([f"x-{i}"], 0.0)
    assert len(feed._caught_up) <= 100


def test_the_waiter_thread_ends_once_nobody_waits_and_does_not_spin() -> None:
    feed = ManualChangeFeed()
    waiter = AsyncChangeWaiter(feed, tick=0.05)

    threads: list[threading.Thread | None] = []

    async def main() -> bool:
        waiting = asyncio.ensure_future(waiter.wait("ns:a", 120.0))
        await asyncio.sleep(0.1)
        threads.append(waiter._thread)  # read while it waits: it may end as soon as it woke us
        feed.notify("ns:a")
        return await waiting

    try:
        assert asyncio.run(main()) is True
        thread = threads[0]
        deadline = time.monotonic() + 60
        while waiter._thread is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert waiter._thread is None
        assert thread is not None
        thread.join(60)
        assert not thread.is_alive()
        # a later wait starts a new thread and is still woken
        assert asyncio.run(main()) is True
        assert threads[1] is not None and threads[1] is not thread
    finally:
        waiter.close()


def test_a_waiter_with_a_long_wait_uses_almost_no_cpu_while_nothing_changes() -> None:
    feed = ManualChangeFeed()
    feed.notify("someone-else")  # unclaimed changes must not keep the thread busy
    feed.notify_all()
    waiter = AsyncChangeWaiter(feed, tick=0.05)
    measured: list[float] = []

    async def main() -> bool:
        first = await waiter.wait("ns:a", 5.0)  # takes the notify_all wake-up
        waiting = asyncio.ensure_future(waiter.wait("ns:a", 5.0))
        await asyncio.sleep(0.2)
        thread = waiter._thread
        assert thread is not None and thread.is_alive()
        before = thread_cpu_seconds(thread)
        await asyncio.sleep(2.0)
        measured.append(thread_cpu_seconds(thread) - before)
        waiting.cancel()
        return first

    try:
        assert asyncio.run(main()) is True
        # a spinning thread would use most of the 2 s; an idle one a few ticks' worth
        assert measured[0] < 1.0, f"the waiter thread used {measured[0]:.2f} CPU s idle"
    finally:
        waiter.close()


def test_the_async_waiter_is_woken_by_local_cwd_state_file_changes(tmp_path) -> None:
    """The waiter thread only peeks at the feed: local_cwd's feed must start watching an app
    on a peek too, or a trigger on local_cwd would sleep its whole resync."""
    from anylaunch.schedulers.local.changes import LocalChangeFeed

    (tmp_path / "app-1").mkdir()
    feed = LocalChangeFeed(str(tmp_path))
    waiter = AsyncChangeWaiter(feed, tick=0.05)

    async def main() -> tuple[bool, bool, float]:
        first = await waiter.wait("app-1", 60.0)  # the first wait: the watch starts
        later = asyncio.ensure_future(waiter.wait("app-1", 60.0))
        await asyncio.sleep(0.2)
        (tmp_path / "app-1" / "state.json").write_text("{}")
        written = time.monotonic()
        woken = await later
        return first, woken, time.monotonic() - written

    try:
        first, woken, after = asyncio.run(main())
    finally:
        waiter.close()
        feed.close()
    assert first and woken
    assert after < 30.0  # woken by the change, not by the 60 s timeout


def test_the_runner_hands_out_a_schedulers_change_feed(tmp_path: Path) -> None:
    with get_runner(state_dir=str(tmp_path)) as runner:
        feed = runner.change_feed("local_cwd")
        assert isinstance(feed, ChangeFeed)
        assert runner.change_feed("local_cwd") is feed  # one scheduler, one feed
        assert scheduler_change_feed(runner, "local_cwd") is feed
        with pytest.raises(UnknownSchedulerException):
            runner.change_feed("local_cwdd")
        assert scheduler_change_feed(runner, "local_cwdd") is None  # the driver just polls
