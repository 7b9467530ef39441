"""The ``local_cwd`` change feed: one process-wide watcher per state root that wakes the
waiters of an app as soon as its state files change.

On Linux the watcher blocks on inotify (through ``ctypes`` on libc: ``inotify_init1``,
``inotify_add_watch``, ``read``), watching the directory of each app someone waits on: the
supervisor records every state transition by renaming a new ``state.json`` into it, and a
cancel request creates ``cancel_requested`` there. The watcher also holds a pidfd of each such
app's supervisor (Linux >= 5.3), so a supervisor that dies without recording its end wakes the
waiters too (the poll that follows finds it dead and ends the app). Where inotify is not
available (another OS, no instances or watches left) a thread stats the watched apps' state
files every ``poll_interval`` seconds instead: a cheap ``stat`` per app, no JSON read.

The feed only says *when* to look (see :mod:`anylaunch.schedulers.common.changes`): waiters still
poll ``describe``. An app is watched from its first :meth:`LocalChangeFeed.wait` on (that wait
returns at once: a change between the caller's last poll and the watch would be missed
otherwise) until nobody waited on it for :data:`FORGET_AFTER_S` seconds.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as root:
...     os.mkdir(os.path.join(root, "app-1"))
...     feed = LocalChangeFeed(root)
...     first = feed.wait(["app-1"], timeout=5.0)  # the first wait arms the watch
...     quiet = feed.wait(["app-1"], timeout=0.05)
...     with open(os.path.join(root, "app-1", "state.json"), "w") as f:
...         _ = f.write("{}")
...     changed = feed.wait(["app-1"], timeout=5.0)
...     feed.close()
>>> first, quiet, changed
(True, False, True)
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Collection

from anylaunch.schedulers.common.app_ids import is_valid_app_id
from anylaunch.schedulers.common.changes import ManualChangeFeed
from anylaunch.schedulers.common.inotify import (
    EVENT,
    IN_ATTRIB,
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_DELETE,
    IN_DELETE_SELF,
    IN_IGNORED,
    IN_MOVE_SELF,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_ONLYDIR,
    add_watch,
    inotify_init,
    rm_watch,
)
from anylaunch.schedulers.local import state as ls

__all__ = ["FORGET_AFTER_S", "LocalChangeFeed", "feed_for"]

#: An app nobody waited on for this long is no longer watched.
FORGET_AFTER_S = 300.0
#: How often the polling fallback stats the watched apps' state files.
DEFAULT_POLL_INTERVAL_S = 0.05

# on an app's directory: its files appearing (by rename or creation), written, removed
_APP_MASK = (
    IN_MOVED_TO
    | IN_CREATE
    | IN_CLOSE_WRITE
    | IN_ATTRIB
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
)
# on the state root: apps appearing or going (an app waited on before it existed)
_ROOT_MASK = IN_MOVED_TO | IN_CREATE | IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR
# the files of an app dir whose change may change what describe says
_STATE_NAMES = frozenset({ls.STATE_FILE, ls.SUPERVISOR_FILE, ls.CANCEL_FILE, ls.REQUEST_FILE})


class _Watched:
    """What the watcher holds for one app."""

    __slots__ = ("last_wait", "pidfd", "signature", "wd")

    def __init__(self) -> None:
        self.last_wait = time.monotonic()
        self.wd = -1  # its inotify watch, if any
        self.pidfd = -1  # its supervisor, while alive and known
        self.signature: tuple[int, int, int] | None = None  # polling: state.json's stat


class LocalChangeFeed(ManualChangeFeed):
    """Wakes the waiters of ``local_cwd`` apps of the state root ``root`` when their state
    files change. Thread-safe; get the process-wide one with :func:`feed_for`.

    Args:
        root: the state root (one sub-directory per app)
        use_inotify: False forces the stat-polling fallback
        poll_interval: seconds between two stats of each watched app when polling
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        use_inotify: bool = True,
        poll_interval: float = DEFAULT_POLL_INTERVAL_S,
    ) -> None:
        super().__init__()
        self.root = os.fspath(root)
        self.poll_interval = poll_interval
        self._use_inotify = use_inotify
        self._lock = threading.Lock()
        self._apps: dict[str, _Watched] = {}
        self._by_wd: dict[int, str] = {}
        self._by_pidfd: dict[int, str] = {}
        self._inotify = -1
        self._root_wd = -1
        self._wake_r = self._wake_w = -1
        self._thread: threading.Thread | None = None
        self._pid = -1
        self._closed = False

    @property
    def uses_inotify(self) -> bool:
        """True when the watcher blocks on inotify (False: it polls the state files)."""
        with self._lock:
            self._start()
            return self._inotify >= 0

    # --- the ChangeFeed API ---------------------------------------------------------------

    def wait(self, app_ids: Collection[str], timeout: float) -> bool:
        """Blocks until one of ``app_ids`` may have changed or ``timeout`` seconds pass
        (see :meth:`ChangeFeed.wait <anylaunch.schedulers.common.changes.ChangeFeed.wait>`).

        The first wait on an app starts watching it and returns True at once.
        """
        self._arm(app_ids)
        return super().wait(app_ids, timeout)

    def peek(self, app_ids: Collection[str], timeout: float = 0.0) -> bool:
        """Like :meth:`wait` without taking the change (see
        :meth:`ManualChangeFeed.peek <anylaunch.schedulers.common.changes.ManualChangeFeed.peek>`);
        it starts and keeps watching ``app_ids`` as :meth:`wait` does, so a dispatcher that
        only peeks (``AsyncChangeWaiter``) is woken by their changes too."""
        self._arm(app_ids)
        return super().peek(app_ids, timeout)

    def _arm(self, app_ids: Collection[str]) -> None:
        """Watches each of ``app_ids`` not watched yet (marking it changed: a change before
        the watch would be lost) and notes that it is still waited on."""
        with self._lock:
            if self._closed:
                return
            self._start()
            now = time.monotonic()
            for app_id in app_ids:
                watched = self._apps.get(app_id)
                if watched is not None:
                    watched.last_wait = now
                elif is_valid_app_id(app_id):
                    self._watch(app_id)
                    super().notify(app_id)

    def close(self) -> None:
        """Stops the watcher thread and releases its inotify instance and pidfds."""
        with self._lock:
            self._closed = True
            thread = self._thread
            self._stop_locked()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
        with _registry_lock:
            for key, feed in list(_feeds.items()):
                if feed is self:
                    del _feeds[key]
        self.notify_all()  # no waiter stays asleep on a closed feed

    # --- watching (under self._lock) ------------------------------------------------------

    def _start(self) -> None:
        """Starts the watcher in this process (again after a fork: threads do not survive)."""
        if self._pid == os.getpid() and self._thread is not None:
            return
        if self._pid != os.getpid():
            self._forget_inherited()
        self._pid = os.getpid()
        if self._use_inotify:
            self._inotify = inotify_init()
            if self._inotify >= 0:
                self._root_wd = add_watch(self._inotify, self.root, _ROOT_MASK)
        self._wake_r, self._wake_w = os.pipe()
        for fd in (self._wake_r, self._wake_w):
            os.set_inheritable(fd, False)
            os.set_blocking(fd, False)
        self._thread = threading.Thread(
            target=self._run, name=f"anylaunch-local-changes-{os.getpid()}", daemon=True
        )
        self._thread.start()

    def _forget_inherited(self) -> None:
        # a forked child shares the parent's fds by number but not its thread: drop our
        # copies and watch again from scratch
        for fd in (self._inotify, self._wake_r, self._wake_w, *self._by_pidfd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._inotify = self._root_wd = self._wake_r = self._wake_w = -1
        self._by_wd.clear()
        self._by_pidfd.clear()
        self._apps.clear()
        self._thread = None

    def _stop_locked(self) -> None:
        if self._wake_w >= 0:
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")
        self._thread = None

    def _watch(self, app_id: str) -> None:
        watched = self._apps[app_id] = _Watched()
        app_dir = os.path.join(self.root, app_id)
        if self._inotify >= 0:
            watched.wd = add_watch(self._inotify, app_dir, _APP_MASK)
            if watched.wd >= 0:
                self._by_wd[watched.wd] = app_id
        # an app without a watch (no inotify, or no watches left: ENOSPC) is polled
        watched.signature = _signature(app_dir)
        self._arm_pidfd(app_id, watched)
        self._kick()

    def _arm_pidfd(self, app_id: str, watched: _Watched) -> None:
        """Holds a pidfd of the app's running supervisor, if it has one (Linux >= 5.3)."""
        if (
            watched.pidfd >= 0
            or not hasattr(os, "pidfd_open")
            or len(self._by_pidfd) >= _max_pidfds()
        ):
            return  # (past the cap, a dead supervisor is found by the waiters' next poll)
        app_dir = os.path.join(self.root, app_id)
        try:
            state = ls.read_state(app_dir)
            if state is None or state.get("state") in _TERMINAL:
                return
            supervisor = ls.recorded_supervisor(app_dir, state)
            if not supervisor or not supervisor.get("pid"):
                return
            pidfd = os.pidfd_open(int(supervisor["pid"]))
        except (OSError, ValueError, TypeError):
            return  # gone already (the poll finds out), or no pidfd support
        # the pid may have been recycled before the open: check it is still the supervisor
        if not ls.is_alive(int(supervisor["pid"]), supervisor.get("start_time")):
            os.close(pidfd)
            super().notify(app_id)
            return
        os.set_inheritable(pidfd, False)
        watched.pidfd = pidfd
        self._by_pidfd[pidfd] = app_id

    def _unwatch(self, app_id: str) -> None:
        watched = self._apps.pop(app_id, None)
        if watched is None:
            return
        if watched.wd >= 0:
            self._by_wd.pop(watched.wd, None)
            if self._inotify >= 0:
                rm_watch(self._inotify, watched.wd)
        if watched.pidfd >= 0:
            self._by_pidfd.pop(watched.pidfd, None)
            os.close(watched.pidfd)

    def _kick(self) -> None:
        """Makes the watcher rebuild its poll set (a pidfd was added)."""
        if self._wake_w >= 0:
            with contextlib.suppress(BlockingIOError, OSError):
                os.write(self._wake_w, b".")

    # --- the watcher thread ---------------------------------------------------------------

    def _run(self) -> None:
        with self._lock:
            inotify, wake = self._inotify, self._wake_r
        next_sweep = time.monotonic() + FORGET_AFTER_S / 10
        try:
            while True:
                with self._lock:
                    if self._closed or self._pid != os.getpid():
                        return
                    pidfds = list(self._by_pidfd)
                    polled = inotify < 0 or any(w.wd < 0 for w in self._apps.values())
                poller = select.poll()
                for fd in (wake, *pidfds, *([inotify] if inotify >= 0 else [])):
                    poller.register(fd, select.POLLIN)
                # (inotify: block until an event; the periodic sweep needs a wake-up now
                # and then)
                timeout_ms = int(self.poll_interval * 1000) if polled else 60_000
                ready = {fd for fd, _ in poller.poll(timeout_ms)}
                if wake in ready:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(wake, 4096):
                            pass
                if inotify >= 0 and inotify in ready:
                    self._read_events(inotify)
                for fd in ready.intersection(pidfds):
                    self._on_supervisor_exit(fd)
                if polled:
                    self._poll_states()
                if time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + FORGET_AFTER_S / 10
                    self._sweep()
        finally:
            with self._lock:
                if self._pid == os.getpid() and (self._closed or self._thread is None):
                    for fd in (inotify, wake, self._wake_w, *self._by_pidfd):
                        if fd >= 0:
                            with contextlib.suppress(OSError):
                                os.close(fd)
                    self._inotify = self._wake_r = self._wake_w = -1
                    self._by_pidfd.clear()
                    self._by_wd.clear()
                    for watched in self._apps.values():
                        watched.pidfd = watched.wd = -1

    def _read_events(self, inotify: int) -> None:
        data = b""
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while chunk := os.read(inotify, 65536):
                data += chunk
        changed: set[str] = set()
        everything = False
        with self._lock:
            pos = 0
            while pos + EVENT.size <= len(data):
                wd, mask, _, length = EVENT.unpack_from(data, pos)
                name = data[pos + EVENT.size : pos + EVENT.size + length].rstrip(b"\0")
                pos += EVENT.size + length
                if wd == -1:  # IN_Q_OVERFLOW: events were lost, wake everyone
                    everything = True
                elif wd == self._root_wd:
                    entry = os.fsdecode(name)
                    if entry in self._apps:
                        changed.add(entry)  # appeared or went: re-watch it
                        self._rewatch(entry)
                elif (app_id := self._by_wd.get(wd)) is not None:
                    if mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF):
                        changed.add(app_id)
                        if mask & IN_IGNORED:  # (its directory went): polled from now
                            self._by_wd.pop(wd, None)
                            watched = self._apps[app_id]
                            watched.wd = -1
                            watched.signature = _signature(os.path.join(self.root, app_id))
                    elif os.fsdecode(name) in _STATE_NAMES:
                        changed.add(app_id)
        if everything:
            self.notify_all()
        for app_id in changed:
            self.notify(app_id)

    def _rewatch(self, app_id: str) -> None:
        watched = self._apps[app_id]
        if watched.wd < 0 and self._inotify >= 0:
            watched.wd = add_watch(self._inotify, os.path.join(self.root, app_id), _APP_MASK)
            if watched.wd >= 0:
                self._by_wd[watched.wd] = app_id
        self._arm_pidfd(app_id, watched)

    def _on_supervisor_exit(self, pidfd: int) -> None:
        with self._lock:
            app_id = self._by_pidfd.pop(pidfd, None)
            os.close(pidfd)
            if app_id is None:
                return
            watched = self._apps.get(app_id)
            if watched is not None:
                watched.pidfd = -1
                # another supervisor may run it now (a direct start after a spare gave up)
                self._arm_pidfd(app_id, watched)
        self.notify(app_id)

    def _poll_states(self) -> None:
        changed = []
        with self._lock:
            for app_id, watched in self._apps.items():
                if watched.wd >= 0:
                    continue  # inotify tells
                signature = _signature(os.path.join(self.root, app_id))
                if signature != watched.signature:
                    watched.signature = signature
                    changed.append(app_id)
        for app_id in changed:
            self.notify(app_id)

    def _sweep(self) -> None:
        cutoff = time.monotonic() - FORGET_AFTER_S
        with self._lock:
            for app_id in [a for a, w in self._apps.items() if w.last_wait < cutoff]:
                self._unwatch(app_id)


_TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


def _max_pidfds() -> int:
    """How many supervisors' pidfds a feed holds at most: a small share of the process's
    file descriptor limit (a triggerer waiting on thousands of apps must not run out)."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return _PIDFD_CAP
    return max(0, min(_PIDFD_CAP, soft // 8))


_PIDFD_CAP = 512


def _signature(app_dir: str) -> tuple[int, int, int] | None:
    """What changes when the app's state file is replaced or written, or the app goes."""
    try:
        st = os.stat(os.path.join(app_dir, ls.STATE_FILE))
    except FileNotFoundError:
        return None if not os.path.isdir(app_dir) else (0, 0, 0)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


_feeds: dict[str, LocalChangeFeed] = {}
_registry_lock = threading.Lock()


def feed_for(root: str | os.PathLike[str]) -> LocalChangeFeed:
    """The process-wide change feed of the state root ``root`` (made on first use).

    >>> feed_for("/tmp/anylaunch-doc-root") is feed_for("/tmp/anylaunch-doc-root")
    True
    """
    key = os.path.abspath(os.fspath(root))
    with _registry_lock:
        feed = _feeds.get(key)
        if feed is None:
            feed = _feeds[key] = LocalChangeFeed(key)
        return feed


def _after_fork_in_child() -> None:
    # another thread may have held these locks at the fork: the child starts afresh (feeds
    # it gets from feed_for are new; old ones restart their watcher on their next wait)
    global _registry_lock
    _registry_lock = threading.Lock()
    for feed in _feeds.values():
        feed._lock = threading.Lock()
    _feeds.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
