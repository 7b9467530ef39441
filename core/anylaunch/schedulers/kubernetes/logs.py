"""Pod logs of the Kubernetes schedulers: one replica's lines, read once or followed.

Kubernetes keeps one interleaved log per container (stdout and stderr together), with
timestamps on request: ``since`` becomes the API's ``sinceSeconds``, ``until`` asks for
``timestamps`` and stops at the first later line. The checks of ``log_iter``'s arguments are
the base scheduler's (:meth:`anylaunch.schedulers.api.Scheduler.log_iter`), not made here.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any

from anylaunch.schedulers.api import split_lines_iterator
from anylaunch.schedulers.kubernetes.client import KubeClient, KubernetesApiError
from anylaunch.schedulers.kubernetes.state import newest

__all__ = ["pod_log_lines"]


def pod_log_lines(
    client: KubeClient,
    namespace: str,
    selector: str,
    container: str,
    since: datetime | None,
    until: datetime | None,
    follow: bool,
    is_over: Callable[[], bool],
    find_pods: Callable[[], list[dict[str, Any]]] | None = None,
) -> Iterator[str]:
    """Lines of the newest pod matching ``selector`` (one replica's newest attempt).

    Without ``follow`` every container of the pod is read (init containers first; lines of
    containers other than ``container`` are prefixed ``[name] ``). With it, ``container`` is
    followed until ``is_over()`` (the app has ended): waiting for the pod to start, and moving
    on to a retry's pod. ``find_pods`` lists the replica's pods (default: a list call by
    ``selector``; the scheduler passes its watch's cache).
    """
    if find_pods is None:

        def find_pods() -> list[dict[str, Any]]:
            return client.list("v1", "Pod", namespace, selector)

    query: dict[str, Any] = {}
    if since is not None:
        query["sinceSeconds"] = max(1, int(time.time() - since.timestamp()) + 1)
    if until is not None:
        query["timestamps"] = "true"
    until_ts = until.timestamp() if until is not None else None
    if not follow:
        yield from _read_all(client, namespace, find_pods, container, query, until_ts)
        return

    seen: set[str] = set()
    delay = 0.2
    while True:
        pod = newest(find_pods())
        pod_name = pod["metadata"]["name"] if pod is not None else None
        if pod is None or pod_name in seen or not _started(pod, container):
            if is_over() and (pod is None or pod_name in seen):
                return
            if pod is not None and pod_name not in seen and _finished_unstarted(pod):
                seen.add(str(pod_name))  # never ran (e.g. image error): nothing to read
                continue
            time.sleep(delay)
            delay = min(delay * 1.5, 2.0)
            continue
        seen.add(str(pod_name))
        path = f"/api/v1/namespaces/{namespace}/pods/{pod_name}/log"
        raw = client.stream(path, {**query, "container": container, "follow": "true"})
        try:
            yield from _until(_app_lines(split_lines_iterator(_decoded(raw))), until_ts)
        finally:
            raw.release_conn()
        delay = 0.2


def _read_all(
    client: KubeClient,
    namespace: str,
    find_pods: Callable[[], list[dict[str, Any]]],
    container: str,
    query: Mapping[str, Any],
    until_ts: float | None,
) -> Iterator[str]:
    pod = newest(find_pods())
    if pod is None:
        return
    spec = pod.get("spec", {})
    names = [c["name"] for c in spec.get("initContainers", [])]
    names += [c["name"] for c in spec.get("containers", [])]
    path = f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}/log"
    for name in names:
        try:
            text = client.text(path, {**query, "container": name})
        except KubernetesApiError as e:
            if e.status == 400:  # not started yet (waiting): nothing logged
                continue
            raise
        prefix = "" if name == container else f"[{name}] "
        for line in _until(_app_lines(split_lines_iterator([text])), until_ts):
            yield prefix + line


#: What a kubelet answers, as the log's text, for a container it already removed (the
#: containers of a pod whose deletion was asked go within seconds, held pods' included).
_CONTAINER_GONE = re.compile(r"unable to retrieve container logs for [a-z]+://[0-9a-f]+\s*")


def _app_lines(lines: Iterable[str]) -> Iterator[str]:
    """The app's lines, without the kubelet's word that the container is gone (not a line of
    the app: its log is simply no longer there).

    >>> list(_app_lines(["a\\n", "unable to retrieve container logs for docker://0a1b\\n"]))
    ['a\\n']
    """
    for line in lines:
        if not _CONTAINER_GONE.fullmatch(line):
            yield line


def _until(lines: Iterable[str], until_ts: float | None) -> Iterator[str]:
    """Drops the RFC 3339 timestamp prefix (present when ``until`` is set) and stops after
    ``until``.

    >>> list(_until(["2024-01-02T03:04:05.5Z a\\n", "2024-01-02T03:04:07Z b\\n"], 1704164646.0))
    ['a\\n']
    >>> list(_until(["no stamp\\n"], None))
    ['no stamp\\n']
    """
    for line in lines:
        if until_ts is None:
            yield line
            continue
        stamp, _, rest = line.partition(" ")
        ts = _parse_rfc3339(stamp)
        if ts is not None and ts > until_ts:
            return
        yield rest


def _parse_rfc3339(stamp: str) -> float | None:
    """Epoch seconds of the API's timestamps (nanoseconds: fromisoformat takes at most micro).

    >>> _parse_rfc3339("1970-01-01T00:00:01.250000001Z"), _parse_rfc3339("soon")
    (1.250000001, None)
    """
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z", stamp)
    if match is None:
        return None
    base = datetime.fromisoformat(match.group(1)).replace(tzinfo=timezone.utc).timestamp()
    return base + float(match.group(2) or 0)


def _decoded(raw: Any) -> Iterator[str]:
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    for chunk in raw.stream(8192, decode_content=True):
        text = decoder.decode(chunk)
        if text:
            yield text
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail


def _started(pod: Mapping[str, Any], container: str) -> bool:
    for status in pod.get("status", {}).get("containerStatuses") or []:
        if status.get("name") == container:
            state = status.get("state") or {}
            return "running" in state or "terminated" in state
    return False


def _finished_unstarted(pod: Mapping[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") in ("Failed", "Succeeded")
