"""Job arrays on the ``kubernetes`` scheduler (jobs mode).

Each index is a replica of the app's one role: replica id == array index.

- **Indexed Job** (API server >= 1.29, decided from ``GET /version``, or forced with the run
  option ``indexed_job``): ONE ``batch/v1`` Job with ``completionMode: Indexed``,
  ``completions: n``, ``parallelism: K`` and ``backoffLimitPerIndex: max_retries``; its
  container runs ``sh -c`` :func:`~anylaunch.schedulers.common.arrays.index_script` with the
  index from ``$JOB_COMPLETION_INDEX`` (through ``ANYLAUNCH_ARRAY_SELECTED`` for a retry's
  subset). Indexed Jobs exist since 1.21, but before per-index backoff (beta and on by
  default in 1.29) one failing index fails the whole Job and kills the indices still running,
  which is not an array's meaning (every index runs; the ratio decides), so older servers get
  the fallback.
- **Fallback** (1.20 .. 1.28): one Job per index, ``{app}-{role}-{index}``, labelled with its
  index, each pod running :func:`~anylaunch.specs.arrays.resolve_index`'s command (no shell
  needed). The first K Jobs are created with ``parallelism: 1``, the others with
  ``parallelism: 0`` (the Job controller runs no pod for them). Whoever describes the app
  (the session's poller, a sensor, ``anylaunch status``) releases the next held Jobs when
  fewer than K are unfinished: one PATCH per released index, at most K per describe, N - K in
  all. So at most K indices run at once without any controller; the limit: an array nobody
  describes pauses after its first K indices (nothing is lost: the next describe resumes it).
  With no parallelism limit every Job is released at creation and nothing waits on a poller.

Status costs the scheduler's usual list calls (record, Jobs, pods by label selector; or none
from the shared watch's cache) whatever the size, plus the release PATCHes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from anylaunch.schedulers.common.arrays import (
    array_meta,
    index_script,
    read_array_meta,
    select_by_position,
)
from anylaunch.schedulers.kubernetes.names import LABEL_REPLICA_ID
from anylaunch.schedulers.kubernetes.pods import (
    PodOptions,
    apply_overlays,
    apply_pod_overlays,
    replica_role,
    role_to_pod,
)
from anylaunch.schedulers.kubernetes.request import replica_labels
from anylaunch.specs.api import AppDef, Role
from anylaunch.specs.array_status import parse_index_ranges
from anylaunch.specs.arrays import ArraySpec, resolve_index, substitute_shell_refs

__all__ = [
    "COMPLETION_INDEX",
    "INDEXED_MIN_VERSION",
    "SELECTED_ENV",
    "array_data",
    "fallback_jobs",
    "indexed_job",
    "indexed_supported",
    "positions",
    "read_array_data",
    "released",
    "to_release",
]

#: The first API server version whose Indexed Jobs fail one index at a time.
INDEXED_MIN_VERSION = (1, 29)
#: The env var that lists the indices an Indexed Job runs (``all``: every one).
SELECTED_ENV = "ANYLAUNCH_ARRAY_SELECTED"
#: Where Kubernetes writes an Indexed Job pod's completion index (annotation, and label
#: from 1.28).
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

_POSITION = "anylaunch_slot=$JOB_COMPLETION_INDEX\n" + select_by_position(f"${SELECTED_ENV}")


def indexed_supported(version: Mapping[str, Any]) -> bool:
    """Whether an API server (its ``/version`` answer) runs arrays as one Indexed Job.

    >>> indexed_supported({"major": "1", "minor": "20"}), indexed_supported(
    ...     {"major": "1", "minor": "30+"})
    (False, True)
    """
    digits = "".join(c for c in str(version.get("minor", "0")) if c.isdigit())
    found = (int(str(version.get("major", "0")) or 0), int(digits or 0))
    return found >= INDEXED_MIN_VERSION


def array_data(array: ArraySpec, indexed: bool) -> dict[str, Any]:
    """What the app record keeps about an array (see :func:`read_array_data`)."""
    return {"meta": array_meta(array), "limit": array.limit, "indexed": indexed}


def _job(
    name: str, namespace: str, labels: Mapping[str, str], spec: dict[str, Any], pod: Any
) -> dict[str, Any]:
    spec["template"] = {"metadata": pod["metadata"], "spec": pod["spec"]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": spec,
    }


def fallback_jobs(
    app: AppDef,
    options: PodOptions,
    namespace: str,
    name: str,
    labels: Mapping[str, str],
    role_label: str,
    blocklist: list[str],
) -> list[dict[str, Any]]:
    """One Job per selected index; the first ``limit`` released (``parallelism: 1``)."""
    role, array = app.roles[0], app.array
    assert array is not None
    jobs = []
    for position, index in enumerate(array.selected):
        replica = replica_role(resolve_index(role, array, index), f"{namespace}:{name}", index)
        rep_labels = replica_labels(labels, role_label, 0, index)
        pod = role_to_pod(
            replica, container=role_label, labels=rep_labels, rank0_host=None, options=options
        )
        apply_pod_overlays(
            pod,
            [(app, "kubernetes"), (replica, "kubernetes")],
            role_label,
            options.image_pull_policy,
        )
        spec = {
            "backoffLimit": role.max_retries,
            "completions": 1,
            "parallelism": 1 if position < array.limit else 0,
        }
        job = _job(f"{name}-{role_label}-{index}", namespace, rep_labels, spec, pod)
        targets: list[tuple[AppDef | Role, str]] = [(app, "kubernetes"), (replica, "kubernetes")]
        apply_overlays(job, targets, "V1Job", blocklist, "")
        job["spec"]["parallelism"] = spec["parallelism"]  # anylaunch's, whatever the overlay
        jobs.append(job)
    return jobs


def indexed_job(
    app: AppDef,
    options: PodOptions,
    namespace: str,
    name: str,
    labels: Mapping[str, str],
    role_label: str,
    blocklist: list[str],
) -> dict[str, Any]:
    """The one Indexed Job of an array (API servers >= 1.29)."""
    role, array = app.roles[0], app.array
    assert array is not None
    rendered = replica_role(role, f"{namespace}:{name}", 0)
    macro_env = {k: v for k, v in rendered.env.items() if substitute_shell_refs(v) != v}
    full = ArraySpec(array.size, None, array.min_success_ratio, array.params)
    script = _POSITION + index_script(
        Role(
            role.name,
            image=rendered.image,
            entrypoint=rendered.entrypoint,
            args=rendered.args,
            env=macro_env,
        ),
        full,
        "$anylaunch_slot",
    )
    runner = Role(
        role.name,
        image=rendered.image,
        entrypoint="sh",
        args=["-c", script],
        env={
            **{k: v for k, v in rendered.env.items() if k not in macro_env},
            SELECTED_ENV: "all" if array.indices is None else " ".join(map(str, array.selected)),
        },
        resource=rendered.resource,
        mounts=rendered.mounts,
        port_map=rendered.port_map,
        metadata=rendered.metadata,
    )
    rep_labels = {**labels, **replica_labels({}, role_label, 0, 0)}
    rep_labels.pop(LABEL_REPLICA_ID)  # a pod's index is its completion index
    pod = role_to_pod(
        runner, container=role_label, labels=rep_labels, rank0_host=None, options=options
    )
    apply_pod_overlays(
        pod, [(app, "kubernetes"), (role, "kubernetes")], role_label, options.image_pull_policy
    )
    count = len(array.selected)
    spec = {
        "completionMode": "Indexed",
        "completions": count,
        "parallelism": min(array.limit, count),
        "backoffLimitPerIndex": role.max_retries,
    }
    job = _job(f"{name}-{role_label}", namespace, rep_labels, spec, pod)
    targets: list[tuple[AppDef | Role, str]] = [(app, "kubernetes"), (role, "kubernetes")]
    apply_overlays(job, targets, "V1Job", blocklist, "")
    return job


def read_array_data(data: Mapping[str, Any]) -> tuple[Any, int, bool] | None:
    """(ArrayMeta, limit, indexed) from an app record's data, or None (not an array)."""
    found = data.get("array")
    if not isinstance(found, Mapping):
        return None
    meta = read_array_meta(str(found.get("meta", "")))
    return meta, int(found.get("limit", meta.size)), bool(found.get("indexed", False))


