"""The app record of the Kubernetes schedulers (no I/O): how an app was submitted and its
roles, which ``describe``, ``list`` and the logs read back.

Where it lives:

- ``jobs`` mode: in the annotation :data:`ANNOTATION_RECORD` of the app's rank-0 Job, so
  launching an app takes one write per Job and nothing else (hundreds of tasks starting at
  once are that many fewer API writes). A record too long for an annotation gets a ConfigMap.
- other modes (Volcano, AppWrapper): a ConfigMap named after the app.
- a cancelled app: a ConfigMap named after the app carrying the cancel mark, written before
  its workload is deleted, so it still describes as CANCELLED until it is deleted. A record
  ConfigMap, when there is one, is the app's record (it is the newer).

Roles are written with the shared :func:`~anylaunch.schedulers.common.roles.role_record`,
secret env values masked (a record is readable by whoever may read the namespace's objects;
the pods' own specs hold the real values), and read back with
:func:`~anylaunch.schedulers.common.roles.role_from_record`, which also reads the records of
earlier versions (apps launched before an upgrade still describe).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from anylaunch.schedulers.common.roles import role_record as shared_role_record
from anylaunch.schedulers.kubernetes.names import (
    ANNOTATION_RECORD,
    APP_LABEL_KEYS,
    LABEL_APP_ID,
    RECORD_KEY,
    role_dns_names,
)
from anylaunch.schedulers.kubernetes.state import AppView
from anylaunch.specs.api import AppDef, Role

__all__ = [
    "CONFIGMAP",
    "cancel_record",
    "record_app",
    "record_configmap",
    "record_data",
    "record_payload",
    "record_views",
    "role_record",
]

#: (apiVersion, kind) of a record ConfigMap.
CONFIGMAP: tuple[str, str] = ("v1", "ConfigMap")


def role_record(role: Role) -> dict[str, Any]:
    """A role as the app record keeps it: the shared role record, secret env values masked.

    >>> role = Role("w", "img", entrypoint="x", env={"HF_TOKEN": "t", "LR": "1"})
    >>> role_record(role)["env"]
    {'HF_TOKEN': '***', 'LR': '1'}
    """
    return shared_role_record(role, mask_secrets=True)


def record_payload(app: AppDef, *, scheduler: str, mode: str, session: str) -> str:
    """The app record as stored: JSON of the roles (as given, secrets masked) and how the app
    was submitted.

    >>> from anylaunch.specs import AppDef, Role
    >>> app = AppDef("a", [Role("w", "img", entrypoint="x", env={"API_TOKEN": "s3cr3t"})])
    >>> payload = record_payload(app, scheduler="kubernetes", mode="jobs", session="s")
    >>> "s3cr3t" in payload, json.loads(payload)["roles"][0]["env"]
    (False, {'API_TOKEN': '***'})
    """
    data = {
        "name": app.name,
        "session": session,
        "scheduler": scheduler,
        "mode": mode,
        "created": time.time(),
        "roles": [role_record(role) for role in app.roles],
        "role_labels": dict(zip([r.name for r in app.roles], role_dns_names(app), strict=True)),
    }
    return json.dumps(data, sort_keys=True)


def record_configmap(
    payload: str,
    *,
    namespace: str,
    name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A record ConfigMap named after the app, carrying the app's labels.

    >>> cm = record_configmap('{"name": "a"}', namespace="ml", name="a-1", labels={})
    >>> cm["kind"], record_data(cm)
    ('ConfigMap', {'name': 'a'})
    """
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": CONFIGMAP[0],
        "kind": CONFIGMAP[1],
        "metadata": metadata,
        "data": {RECORD_KEY: payload},
    }


def cancel_record(
    holder: Mapping[str, Any], namespace: str, mark: Mapping[str, str]
) -> dict[str, Any]:
    """The record ConfigMap a cancel writes for an app whose record an object of its workload
    carries (``holder``): the same record, the app's labels and the marks (``mark``).

    >>> job = {"metadata": {"name": "a-1-w-0", "annotations": {ANNOTATION_RECORD: "{}"},
    ...        "labels": {LABEL_APP_ID: "a-1", "anylaunch.io/role": "w"}}}
    >>> cm = cancel_record(job, "ml", {"anylaunch.io/cancelled": "now"})
    >>> cm["metadata"]["name"], cm["metadata"]["labels"], cm["metadata"]["annotations"]
    ('a-1', {'anylaunch.io/app-id': 'a-1'}, {'anylaunch.io/cancelled': 'now'})
    """
    meta = holder.get("metadata") or {}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k in APP_LABEL_KEYS}
    payload = str((meta.get("annotations") or {}).get(ANNOTATION_RECORD, "{}"))
    return record_configmap(
        payload,
        namespace=namespace,
        name=str(labels.get(LABEL_APP_ID, "")),
        labels=labels,
        annotations=mark,
    )


def record_data(record: Mapping[str, Any]) -> dict[str, Any]:
    """What the record holds, from a record ConfigMap or a record-carrying object (``{}`` for
    a damaged record).

    >>> record_data({"metadata": {"annotations": {ANNOTATION_RECORD: '{"name": "a"}'}}})
    {'name': 'a'}
    >>> record_data({"data": {RECORD_KEY: "not json"}})
    {}
    """
    text = (record.get("data") or {}).get(RECORD_KEY)
    if text is None:
        text = ((record.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RECORD)
    try:
        data = json.loads(text or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def record_app(kind: tuple[str, str], obj: Mapping[str, Any]) -> str:
    """The name of the app whose record ``obj`` (of ``kind``) is or carries, else ``""``: a
    ConfigMap named after its app, or an object with the record annotation.

    >>> record_app(CONFIGMAP, {"metadata": {"name": "a-1", "labels": {LABEL_APP_ID: "a-1"}}})
    'a-1'
    >>> record_app(("batch/v1", "Job"), {"metadata": {"name": "a-1-w-0",
    ...            "labels": {LABEL_APP_ID: "a-1"}}})
    ''
    """
    meta = obj.get("metadata") or {}
    app = str((meta.get("labels") or {}).get(LABEL_APP_ID, ""))
    if kind == CONFIGMAP:
        return app if meta.get("name") == app else ""
    return app if ANNOTATION_RECORD in (meta.get("annotations") or {}) else ""


def record_views(
    listed: Iterable[tuple[tuple[str, str], Iterable[Mapping[str, Any]]]],
    names: Sequence[str] | None = None,
) -> dict[str, AppView]:
    """One view per app found among listed objects (``(kind, objects)`` pairs): its record,
    the ConfigMap when the app has one (see the module's note), for ``names`` only if given.

    >>> job = {"metadata": {"name": "a-w-0", "labels": {LABEL_APP_ID: "a"},
    ...        "annotations": {ANNOTATION_RECORD: "{}"}}}
    >>> cm = {"metadata": {"name": "a", "labels": {LABEL_APP_ID: "a"}}}
    >>> views = record_views([(("batch/v1", "Job"), [job]), (CONFIGMAP, [cm])])
    >>> views["a"].record_kind
    ('v1', 'ConfigMap')
    """
    wanted = None if names is None else set(names)
    views: dict[str, AppView] = {}
    for kind, objects in listed:
        for obj in objects:
            app = record_app(kind, obj)
            if not app or (wanted is not None and app not in wanted):
                continue
            if app not in views or kind == CONFIGMAP:
                views[app] = AppView(record=dict(obj), record_kind=kind)
    return views
