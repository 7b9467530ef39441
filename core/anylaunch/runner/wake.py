"""Waiting between polls on a scheduler's change feed: the helpers the session driver
(:mod:`anylaunch.runner.session`) and the Airflow trigger's shared poller use.

A driver that has decided to poll again in ``after`` seconds (a
:class:`~anylaunch.runner.watch.Poll` decision) waits on the feed of the app's scheduler
(:func:`change_feed_of`) instead of sleeping: :func:`wait_on_feed` returns as soon as the
:class:`~anylaunch.schedulers.common.changes.ChangeFeed` says the app may have changed, or after
``after`` seconds, whichever is first; a scheduler without a feed just sleeps. The poll that
follows stays the source of truth. Event-loop drivers wait for many apps at once through one
:class:`AsyncChangeWaiter`.

>>> import tempfile
>>> from anylaunch.runner import get_runner
>>> with tempfile.TemporaryDirectory() as state, get_runner(state_dir=state) as runner:
...     feed, app_id = change_feed_of(runner, "local_cwd://s/nothing-1")
...     first = wait_on_feed(feed, app_id, 0.0)
...     first, wait_on_feed(feed, app_id, 0.0)
(True, False)

(The first wait on an app returns at once: a change made before the watch began is not
lost.)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from anylaunch.schedulers.common.changes import ChangeFeed, ManualChangeFeed
from anylaunch.specs.api import parse_app_handle

if TYPE_CHECKING:
    from anylaunch.runner.api import Runner

__all__ = [
    "IDLE_TICK_S",
    "TICK_S",
    "AsyncChangeWaiter",
    "await_on_feed",
    "change_feed_of",
    "first_word",
    "scheduler_change_feed",
    "wait_on_feed",
]

#: Longest gap between two ``tick`` calls of a wait (how late a forwarded log line can be).
TICK_S = 0.05
#: The same while the app says nothing (``wait_on_feed``'s ``idle_tick_s``, the session's).
IDLE_TICK_S = 1.0
#: The longest a driver waits, before its first status call on an app, for the change feed of
#: the app's scheduler to report the app (:func:`first_word`).
FIRST_WORD_S = 1.0
_AT_ONCE_S = 0.01


def scheduler_change_feed(runner: Runner, scheduler: str) -> ChangeFeed | None:
    """The change feed of the runner's ``scheduler`` (creating it), or None if it has none
    or cannot be created (the poll reports that). May block: call it off event loops."""
    try:
        return runner.change_feed(scheduler)
    except Exception:  # no feed: the caller polls on its interval
        return None


def change_feed_of(runner: Runner, app_handle: str) -> tuple[ChangeFeed | None, str]:
    """(the change feed of the app's scheduler or None, the app's id)."""
    scheduler, _, app_id = parse_app_handle(app_handle)
    return scheduler_change_feed(runner, scheduler), app_id


def first_word(
    runner: Runner, app_handle: str, timeout: float = FIRST_WORD_S
) -> tuple[ChangeFeed | None, str]:
    """:func:`change_feed_of`, having waited at most ``timeout`` seconds for the feed to report
    the app (at once if it has already): call it before the first status call on an app just
    launched, which a feed that caches (the shared Kubernetes watch) then answers from its
    cache instead of the backend listing an app the watch has not delivered yet.

    >>> import tempfile
    >>> from anylaunch.runner import get_runner
    >>> with tempfile.TemporaryDirectory() as state, get_runner(state_dir=state) as runner:
    ...     feed, app_id = first_word(runner, "local_cwd://s/nothing-1", timeout=0.0)
    >>> app_id
    'nothing-1'
    """
    feed, app_id = change_feed_of(runner, app_handle)
    if feed is not None:
        began = time.monotonic()
        # a feed that (re)started wakes each app's next wait once, word of the app or not:
        # after a wake at once, wait once more for word of the app itself
        if feed.wait([app_id], timeout) and time.monotonic() - began < _AT_ONCE_S:
            feed.wait([app_id], timeout)
    return feed, app_id


def wait_on_feed(
    feed: ChangeFeed | None,
    app_id: str,
    after: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    tick: Callable[[], object] | None = None,
    tick_s: float = TICK_S,
    idle_tick_s: float | None = None,
) -> bool:
    """Waits up to ``after`` seconds for ``app_id`` to change per ``feed``; True if woken by
    a change, False when the time ran out (``feed`` None: this is ``sleep(after)``).

    Args:
        tick: called at least every ``tick_s`` seconds while waiting and once at the end
            (e.g. to forward the app's log lines from the waiting thread)
        idle_tick_s: after a tick that returned falsy (it forwarded nothing), the next one
            comes up to this late; a truthy one brings back ``tick_s``: a quiet app's waiting
            thread then wakes once a second, not twenty times (hundreds of waits in one
            process would otherwise spend a core on waking up)

    >>> feed = ManualChangeFeed()
    >>> feed.notify("app-1")
    >>> ticks = []
    >>> wait_on_feed(feed, "app-1", 60.0, tick=lambda: ticks.append(1)), len(ticks) >= 1
    (True, True)
    >>> wait_on_feed(None, "app-1", 0.0)
    False
    """
    if tick is None:
        if feed is None:
            sleep(after)
            return False
        return feed.wait([app_id], after)
    deadline = time.monotonic() + max(0.0, after)
    while True:
        busy = tick()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        step = min(remaining, tick_s if busy or idle_tick_s is None else idle_tick_s)
        if feed is None:
            sleep(step)
        elif feed.wait([app_id], step):
            tick()
            return True


async def await_on_feed(
    feed: ChangeFeed | None,
    app_id: str,
    after: float,
    *,
    tick: Callable[[], object] | None = None,
    tick_s: float = TICK_S,
) -> bool:
    """:func:`wait_on_feed` for an event loop: sleeps ``tick_s`` at a time and asks the
    feed without blocking in between (find the feed off the loop, with
    :func:`change_feed_of`)."""
    deadline = time.monotonic() + max(0.0, after)
    while True:
        if tick is not None:
            tick()
        if feed is not None and feed.wait([app_id], 0.0):
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(remaining, tick_s))


class AsyncChangeWaiter:
    """Lets many coroutines of event loops wait on one feed, with one helper thread.

    The thread sleeps until the feed has a change for one of the apps being waited on (or
    ``tick`` seconds pass), then asks for each app on its own (a non-blocking ``feed.wait``,
    so each waiter learns of its own app's changes only) and wakes their coroutines;
    nothing blocks an event loop.

    Args:
        feed: the scheduler's change feed
        tick: the longest sleep of the thread (a feed other than a ``ManualChangeFeed`` is
            asked that often; a new waiter's pending change is seen within it)
    """

    def __init__(self, feed: ChangeFeed, tick: float = 0.1) -> None:
        self.feed = feed
        self.tick = tick
        self._waiting: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[bool]]]]
        self._waiting = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    async def wait(self, app_id: str, timeout: float) -> bool:
        """Waits up to ``timeout`` seconds for ``app_id`` to change; True if it did."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        entry = (loop, future)
        with self._lock:
            self._waiting.setdefault(app_id, []).append(entry)
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                self._thread = threading.Thread(
                    target=self._loop, name="anylaunch-change-waiter", daemon=True
                )
                self._thread.start()
        try:
            return await asyncio.wait_for(future, max(0.0, timeout))
        except asyncio.TimeoutError:
            return False
        finally:
            with self._lock:
                entries = self._waiting.get(app_id, [])
                if entry in entries:
                    entries.remove(entry)
                if not entries:
                    self._waiting.pop(app_id, None)

    def close(self) -> None:
        """Stops the helper thread (waiters still waiting time out as usual)."""
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                ids = list(self._waiting)
                if not ids:  # nobody waits: end (the next wait starts a new thread)
                    if self._thread is threading.current_thread():
                        self._thread = None
                    return
            if not _may_have_changed(self.feed, ids, self.tick, self._stop):
                continue
            for app_id in ids:
                if not self.feed.wait([app_id], 0.0):
                    continue
                with self._lock:
                    entries = list(self._waiting.get(app_id, []))
                for loop, future in entries:
                    with contextlib.suppress(RuntimeError):  # its loop was closed meanwhile
                        loop.call_soon_threadsafe(_resolve, future)


def _may_have_changed(
    feed: ChangeFeed, app_ids: list[str], timeout: float, stop: threading.Event
) -> bool:
    """Blocks up to ``timeout`` seconds until one of ``app_ids`` may have a change pending,
    without consuming it (then each app is asked on its own). A :class:`ManualChangeFeed`
    is watched through :meth:`~ManualChangeFeed.peek` (no cost while nothing changes); any
    other feed is simply asked again after ``timeout``."""
    if isinstance(feed, ManualChangeFeed):
        return feed.peek(app_ids, timeout)
    return not stop.wait(timeout)


def _resolve(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(True)
