"""Event-driven wake-ups for waiters: the seam between a backend that pushes changes and the
drivers that wait on apps.

A scheduler whose backend can tell it that an app changed (a Kubernetes watch, Docker events,
inotify on local_cwd's state files) returns a :class:`ChangeFeed` from
:meth:`Scheduler.change_feed <anylaunch.schedulers.api.Scheduler.change_feed>`; one feed is
shared by every waiter of that scheduler in the process. A driver that would otherwise sleep
``after`` seconds between polls calls :meth:`ChangeFeed.wait` instead and polls as soon as it
returns: the poll stays the source of truth (the feed only says *when* to look), so a missed
or spurious event costs at most one poll interval or one extra poll, never a wrong answer.
Schedulers without a feed return None and drivers poll as before.

>>> feed = ManualChangeFeed()
>>> feed.wait(["app-1"], timeout=0.0)
False
>>> feed.notify("app-1")
>>> feed.wait(["app-1"], timeout=5.0)
True
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Collection

__all__ = ["ChangeFeed", "ManualChangeFeed"]


class ChangeFeed(abc.ABC):
    """Tells waiters when an app may have changed state. Thread-safe; shared per process."""

    @abc.abstractmethod
    def wait(self, app_ids: Collection[str], timeout: float) -> bool:
        """Blocks until one of ``app_ids`` may have changed since the caller's last ``wait``
        on it, or ``timeout`` seconds pass.

        Returns True when woken by a change, False on timeout. A change that arrived while the
        caller was not waiting is not lost: the next ``wait`` on that app returns at once.
        """

    def close(self) -> None:
        """Stops the feed's background work (threads, connections). Idempotent."""
        return None  # a feed without background work has nothing to stop


class ManualChangeFeed(ChangeFeed):
    """A feed fed by :meth:`notify` calls: the building block of real feeds, whose event
    thread calls ``notify``, and a stand-in where changes are known in-process.

    Its memory is bounded: past ``max_tracked`` apps with a change nobody has taken yet
    (a watch also reports apps nobody waits on), it forgets them and falls back to "every
    app may have changed", which costs each waiter one extra poll instead of memory.

    >>> feed = ManualChangeFeed()
    >>> feed.notify_all()  # e.g. the event source reconnected: every app wakes, once
    >>> feed.peek(["a"]), feed.wait(["a"], 0.0), feed.wait(["a"], 0.0)
    (True, True, False)
    """

    def __init__(self, max_tracked: int = 10_000) -> None:
        self.max_tracked = max_tracked
        self._changed: set[str] = set()
        # after notify_all(): every app may have changed, except those that waited since
        self._everything = False
        self._caught_up: set[str] = set()
        # its own name: subclasses have a ``_lock`` of their own (reentrant, as the feed's
        # single condition was: a subclass may notify from inside a wait)
        self._feed_lock = threading.RLock()
        # each blocked waiter's own condition (on the one lock), by the apps it waits on: a
        # change wakes only the waiters of its app (a process waiting on hundreds of apps
        # would otherwise wake every waiting thread on every event)
        self._waiters: dict[str, set[threading.Condition]] = {}

    def notify(self, app_id: str) -> None:
        """Records that ``app_id`` may have changed and wakes its waiters."""
        with self._feed_lock:
            if len(self._changed) >= self.max_tracked:
                self._mark_everything()
                self._wake(self._all_waiters())
            else:
                self._changed.add(app_id)
                self._wake(self._waiters.get(app_id, ()))

    def notify_all(self) -> None:
        """Wakes every waiter, and every app's next wait (e.g. after a resync, or when the
        event source was lost)."""
        with self._feed_lock:
            self._mark_everything()
            self._wake(self._all_waiters())

    def wait(self, app_ids: Collection[str], timeout: float) -> bool:
        wanted = set(app_ids)
        with self._feed_lock:
            woken = self._wait_for(wanted, timeout)
            if woken:
                self._take(wanted)
            return woken

    def peek(self, app_ids: Collection[str], timeout: float = 0.0) -> bool:
        """Like :meth:`wait`, but leaves the change pending (for a dispatcher that then
        asks for each app on its own). True if one of ``app_ids`` has a change pending."""
        wanted = set(app_ids)
        with self._feed_lock:
            return bool(wanted) and self._wait_for(wanted, timeout)

    def _wait_for(self, wanted: set[str], timeout: float) -> bool:
        """(under the lock) Blocks until one of ``wanted`` is pending or ``timeout`` passes."""
        if self._pending(wanted) or timeout <= 0:
            return self._pending(wanted)
        condition = threading.Condition(self._feed_lock)
        for app in wanted:
            self._waiters.setdefault(app, set()).add(condition)
        try:
            return condition.wait_for(lambda: self._pending(wanted), timeout=timeout)
        finally:
            for app in wanted:
                waiting = self._waiters.get(app)
                if waiting is not None:
                    waiting.discard(condition)
                    if not waiting:
                        del self._waiters[app]

    def _all_waiters(self) -> set[threading.Condition]:
        return {c for waiting in self._waiters.values() for c in waiting}

    @staticmethod
    def _wake(conditions: Collection[threading.Condition]) -> None:
        for condition in conditions:
            condition.notify()

    def _pending(self, wanted: set[str]) -> bool:
        if self._everything and not wanted <= self._caught_up:
            return True
        return not wanted.isdisjoint(self._changed)

    def _take(self, wanted: set[str]) -> None:
        self._changed -= wanted
        if self._everything:
            self._caught_up |= wanted
            if len(self._caught_up) >= self.max_tracked:
                # the apps still behind learn of it on their next poll (one interval late)
                self._everything = False
                self._caught_up.clear()

    def _mark_everything(self) -> None:
        self._everything = True
        self._caught_up.clear()
        self._changed.clear()
