"""The ``local_docker`` change feed: one process-wide stream of a Docker engine's container
events that wakes the waiters of an app as soon as one of its containers changes.

A :class:`DockerEventFeed` holds one daemon thread per engine that reads
``GET /events`` (filtered by the engine to containers carrying anylaunch's app-id label and
to the actions that can change an app's state) and, for each event, notifies the app named
by that label on a :class:`~anylaunch.schedulers.common.changes.ManualChangeFeed`. The poll stays
the source of truth: the feed only says *when* to look.

Whenever the stream opens or ends (the engine restarted, the connection broke), every waiter
is woken once so it polls again, and the thread reconnects after a backoff (0.5 s doubling
to 5 s, never less: it cannot spin) asking the engine to replay what happened ``since`` the
last event it read. While the engine is unreachable, waits simply time out and waiters poll
on their interval.

Feeds are shared per engine address (:func:`acquire`, :func:`release`); the ``docker`` SDK
is only used through the client passed in, so importing this module imports no SDK.

>>> app_of({"Type": "container", "Actor": {"Attributes": {LABEL_APP_ID: "demo-x1"}}})
'demo-x1'
>>> class _Unreachable:  # a client whose engine never answers
...     class api:
...         @staticmethod
...         def events(**kwargs: object) -> object:
...             raise ConnectionError("no engine")
...
...     @staticmethod
...     def close() -> None:
...         pass
>>> feed = DockerEventFeed(_Unreachable())
>>> feed.wait(["demo-x1"], timeout=0.05)  # no stream: the waiter polls on its interval
False
>>> feed.close()
>>> feed.thread.is_alive(), feed.usable
(False, False)
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from anylaunch.schedulers.common.changes import ManualChangeFeed
from anylaunch.schedulers.common.pool import SharedPool
from anylaunch.schedulers.docker.request import LABEL_APP_ID

__all__ = [
    "MAX_BACKOFF_S",
    "MIN_BACKOFF_S",
    "WAKE_ACTIONS",
    "DockerEventFeed",
    "acquire",
    "app_of",
    "release",
]

log: logging.Logger = logging.getLogger(__name__)

#: First wait before reconnecting a stream that ended or failed.
MIN_BACKOFF_S = 0.5
#: Longest wait between two reconnection attempts.
MAX_BACKOFF_S = 5.0
#: A stream that stayed open this long was healthy: the next reconnection waits the least.
_HEALTHY_S = 30.0
#: Seconds ``close`` waits for the thread to end.
_JOIN_S = 5.0
#: The container actions that can change what ``describe`` says (others, such as
#: ``exec_start`` or ``top``, are not streamed at all).
WAKE_ACTIONS: tuple[str, ...] = (
    "create",
    "start",
    "restart",
    "die",
    "oom",
    "kill",
    "stop",
    "pause",
    "unpause",
    "destroy",
)


def app_of(event: Mapping[str, Any]) -> str:
    """The app id an engine event is about ("" if it carries no anylaunch app-id label).

    >>> app_of({"Type": "container", "Actor": {"Attributes": {"name": "other"}}})
    ''
    """
    actor = event.get("Actor")
    attributes = actor.get("Attributes") if isinstance(actor, Mapping) else None
    app_id = attributes.get(LABEL_APP_ID) if isinstance(attributes, Mapping) else None
    return app_id if isinstance(app_id, str) else ""


class DockerEventFeed(ManualChangeFeed):
    """Wakes the waiters of ``local_docker`` apps when the engine reports an event on one of
    their containers. Thread-safe; get the process-wide one of an engine with :func:`acquire`.

    The thread starts at once and runs until :meth:`close`.

    Args:
        client: a connected ``docker.DockerClient`` of the engine, owned by the feed from
            now on (closed with it); its streaming connection is the feed's own
        min_backoff: seconds before the first reconnection of a broken stream
        max_backoff: longest wait between reconnection attempts
    """

    def __init__(
        self,
        client: Any,
        *,
        min_backoff: float = MIN_BACKOFF_S,
        max_backoff: float = MAX_BACKOFF_S,
    ) -> None:
        super().__init__()
        self.min_backoff = min_backoff
        self.max_backoff = max(min_backoff, max_backoff)
        #: How many times a stream was opened (tests watch reconnections with it).
        self.connections = 0
        self._client = client
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._stream: Any = None
        self._since: str | None = None  # the last event's time, replayed from on reconnect
        self._pid = os.getpid()
        self._thread = threading.Thread(
            target=self._run, name="anylaunch-docker-events", daemon=True
        )
        self._thread.start()

    @property
    def thread(self) -> threading.Thread:
        """The thread reading the engine's events."""
        return self._thread

    @property
    def usable(self) -> bool:
        """False once closed (or in a forked child, where the thread does not run)."""
        return not self._stopped.is_set() and self._pid == os.getpid()

    def interrupt(self) -> None:
        """Breaks the open event stream, if any: waiters are woken and the thread reconnects
        (replaying the events it may have missed). For tests and for callers that know the
        connection went bad."""
        with self._lock:
            stream = self._stream
        if stream is not None and self._pid == os.getpid():
            _shut(stream)

    def close(self) -> None:
        """Stops the thread (within seconds: the open stream is shut), closes the client and
        wakes every waiter once (they poll, then find a new feed). Idempotent."""
        _forget(self)
        if self._pid != os.getpid():
            return  # a forked child: no thread here, and the connection is the parent's
        with self._lock:
            first = not self._stopped.is_set()
            self._stopped.set()
            stream = self._stream
        if not first:
            return
        if stream is not None:
            _shut(stream)
        if self._thread is not threading.current_thread():
            self._thread.join(_JOIN_S)
        with contextlib.suppress(Exception):
            self._client.close()
        self.notify_all()  # no waiter stays asleep on a closed feed

    # --- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        backoff = self.min_backoff
        while not self._stopped.is_set():
            opened = time.monotonic()
            connections = self.connections
            try:
                self._stream_once()
            except Exception as e:  # the engine went away, or answered nonsense
                log.debug("the Docker event stream failed: %s", e)
            if self._stopped.is_set():
                return
            if self.connections != connections:
                # a stream ended: changes from now on go unseen until the next one opens,
                # so every waiter polls once more (then on its interval)
                self.notify_all()
            if time.monotonic() - opened >= _HEALTHY_S:
                backoff = self.min_backoff
            self._stopped.wait(backoff)
            backoff = min(backoff * 2, self.max_backoff)

    def _stream_once(self) -> None:
        filters = {"type": ["container"], "label": [LABEL_APP_ID], "event": list(WAKE_ACTIONS)}
        stream = self._client.api.events(decode=True, filters=filters, since=self._since)
        with self._lock:
            if self._stopped.is_set():
                _shut(stream)
                return
            self._stream = stream
            self.connections += 1
        try:
            # events before the stream opened were not seen (the first time), or were
            # replayed (since): either way waiters poll once more
            self.notify_all()
            for event in stream:
                if self._stopped.is_set():  # a stream close could not shut (ssh://)
                    break
                if isinstance(event, Mapping):
                    self._on_event(event)
        finally:
            with self._lock:
                self._stream = None
            _shut(stream)

    def _on_event(self, event: Mapping[str, Any]) -> None:
        nanos = event.get("timeNano")
        if isinstance(nanos, int) and nanos > 0:
            self._since = f"{nanos // 1_000_000_000}.{nanos % 1_000_000_000:09d}"
        app_id = app_of(event)
        if app_id:
            self.notify(app_id)


