"""The archive's hold on an app's Jobs and pods, and the Job TTL.

A cluster forgets an ended Job as soon as its ``ttlSecondsAfterFinished`` passes (or someone
deletes it), and its pods, their exit codes and their logs go with it, possibly before any
process has seen the end. An app submitted with an archive (its roles' env names one:
``ANYLAUNCH_ARCHIVE_URL``) therefore carries the finalizer :data:`ARCHIVE_FINALIZER` on every
Job and on every pod: a deletion (the TTL's, ``kubectl delete``, a cancel) marks them, and
they stay readable until the first process that sees the end has written the record and
released them (:func:`release`, called through ``Scheduler.archived``). Without an archive
nothing is held.

>>> job = {"kind": "Job", "metadata": {"name": "a-w-0"},
...        "spec": {"template": {"metadata": {"labels": {}}, "spec": {}}}}
>>> hold([job], 60)
>>> job["metadata"]["finalizers"], job["spec"]["template"]["metadata"]["finalizers"]
(['anylaunch.io/archive'], ['anylaunch.io/archive'])
>>> job["spec"]["ttlSecondsAfterFinished"]
60
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from anylaunch.schedulers.api import ARCHIVE_URL_ENV
from anylaunch.specs.api import AppDef

if TYPE_CHECKING:
    from anylaunch.schedulers.kubernetes.client import KubeClient

__all__ = ["ARCHIVE_FINALIZER", "hold", "is_held", "release", "wants_hold"]

logger = logging.getLogger(__name__)

#: The finalizer that keeps an archived app's Jobs and pods until its record is written.
ARCHIVE_FINALIZER = "anylaunch.io/archive"
#: How often a release retries a write that raced another (409 Conflict).
_CONFLICT_RETRIES = 5


def wants_hold(app: AppDef) -> bool:
    """Whether the app has an archive, so its objects are held until it is written.

    >>> from anylaunch.specs.api import Role
    >>> wants_hold(AppDef("a", [Role("w", "img", env={"ANYLAUNCH_ARCHIVE_URL": "/arch"})]))
    True
    """
    return any(role.env.get(ARCHIVE_URL_ENV) for role in app.roles)


def hold(objects: Iterable[dict[str, Any]], ttl: int | None, held: bool = True) -> None:
    """Adds the finalizer to every Job of ``objects`` and to its pod template (when
    ``held``), and the Job TTL (when ``ttl`` is not None), in place."""
    for obj in objects:
        if obj.get("kind") != "Job":
            continue
        if ttl is not None:
            obj["spec"]["ttlSecondsAfterFinished"] = ttl
        if held:
            template = obj["spec"]["template"].setdefault("metadata", {})
            for meta in (obj["metadata"], template):
                finalizers = meta.setdefault("finalizers", [])
                if ARCHIVE_FINALIZER not in finalizers:
                    finalizers.append(ARCHIVE_FINALIZER)


def is_held(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` carries the archive's finalizer."""
    return ARCHIVE_FINALIZER in ((obj.get("metadata") or {}).get("finalizers") or [])


def release(
    client: KubeClient, namespace: str, selector: str, kinds: Sequence[tuple[str, str]]
) -> int:
    """Removes the finalizer from every object of ``kinds`` the selector matches (pods and
    Jobs); returns how many it released. A write that raced another (the garbage collector
    adds and removes its own finalizers) is read again and retried."""
    from anylaunch.schedulers.kubernetes.client import KubernetesApiError

    released = 0
    for api_version, kind in kinds:
        for obj in client.list(api_version, kind, namespace, selector):
            for _ in range(_CONFLICT_RETRIES):
                if obj is None or not is_held(obj):
                    break
                meta = obj["metadata"]
                kept = [f for f in meta.get("finalizers") or [] if f != ARCHIVE_FINALIZER]
                # the resourceVersion makes the merge patch conditional: finalizers are one
                # list, and another writer's change to it must not be overwritten
                patch = {
                    "metadata": {"finalizers": kept, "resourceVersion": meta.get("resourceVersion")}
                }
                try:
                    client.patch(api_version, kind, namespace, meta["name"], patch)
                    released += 1
                    break
                except KubernetesApiError as e:
                    if e.status != 409:
                        raise
                    obj = client.get(api_version, kind, namespace, meta["name"])
            else:
                logger.warning(
                    "%s %s/%s: could not release its hold", kind, namespace, meta["name"]
                )
    return released
