"""The list calls of the Kubernetes schedulers: what the cluster holds of some apps (their
records, workloads and pods) in a bounded number of calls, and the rank-0 pod's IP."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from anylaunch.schedulers.kubernetes.client import KubeClient, KubernetesSchedulerError
from anylaunch.schedulers.kubernetes.names import (
    _SELECTOR_CHUNK,
    LABEL_APP_ID,
    LABEL_REPLICA_ID,
    LABEL_ROLE,
)
from anylaunch.schedulers.kubernetes.record import CONFIGMAP, record_app, record_views
from anylaunch.schedulers.kubernetes.request import KubernetesRequest
from anylaunch.schedulers.kubernetes.state import AppView, newest, pending_reason

__all__ = ["app_views", "find_record", "wait_rank0_ip"]


def _in_selector(base: str, key: str, values: Sequence[str]) -> str:
    """
    >>> _in_selector("a=b", "c", ["x", "y"])
    'a=b,c in (x,y)'
    """
    return f"{base},{key} in ({','.join(values)})"


def app_views(
    client: KubeClient,
    namespace: str,
    selector: str,
    names: Sequence[str] | None,
    workload_kinds: Callable[[str], list[tuple[str, str]]],
    record_kinds: Sequence[tuple[str, str]] = (CONFIGMAP,),
) -> dict[str, AppView]:
    """Records, workloads and pods of the apps ``names`` (every app matching ``selector`` in
    the namespace if None), keyed by app name: per chunk of names, one list call per kind
    that may hold a record (``record_kinds``), one per workload kind that drives the state of
    the modes found (``workload_kinds(mode)[0]``, reused when it was listed for the records)
    and one for the pods."""
    selectors = (
        [selector]
        if names is None
        else [
            _in_selector(selector, LABEL_APP_ID, names[i : i + _SELECTOR_CHUNK])
            for i in range(0, len(names), _SELECTOR_CHUNK)
        ]
    )
    views: dict[str, AppView] = {}
    for chunk_selector in selectors:
        listed = {kind: client.list(*kind, namespace, chunk_selector) for kind in record_kinds}
        chunk = record_views(listed.items())
        if not chunk:
            continue
        kinds = {kind for view in chunk.values() for kind in workload_kinds(view.mode)[:1]}
        for kind in sorted(kinds):
            objects = (
                listed[kind] if kind in listed else client.list(*kind, namespace, chunk_selector)
            )
            for obj in objects:
                app = obj["metadata"].get("labels", {}).get(LABEL_APP_ID, "")
                if app in chunk:
                    chunk[app].workloads.append(obj)
        for pod in client.list("v1", "Pod", namespace, chunk_selector):
            app = pod["metadata"].get("labels", {}).get(LABEL_APP_ID, "")
            if app in chunk:
                chunk[app].pods.append(pod)
        views.update(chunk)
    return views


def find_record(
    client: KubeClient,
    namespace: str,
    selector: str,
    name: str,
    record_kinds: Sequence[tuple[str, str]] = (CONFIGMAP,),
) -> AppView | None:
    """The app's record (a view without workloads or pods) from the API server, or None for
    an unknown app: a GET of its ConfigMap, then a list per other kind that may hold it."""
    configmap = client.get(*CONFIGMAP, namespace, name)
    if configmap is not None and record_app(CONFIGMAP, configmap) == name:
        return AppView(record=configmap)
    app_selector = f"{selector},{LABEL_APP_ID}={name}"
    for kind in record_kinds:
        if kind != CONFIGMAP:
            found = record_views([(kind, client.list(*kind, namespace, app_selector))], [name])
            if name in found:
                return found[name]
    return None


def wait_rank0_ip(client: KubeClient, request: KubernetesRequest) -> str:
    """Polls the rank-0 pod until it has an IP (``rank0_host=pod_ip``).

    Raises:
        KubernetesSchedulerError: no IP within ``request.rank0_timeout`` (with the pod's
            pending reason).
    """
    rank0 = request.objects[request.rank0_index]
    labels = rank0["metadata"]["labels"]
    selector = ",".join(f"{k}={labels[k]}" for k in (LABEL_APP_ID, LABEL_ROLE, LABEL_REPLICA_ID))
    deadline = time.monotonic() + request.rank0_timeout
    delay = 0.1
    while True:
        pod = newest(client.list("v1", "Pod", request.namespace, selector))
        ip = (pod or {}).get("status", {}).get("podIP")
        if ip:
            return str(ip)
        if time.monotonic() > deadline:
            reason = pending_reason(pod) if pod else "its pod was not created"
            raise KubernetesSchedulerError(
                f"the rank-0 pod of {request.app_id} got no IP within "
                f"{request.rank0_timeout:g}s ({reason or 'pending'}); the other replicas "
                "were not created. Fix: check the cluster's capacity, raise rank0_timeout, "
                "or use rank0_host=dns on a cluster with DNS"
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 2.0)