def _shut(stream: Any) -> None:
    """Closes an event stream from any thread (its reader then sees the end)."""
    with contextlib.suppress(Exception):  # shut already, or not a socket we can shut
        stream.close()


# --- process-wide sharing --------------------------------------------------------------------

_SHARED: SharedPool[str, DockerEventFeed] = SharedPool()


def acquire(docker_host: str, connect: Callable[[], Any]) -> DockerEventFeed:
    """The process's feed of the engine at ``docker_host`` (started on first use, with a
    client from ``connect``); pair with :func:`release`.

    Args:
        docker_host: the engine's resolved address (the key feeds are shared by)
        connect: makes a connected client of that engine; called only when no usable feed
            exists, outside any lock. What it raises (e.g. the engine is unreachable)
            propagates.
    """
    return _SHARED.acquire(
        docker_host,
        make=lambda: DockerEventFeed(connect()),
        usable=lambda feed: feed.usable,
        discard=DockerEventFeed.close,
    )


def release(feed: DockerEventFeed) -> None:
    """One user is done with ``feed``; the last one closes it."""
    _SHARED.release(feed, DockerEventFeed.close)


def _forget(feed: DockerEventFeed) -> None:
    """Drops a closed feed from the registry (the next :func:`acquire` makes a new one)."""
    _SHARED.forget(feed)
