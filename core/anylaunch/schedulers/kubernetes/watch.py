"""One shared list+watch of the Kubernetes objects anylaunch's apps are made of, per API
server, label selector and namespace, in a long-lived process.

A :class:`KubeWatch` keeps a cache of the app records (ConfigMaps, and the kinds whose objects
may carry one), workloads (Jobs, Volcano Jobs, AppWrappers) and pods that carry the
scheduler's labels, one background thread per (namespace, kind): it lists them, then
watches from the list's ``resourceVersion`` (bookmarks on), re-lists on ``410 Gone`` and
every :data:`RESYNC_S` seconds, and reconnects with backoff when the connection breaks.
Every change notifies the app it belongs to on a
:class:`~anylaunch.schedulers.common.changes.ManualChangeFeed` (``{namespace}:{name}``), which the
drivers wait on.

While a namespace's watches are connected and synced, :meth:`KubeWatch.views` answers
describes from the cache (no API request, whatever the number of apps); when a watch is
down the answer is None and the scheduler lists as before (ordinary polling), and waiters
fall back to their poll interval. A process reads its own writes: after the scheduler
wrote or deleted an app record (:meth:`KubeWatch.own_write`), that app is listed from the
API server until the watch has delivered the write. Watches are shared process-wide
(:func:`acquire`) and stopped when their last user releases them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any

from anylaunch.schedulers.common.changes import ManualChangeFeed
from anylaunch.schedulers.common.pool import SharedPool
from anylaunch.schedulers.kubernetes.client import (
    KubeClient,
    KubernetesApiError,
    collection_path,
)
from anylaunch.schedulers.kubernetes.names import LABEL_APP_ID, parse_app_id
from anylaunch.schedulers.kubernetes.record import CONFIGMAP, record_app, record_views
from anylaunch.schedulers.kubernetes.state import AppView

__all__ = [
    "OWN_WRITE_S",
    "RESYNC_S",
    "WATCH_S",
    "KubeChangeFeed",
    "KubeWatch",
    "OwnWrite",
    "acquire",
    "release",
]

_log = logging.getLogger(__name__)

#: Seconds between full re-lists of a watched kind (a safety net for missed events).
RESYNC_S = 300.0
#: Seconds the API server keeps one watch request open before it is renewed.
WATCH_S = 240
#: Longest wait between reconnection attempts of a broken watch.
MAX_BACKOFF_S = 30.0
#: Longest time an own write waits to be seen by the watch before the cache is trusted
#: again (a connected watch delivers within seconds; a broken one is not used anyway).
OWN_WRITE_S = 60.0

_Kind = tuple[str, str]
_POD: _Kind = ("v1", "Pod")


class _Gone(Exception):
    """The watch's resourceVersion expired (410): re-list."""


