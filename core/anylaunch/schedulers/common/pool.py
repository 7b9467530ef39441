"""Process-wide, reference-counted sharing of a backend's watcher (a Kubernetes watch, a
Docker events stream): every scheduler of the same backend in a process uses one, and the
last one to let go stops it.

>>> pool: SharedPool[str, list[str]] = SharedPool()
>>> first = pool.acquire("engine-a", make=list)
>>> pool.acquire("engine-a", make=list) is first, pool.users(first)
(True, 2)
>>> closed = []
>>> pool.release(first, close=closed.append)  # one user left: still open
>>> pool.release(first, close=closed.append)
>>> closed == [first], pool.users(first)
(True, 0)
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["SharedPool"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_POOLS: weakref.WeakSet[SharedPool[object, object]] = weakref.WeakSet()


def _always(_: object) -> bool:
    return True


def _nothing(_: object) -> None:
    return None


class SharedPool(Generic[K, V]):
    """Instances shared by key, each counting its users. Thread-safe; a forked child starts
    with an empty pool (the parent's threads did not survive the fork)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[K, tuple[V, int]] = {}
        _POOLS.add(self)  # type: ignore[arg-type]

    def acquire(
        self,
        key: K,
        make: Callable[[], V],
        usable: Callable[[V], bool] = _always,
        discard: Callable[[V], None] = _nothing,
    ) -> V:
        """The shared instance of ``key`` (one more user), made with ``make`` when there is
        none or it is no longer ``usable``. ``make`` runs outside the lock (it may connect to
        the backend; what it raises propagates); if another thread made one meanwhile, the
        extra one is passed to ``discard`` and theirs is returned."""
        with self._lock:
            shared = self._take(key, usable)
        if shared is not None:
            return shared
        made = make()
        with self._lock:
            shared = self._take(key, usable)
            if shared is None:
                self._items[key] = (made, 1)
                return made
        discard(made)
        return shared

    def _take(self, key: K, usable: Callable[[V], bool]) -> V | None:
        entry = self._items.get(key)
        if entry is None or not usable(entry[0]):
            return None
        self._items[key] = (entry[0], entry[1] + 1)
        return entry[0]

    def release(self, value: V, close: Callable[[V], None]) -> None:
        """One user is done with ``value``; the last one (or one the pool no longer holds)
        closes it."""
        with self._lock:
            for key, (shared, users) in list(self._items.items()):
                if shared is value:
                    if users > 1:
                        self._items[key] = (shared, users - 1)
                        return
                    del self._items[key]
                    break
        close(value)

    def forget(self, value: V) -> None:
        """Drops ``value`` (e.g. it closed itself): the next :meth:`acquire` makes a new one."""
        with self._lock:
            for key, (shared, _) in list(self._items.items()):
                if shared is value:
                    del self._items[key]

    def users(self, value: V) -> int:
        """How many users hold ``value`` (0: not in the pool)."""
        with self._lock:
            return next((n for shared, n in self._items.values() if shared is value), 0)

    def _reset_after_fork(self) -> None:
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._items.clear()


def _after_fork_in_child() -> None:
    for pool in list(_POOLS):
        pool._reset_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