def positions(text: str | None) -> list[int]:
    """Index positions of an Indexed Job status field (``"0-3,7"``)."""
    return parse_index_ranges(text) if text else []


def _finished(job: Mapping[str, Any]) -> bool:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return True
    return False


def released(job: Mapping[str, Any]) -> bool:
    """Whether a fallback Job may run its pod (``parallelism`` > 0)."""
    return int((job.get("spec") or {}).get("parallelism", 1)) > 0


def to_release(jobs_in_order: Sequence[Mapping[str, Any]], limit: int) -> list[str]:
    """Names of the held Jobs to release now so that at most ``limit`` are unfinished.

    >>> run = {"metadata": {"name": "a"}, "spec": {"parallelism": 1}}
    >>> done = {"metadata": {"name": "b"}, "spec": {"parallelism": 1},
    ...         "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    >>> held = [{"metadata": {"name": n}, "spec": {"parallelism": 0}} for n in "cde"]
    >>> to_release([run, done, *held], 3)
    ['c', 'd']
    """
    busy = sum(1 for job in jobs_in_order if released(job) and not _finished(job))
    held = [str(job["metadata"]["name"]) for job in jobs_in_order if not released(job)]
    return held[: max(limit - busy, 0)]


def dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, sort_keys=True)


def exit_code(pod: Mapping[str, Any] | None) -> int | None:
    """The exit code of a pod's first terminated container (None while none has ended)."""
    for status in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        term = (status.get("state") or {}).get("terminated")
        if term and term.get("exitCode") is not None:
            return int(term["exitCode"])
    return None