class _KindWatch:
    """The list+watch of one kind in one namespace, in a daemon thread."""

    def __init__(self, owner: KubeWatch, namespace: str, kind: _Kind) -> None:
        self.owner = owner
        self.namespace = namespace
        self.kind = kind
        self.objects: dict[str, dict[str, Any]] = {}
        #: the same objects by app (their app label): a describe reads its app's objects only,
        #: not every cached object (hundreds of apps waited on in one process)
        self.by_app: dict[str, dict[str, dict[str, Any]]] = {}
        #: listed and connected (or reconnecting after a normal renewal): the cache is current
        self.healthy = False
        #: the kind is not served by the cluster (no CRD): always empty
        self.unserved = False
        self.failures = 0
        self._version: str | None = None
        self._listed_at = 0.0
        self._response: Any = None
        self._thread = threading.Thread(
            target=self._loop, name=f"anylaunch-kube-watch-{namespace}-{kind[1]}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def interrupt(self) -> None:
        """Breaks the open watch connection (used by close and by tests)."""
        response = self._response
        if response is None:
            return
        for method in ("shutdown", "close"):
            with contextlib.suppress(Exception):  # the reader thread notices either way
                getattr(response, method, lambda: None)()

    def expire(self) -> None:
        """Forgets the resourceVersion so the next round re-lists (as after a 410)."""
        self._version = None
        self.interrupt()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _path(self) -> str:
        return collection_path(self.kind[0], self.kind[1], self.namespace)

    def _list(self) -> None:
        client, stop = self.owner.client, self.owner.stopped
        try:
            answer = client.request(
                "GET", self._path(), query={"labelSelector": self.owner.selector}
            )
            self.unserved = False
        except KubernetesApiError as e:
            if e.status != 404:
                raise
            self.unserved = True
            answer = {"items": [], "metadata": {}}
        if stop.is_set():
            return
        fresh = {obj["metadata"]["name"]: obj for obj in answer.get("items") or []}
        with self.owner.lock:
            old, self.objects = self.objects, fresh
            self.by_app = {}
            for name, obj in fresh.items():
                self.by_app.setdefault(_app_of(obj), {})[name] = obj
            self._version = (answer.get("metadata") or {}).get("resourceVersion")
            if self.kind in self.owner.record_kinds:
                for obj in (*fresh.values(), *old.values()):
                    self.owner._saw_record(self.namespace, self.kind, obj)
            self._listed_at = time.monotonic()
            if self.unserved:
                self.healthy = True  # nothing to watch: the empty cache is current
        changed: set[str] = set()
        for name in set(old) | set(fresh):
            before, after = old.get(name), fresh.get(name)
            if _version_of(before) != _version_of(after):
                changed.add(_app_of(after if after is not None else before or {}))
        for app in changed - {""}:
            self.owner.feed.notify(f"{self.namespace}:{app}")

    def _watch(self) -> None:
        query = {
            "labelSelector": self.owner.selector,
            "watch": "true",
            "resourceVersion": self._version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_S),
        }
        response = self.owner.client.stream(self._path(), query, read_timeout=WATCH_S + 30.0)
        self._response = response
        with self.owner.lock:
            recovered, self.healthy = not self.healthy, True
        if recovered and self.failures:
            self.owner.feed.notify_all()  # changes may have been missed while it was down
        self.failures = 0
        try:
            if self.owner.stopped.is_set():
                return
            for line in _lines(response):
                event = json.loads(line)
                self._apply(event.get("type", ""), event.get("object") or {})
        finally:
            self._response = None
            with contextlib.suppress(Exception):  # a shut-down connection may refuse it
                response.release_conn()

    def _apply(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone()
            raise RuntimeError(f"watch error: {obj.get('message', obj)}")
        meta = obj.get("metadata") or {}
        version = meta.get("resourceVersion")
        if kind == "BOOKMARK":
            self._version = version or self._version
            return
        name = meta.get("name")
        if not name:
            return
        with self.owner.lock:
            before = self.objects.pop(name, None)
            if before is not None:
                self._unindex(name, before)
            if kind != "DELETED":
                self.objects[name] = obj
                self.by_app.setdefault(_app_of(obj), {})[name] = obj
            self._version = version or self._version
            if self.kind in self.owner.record_kinds:
                self.owner._saw_record(self.namespace, self.kind, obj)
        app = _app_of(obj)
        if app:
            self.owner.feed.notify(f"{self.namespace}:{app}")

    def _unindex(self, name: str, obj: dict[str, Any]) -> None:
        app = _app_of(obj)
        objects = self.by_app.get(app)
        if objects is not None:
            objects.pop(name, None)
            if not objects:
                del self.by_app[app]

    def of_apps(self, apps: Iterable[str] | None) -> list[dict[str, Any]]:
        """The cached objects of ``apps`` (every object if None; under the owner's lock)."""
        if apps is None:
            return list(self.objects.values())
        return [obj for app in apps for obj in self.by_app.get(app, {}).values()]

    def _loop(self) -> None:
        stop = self.owner.stopped
        backoff = 0.5
        while not stop.is_set():
            try:
                if (
                    self._version is None
                    or time.monotonic() - self._listed_at > RESYNC_S
                    or self.unserved
                ):
                    self._list()
                if self.unserved:  # no such kind on this cluster: look again at resync
                    stop.wait(RESYNC_S)
                    continue
                self._watch()
                backoff = 0.5
            except _Gone:  # the version expired: re-list at once (the cache stays current)
                self._version = None
            except Exception as e:
                if stop.is_set():
                    return
                self.failures += 1
                with self.owner.lock:
                    was_healthy, self.healthy = self.healthy, False
                    self._version = None  # re-list once the API server answers again
                _log.debug("watch of %s %s broke: %s", self.namespace, self.kind[1], e)
                if was_healthy:  # from now on waiters poll on their interval: poll once now
                    self.owner.feed.notify_all()
                stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)


