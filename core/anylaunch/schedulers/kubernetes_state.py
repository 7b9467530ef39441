"""How the objects of a Kubernetes app read as its state: pod and replica states, the app's state, views (no I/O)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anylaunch.schedulers.kubernetes_names import (
    LABEL_REPLICA_ID,
    LABEL_ROLE,
)
from anylaunch.schedulers.shared import (
    aggregate_replica_states,
)
from anylaunch.specs.api import (
    AppState,
)

#: Waiting reasons that are just progress, not problems.
_NORMAL_WAITING = {"ContainerCreating", "PodInitializing"}


def _terminated_message(pod: Mapping[str, Any]) -> str:
    """``exit code N (Reason): message`` of the pod's first failed container, or ``""``."""
    statuses = pod.get("status", {}).get("containerStatuses") or []
    for status in statuses:
        term = (status.get("state") or {}).get("terminated") or (status.get("lastState") or {}).get(
            "terminated"
        )
        if term and term.get("exitCode", 0) != 0:
            text = f"exit code {term.get('exitCode')}"
            if term.get("reason"):
                text += f" ({term['reason']})"
            if term.get("message"):
                text += f": {term['message'].strip()}"
            return text
    return ""


def pending_reason(pod: Mapping[str, Any]) -> str:
    """Why a pod is not running yet: unschedulable, image pull errors, ... (``""`` if none).

    >>> pending_reason({"status": {"conditions": [{"type": "PodScheduled", "status": "False",
    ...     "reason": "Unschedulable", "message": "0/1 nodes are available: 1 Insufficient cpu."}]}})
    'Unschedulable: 0/1 nodes are available: 1 Insufficient cpu.'
    """
    status = pod.get("status", {})
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return f"{cond.get('reason', 'Unschedulable')}: {cond.get('message', '')}".strip()
    for container in (status.get("initContainerStatuses") or []) + (
        status.get("containerStatuses") or []
    ):
        waiting = (container.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") not in _NORMAL_WAITING:
            message = waiting.get("message", "")
            return f"{waiting.get('reason')}: {message}".strip().rstrip(":")
    if status.get("reason"):
        return f"{status['reason']}: {status.get('message', '')}".strip().rstrip(":")
    return ""


def pod_replica_state(pod: Mapping[str, Any]) -> tuple[AppState, str]:
    """The replica state a pod shows, and a message (pending reason or exit code).

    >>> pod_replica_state({"status": {"phase": "Failed", "containerStatuses": [
    ...     {"state": {"terminated": {"exitCode": 3, "reason": "Error"}}}]}})
    (<AppState.FAILED: 5>, 'exit code 3 (Error)')
    >>> pod_replica_state({"status": {"phase": "Running"}})
    (<AppState.RUNNING: 3>, '')
    """
    status = pod.get("status", {})
    phase = status.get("phase", "Pending")
    if phase == "Pending":
        return AppState.PENDING, pending_reason(pod)
    if phase == "Running":
        return AppState.RUNNING, ""
    if phase == "Succeeded":
        return AppState.SUCCEEDED, ""
    if phase == "Failed":
        reason = _terminated_message(pod)
        if not reason and status.get("reason"):
            reason = f"{status['reason']}: {status.get('message', '')}".strip().rstrip(":")
        return AppState.FAILED, reason
    return AppState.UNKNOWN, status.get("message", "")


def newest(objects: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The most recently created object (by creationTimestamp, then name)."""
    best: Mapping[str, Any] | None = None
    for obj in objects:
        meta = obj.get("metadata", {})
        key = (meta.get("creationTimestamp", ""), meta.get("name", ""))
        if best is None or key >= (
            best["metadata"].get("creationTimestamp", ""),
            best["metadata"].get("name", ""),
        ):
            best = obj
    return best


def _replica_key(obj: Mapping[str, Any]) -> tuple[str, int] | None:
    labels = obj.get("metadata", {}).get("labels") or {}
    try:
        return labels[LABEL_ROLE], int(labels[LABEL_REPLICA_ID])
    except (KeyError, ValueError):
        return None


def group_by_replica(
    objects: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, int], list[Mapping[str, Any]]]:
    """Objects keyed by (role label, replica id)."""
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for obj in objects:
        key = _replica_key(obj)
        if key is not None:
            groups.setdefault(key, []).append(obj)
    return groups


def app_state_of(states: Sequence[AppState]) -> AppState:
    """An app's state from its replicas' (:func:`aggregate_replica_states`), except that an app
    whose replicas have no pods yet is SUBMITTED: the API server took it, nothing runs yet.

    >>> app_state_of([AppState.SUCCEEDED, AppState.RUNNING])
    <AppState.RUNNING: 3>
    >>> app_state_of([])
    <AppState.SUBMITTED: 1>
    """
    if not states:
        return AppState.SUBMITTED
    return aggregate_replica_states(states)


@dataclass
class ReplicaView:
    """One replica as described: state, message, pod name and restarts."""

    role: str
    replica_id: int
    state: AppState
    msg: str = ""
    pod: str = ""
    restarts: int = 0


@dataclass
class AppView:
    """What one describe round trip learned about an app."""

    record: dict[str, Any]
    workloads: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
