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
    thread calls ``notify``, and a stand-in where changes are known in-process."""

    def __init__(self) -> None:
        self._changed: set[str] = set()
        self._condition = threading.Condition()

    def notify(self, app_id: str) -> None:
        """Records that ``app_id`` may have changed and wakes its waiters."""
        with self._condition:
            self._changed.add(app_id)
            self._condition.notify_all()

    def notify_all(self) -> None:
        """Wakes every waiter (e.g. after a resync, or when the event source was lost)."""
        with self._condition:
            self._changed.add(_EVERYTHING)
            self._condition.notify_all()

    def wait(self, app_ids: Collection[str], timeout: float) -> bool:
        wanted = set(app_ids)

        def changed() -> bool:
            return _EVERYTHING in self._changed or not wanted.isdisjoint(self._changed)

        with self._condition:
            woken = self._condition.wait_for(changed, timeout=max(0.0, timeout))
            if woken:
                self._changed -= wanted
                if not self._changed - {_EVERYTHING}:
                    self._changed.discard(_EVERYTHING)
            return woken


#: a marker in the changed set meaning "every app may have changed"
_EVERYTHING = "\0*"