def by_completion_index(pods: Sequence[Mapping[str, Any]]) -> dict[int, list[Mapping[str, Any]]]:
    """An Indexed Job's pods by completion index (position in the submission)."""
    found: dict[int, list[Mapping[str, Any]]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        text = (meta.get("annotations") or {}).get(COMPLETION_INDEX) or (
            meta.get("labels") or {}
        ).get(COMPLETION_INDEX)
        if text is not None and str(text).isdigit():
            found.setdefault(int(text), []).append(pod)
    return found


#: Labels and fields the Job controller or API server adds, which a copy must not carry.
_CONTROLLER_LABELS = (
    "controller-uid",
    "job-name",
    "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-name",
)


def retry_job(
    job: Mapping[str, Any],
    name: str,
    labels: Mapping[str, str],
    spec: Mapping[str, Any],
    rename: tuple[str, str],
) -> dict[str, Any]:
    """A copy of an existing Job under a new ``name`` and app ``labels`` (the replica's own
    labels kept), with ``spec`` fields replaced: how a retry reruns indices with the very pod
    specs (secret env values included) of the first run. ``rename`` is (old app name, new
    app name): the containers' env values, args and commands name the new app (its handle
    in ``ANYLAUNCH_JOB_ID``, a resolved ``${app_id}``).

    >>> job = {"metadata": {"name": "a-x1-w-7"}, "spec": {"template": {"spec": {"containers": [
    ...     {"env": [{"name": "ANYLAUNCH_JOB_ID", "value": "kubernetes://s/ns:a-x1"}],
    ...      "args": ["--run", "a-x1"]}]}}}}
    >>> copied = retry_job(job, "a-y2-w-7", {}, {}, ("a-x1", "a-y2"))
    >>> container = copied["spec"]["template"]["spec"]["containers"][0]
    >>> container["env"][0]["value"], container["args"]
    ('kubernetes://s/ns:a-y2', ['--run', 'a-y2'])
    """
    import copy

    meta = job.get("metadata") or {}
    own = {k: v for k, v in (meta.get("labels") or {}).items() if k not in _CONTROLLER_LABELS}
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    tmeta = template.setdefault("metadata", {})
    tlabels = {k: v for k, v in (tmeta.get("labels") or {}).items() if k not in _CONTROLLER_LABELS}
    tmeta["labels"] = {**tlabels, **labels}
    for key in ("creationTimestamp", "uid", "resourceVersion"):
        tmeta.pop(key, None)
    old, new = rename
    pod_spec = template.get("spec") or {}
    for container in [*pod_spec.get("initContainers", []), *pod_spec.get("containers", [])]:
        for var in container.get("env") or []:
            if isinstance(var.get("value"), str):
                var["value"] = var["value"].replace(old, new)
        for key in ("args", "command"):
            if isinstance(container.get(key), list):
                container[key] = [w.replace(old, new) if isinstance(w, str) else w for w in container[key]]  # fmt: skip
    kept = {k: v for k, v in (job.get("spec") or {}).items() if k not in ("selector", "template")}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": meta.get("namespace"), "labels": {**own, **labels}},
        "spec": {**kept, **spec, "template": template},
    }