def _lines(response: Any) -> Iterator[str]:
    """The newline-separated JSON documents of a watch response, as they arrive."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=False):
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if line.strip():
                yield line.decode("utf-8", "replace")
    if pending.strip():
        yield pending.decode("utf-8", "replace")


def _app_of(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("labels", {}).get(LABEL_APP_ID, ""))


def _version_of(obj: dict[str, Any] | None) -> str | None:
    return None if obj is None else (obj.get("metadata") or {}).get("resourceVersion")


class OwnWrite:
    """A write to an app record that the record watch may not have delivered yet."""

    def __init__(self) -> None:
        self.deadline = time.monotonic() + OWN_WRITE_S
        self.version: str | None = None  # the record's version after the write
        self.deleted = False  # the write deleted the app (its record with it)
        self.seen: set[str] = set()  # record versions delivered since the write began

    def done(self, version: str | None = None, *, deleted: bool = False) -> None:
        """Records the write's outcome: the record's new ``version``, or that it was deleted."""
        self.version, self.deleted = version, deleted


class KubeWatch:
    """The shared watches of one API server and label selector, by namespace and kind.

    Args:
        client: the API client the watches use (thread-safe connection pool)
        selector: the label selector of the scheduler's objects
        record_kinds: the kinds whose objects may hold an app record (always watched)
    """

    def __init__(
        self, client: KubeClient, selector: str, record_kinds: Sequence[_Kind] = (CONFIGMAP,)
    ) -> None:
        self.client = client
        self.selector = selector
        self.record_kinds = tuple(record_kinds)
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.feed = KubeChangeFeed(self)
        self._kinds: dict[tuple[str, _Kind], _KindWatch] = {}
        # (namespace, app) -> this process's record write the watch has not delivered yet
        self._writes: dict[tuple[str, str], OwnWrite] = {}

    @contextlib.contextmanager
    def own_write(self, namespace: str, name: str) -> Iterator[OwnWrite]:
        """Around a write to the record of app ``name``: until the watch delivers it (or
        :data:`OWN_WRITE_S` pass), the app is read from the API server, not the cache, so the
        writer reads its own write. Call ``.done(version)`` or ``.done(deleted=True)`` on the
        yielded object once the write succeeded; a write that raised, or wrote nothing (no
        ``done`` call with a version), is forgotten.
        """
        write = OwnWrite()
        with self.lock:
            self._writes[(namespace, name)] = write
        try:
            yield write
        except BaseException:
            with self.lock:
                if self._writes.get((namespace, name)) is write:
                    del self._writes[(namespace, name)]
            raise
        nothing_written = write.version is None and not write.deleted
        with self.lock:
            if self._writes.get((namespace, name)) is write and (
                nothing_written or self._delivered(namespace, name, write)
            ):
                del self._writes[(namespace, name)]

    def _delivered(self, namespace: str, app: str, write: OwnWrite) -> bool:
        """Whether the cache holds ``write`` (under the lock): the version it wrote was seen,
        or, for a delete, no record of the app is left in the cache."""
        if write.deleted:
            return not self._cached_records(namespace, [app])
        return write.version is not None and write.version in write.seen

    def _pending_write(self, namespace: str, app: str) -> bool:
        """True while an own write to the app's record is not in the cache yet (under the
        lock)."""
        write = self._writes.get((namespace, app))
        if write is None:
            return False
        if self._delivered(namespace, app, write) or time.monotonic() > write.deadline:
            del self._writes[(namespace, app)]
            return False
        return True

    def _saw_record(self, namespace: str, kind: _Kind, obj: dict[str, Any]) -> None:
        """A record watch delivered ``obj``, or its deletion (under the lock, the cache
        updated): an own write it completes is done."""
        if not self._writes:
            return
        app = record_app(kind, obj)
        write = self._writes.get((namespace, app))
        if write is None:
            return
        version = _version_of(obj)
        if version is not None:
            write.seen.add(version)
        if self._delivered(namespace, app, write):
            del self._writes[(namespace, app)]

    def _cached_records(self, namespace: str, names: Sequence[str] | None) -> dict[str, AppView]:
        """Views holding only the cached records of ``names`` (all if None; under the lock)."""
        listed = [
            (kind, watch.of_apps(names))
            for kind in self.record_kinds
            if (watch := self._kinds.get((namespace, kind))) is not None
        ]
        return record_views(listed, names)

    def ensure(self, namespace: str, kinds: Collection[_Kind] = ()) -> bool:
        """Starts the watches of ``namespace`` (records, pods and ``kinds``) that are not
        running yet; True if all of them are already healthy."""
        healthy = True
        for kind in (*self.record_kinds, _POD, *kinds):
            with self.lock:
                if self.stopped.is_set():
                    return False
                watch = self._kinds.get((namespace, kind))
                if watch is None:
                    watch = self._kinds[(namespace, kind)] = _KindWatch(self, namespace, kind)
                    watch.start()
                healthy = healthy and watch.healthy
        return healthy

    def kind_watches(self, namespace: str) -> list[_KindWatch]:
        """The running watches of ``namespace`` (tests use them to break connections)."""
        with self.lock:
            return [w for (ns, _), w in self._kinds.items() if ns == namespace]

    def views(
        self,
        namespace: str,
        names: Sequence[str] | None,
        workload_kinds: Callable[[str], list[_Kind]],
    ) -> dict[str, AppView] | None:
        """The cached records, workloads and pods of ``names`` (every cached app if None),
        keyed by app name, or None while a watch they need is not healthy (then list)."""
        if not self.ensure(namespace):
            return None
        with self.lock:
            views = self._cached_records(namespace, names)
            if self._writes:  # apps this process just wrote: listed (read your writes)
                pending = {app for ns, app in list(self._writes) if ns == namespace}
                pending = {app for app in pending if self._pending_write(namespace, app)}
                if names is None and pending:
                    return None
                views = {app: view for app, view in views.items() if app not in pending}
            needed = {kind for view in views.values() for kind in workload_kinds(view.mode)[:1]}
        if not self.ensure(namespace, needed):
            return None
        with self.lock:
            for kind in sorted(needed):
                for obj in self._kinds[(namespace, kind)].of_apps(views):
                    view = views.get(_app_of(obj))
                    if view is not None:
                        view.workloads.append(obj)
            for pod in self._kinds[(namespace, _POD)].of_apps(views):
                view = views.get(_app_of(pod))
                if view is not None:
                    view.pods.append(pod)
        return views

    def record(self, namespace: str, name: str) -> tuple[bool, AppView | None]:
        """(served from the cache, a view holding only the app's record, or None)."""
        if not self.ensure(namespace):
            return False, None
        with self.lock:
            if self._pending_write(namespace, name):
                return False, None
            return True, self._cached_records(namespace, [name]).get(name)

    def pods(self, namespace: str, labels: dict[str, str]) -> list[dict[str, Any]] | None:
        """The cached pods carrying all ``labels``, or None while the pod watch is down."""
        if not self.ensure(namespace):
            return None
        app = labels.get(LABEL_APP_ID)
        with self.lock:
            return [
                pod
                for pod in self._kinds[(namespace, _POD)].of_apps(None if app is None else [app])
                if all(pod["metadata"].get("labels", {}).get(k) == v for k, v in labels.items())
            ]

    def close(self) -> None:
        """Stops every watch thread (idempotent)."""
        self.stopped.set()
        with self.lock:
            watches = list(self._kinds.values())
        for watch in watches:
            watch.interrupt()
        for watch in watches:
            watch.join(2.0)


class KubeChangeFeed(ManualChangeFeed):
    """The change feed of a :class:`KubeWatch`: waiting on apps starts the watches of their
    namespaces; while a watch is down, waits simply time out (the waiter polls)."""

    def __init__(self, watch: KubeWatch) -> None:
        super().__init__()
        self._watch = watch

    def wait(self, app_ids: Collection[str], timeout: float) -> bool:
        for namespace in {p[0] for p in map(parse_app_id, app_ids) if p is not None}:
            self._watch.ensure(namespace)
        return super().wait(app_ids, timeout)

    def close(self) -> None:
        return None  # the watch is shared: released by its schedulers, not by a waiter


# --- process-wide sharing --------------------------------------------------------------------

_SHARED: SharedPool[tuple[str, str, str], KubeWatch] = SharedPool()


def _server(client: KubeClient) -> str:
    configuration = getattr(client.api_client, "configuration", None)
    return str(getattr(configuration, "host", "") or id(client))


def acquire(
    client: KubeClient,
    selector: str,
    identity: str = "",
    record_kinds: Sequence[_Kind] = (CONFIGMAP,),
) -> KubeWatch:
    """The process's watch of ``selector`` on ``client``'s API server (created on first use);
    pair with :func:`release`.

    Args:
        identity: who the watch acts as (e.g. the kubeconfig and context the client came
            from); only users of the same server, identity and selector share a watch, so a
            cache filled with one user's permissions never answers another's describes
        record_kinds: the kinds whose objects may hold an app record (fixed per selector,
            which names the scheduler)
    """
    return _SHARED.acquire(
        (_server(client), identity, selector),
        make=lambda: KubeWatch(client, selector, record_kinds),
        usable=lambda watch: not watch.stopped.is_set(),
        discard=KubeWatch.close,
    )


def release(watch: KubeWatch) -> None:
    """One user is done with ``watch``; the last one stops it."""
    _SHARED.release(watch, KubeWatch.close)
