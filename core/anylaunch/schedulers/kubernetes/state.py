"""How the objects of a Kubernetes app read as its state (no I/O): pod phases as replica states,
pending reasons and exit codes, the app's state, and the description built from them.

The app's state from its replicas' is the shared rule
(:func:`~anylaunch.schedulers.common.states.aggregate_replica_states`); what Kubernetes adds is in
:func:`app_verdict`: the workload's own state where it has one (a Volcano Job's phase, an
AppWrapper's state), the cancel mark on the app record, and workload objects gone missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anylaunch.schedulers.api import DescribeAppResponse
from anylaunch.schedulers.common.states import aggregate_replica_states
from anylaunch.schedulers.kubernetes.names import (
    LABEL_APP_ID,
    LABEL_MODE,
    LABEL_REPLICA_ID,
    LABEL_ROLE,
)
from anylaunch.specs.api import NONE, AppState, ReplicaStatus, Role, RoleStatus

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


#: Pod ``status.reason`` values by which the node or the control plane, not the app, ended a
#: pod: the kubelet's eviction (node pressure), a node lost (older node controllers), a
#: critical pod's admission, a graceful node shutdown (1.21 says Shutdown, later Terminated).
_LOST_REASONS = ("Evicted", "NodeLost", "Preempting", "Shutdown", "Terminated")


def disruption(pod: Mapping[str, Any]) -> str:
    """How the platform ended a pod, in its own words (``""`` if it did not say so): the
    ``DisruptionTarget`` condition (Kubernetes >= 1.26: PreemptionByScheduler,
    DeletionByTaintManager, EvictionByEvictionAPI, DeletionByPodGC, TerminationByKubelet),
    a ``status.reason`` of :data:`_LOST_REASONS`, or a container killed after the pod's
    deletion was asked for (an eviction or a delete while it ran, as on clusters < 1.26).

    >>> disruption({"status": {"phase": "Failed", "conditions": [{"type": "DisruptionTarget",
    ...     "status": "True", "reason": "PreemptionByScheduler",
    ...     "message": "Preempted by pod 1234 on node n1"}]}})
    'DisruptionTarget (PreemptionByScheduler): Preempted by pod 1234 on node n1'
    >>> disruption({"status": {"phase": "Failed", "reason": "Evicted",
    ...     "message": "The node was low on resource: memory."}})
    'Evicted: The node was low on resource: memory.'
    """
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            said = f": {cond['message']}" if cond.get("message") else ""
            return f"DisruptionTarget ({cond.get('reason', '')}){said}"
    if status.get("reason") in _LOST_REASONS:
        return f"{status['reason']}: {status.get('message', '')}".strip().rstrip(":")
    return _deleted_while_running(pod)


def _deleted_while_running(pod: Mapping[str, Any]) -> str:
    """``"the pod was deleted while it ran ..."`` when a container ended after the pod's
    deletion was asked for (its deletionTimestamp less the grace period)."""
    meta = pod.get("metadata") or {}
    deleting = meta.get("deletionTimestamp")
    if not deleting:
        return ""
    from datetime import datetime, timedelta

    try:
        asked = datetime.fromisoformat(str(deleting).replace("Z", "+00:00")) - timedelta(
            seconds=int(meta.get("deletionGracePeriodSeconds") or 0)
        )
    except ValueError:
        return ""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        ended = ((container.get("state") or {}).get("terminated") or {}).get("finishedAt")
        try:
            after = ended and datetime.fromisoformat(str(ended).replace("Z", "+00:00")) >= asked
        except ValueError:
            after = False
        if after:
            return "the pod was deleted while it ran (an eviction or a delete)"
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
        lost = disruption(pod)
        if lost and lost not in reason:  # the platform's cause first, then the exit
            reason = f"{lost}; {reason}" if reason else lost
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


def replica_pods_of(
    view: AppView, roles: Sequence[Role], role_labels: Mapping[str, str]
) -> Iterator[tuple[str, int, Mapping[str, Any] | None]]:
    """(role label, replica id, its newest pod or None) of every replica of the app's roles,
    role by role."""
    pods = group_by_replica(view.pods)
    for role in roles:
        label = role_labels.get(role.name, role.name)
        for i in range(role.num_replicas):
            yield label, i, newest(pods.get((label, i), []))


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
    #: (apiVersion, kind) of the object holding the record (see
    #: :mod:`~anylaunch.schedulers.kubernetes.record`)
    record_kind: tuple[str, str] = ("v1", "ConfigMap")

    @property
    def app(self) -> str:
        """The app's name (its id within the namespace)."""
        return str(self.record["metadata"].get("labels", {}).get(LABEL_APP_ID, ""))

    @property
    def mode(self) -> str:
        """The mode the app was submitted in."""
        return str(self.record["metadata"].get("labels", {}).get(LABEL_MODE, ""))


def app_verdict(
    workload_state: AppState | None,
    replicas: Sequence[ReplicaView],
    msg: str,
    *,
    cancelled: bool,
    workload_gone: bool,
) -> tuple[AppState, str]:
    """The app's state and message.

    The workload's own state decides when it has one, else the replicas' add up
    (:func:`app_state_of`). Then the facts only Kubernetes knows: an app marked cancelled on
    its record is CANCELLED (unless it had already succeeded), and an app whose workload
    objects are gone (``workload_gone``: deleted outside anylaunch, past the creation grace)
    is FAILED. The message names the first failed replica, or the first one pending and why.

    >>> S = AppState
    >>> app_verdict(None, [ReplicaView("w", 0, S.RUNNING), ReplicaView("w", 1, S.FAILED,
    ...     "exit code 3")], "", cancelled=False, workload_gone=False)
    (<AppState.FAILED: 5>, 'replica w/1 failed: exit code 3')
    >>> app_verdict(None, [ReplicaView("w", 0, S.RUNNING)], "", cancelled=True,
    ...     workload_gone=False)
    (<AppState.CANCELLED: 6>, 'cancelled by request')
    >>> app_verdict(S.PENDING, [ReplicaView("w", 0, S.PENDING, "Unschedulable: no node")], "",
    ...     cancelled=False, workload_gone=False)
    (<AppState.PENDING: 2>, 'w/0 pending: Unschedulable: no node')
    """
    state = app_state_of([r.state for r in replicas]) if workload_state is None else workload_state
    if cancelled and state != AppState.SUCCEEDED:
        return AppState.CANCELLED, "cancelled by request"
    if workload_gone and not state.is_terminal():
        return AppState.FAILED, "the app's workload objects are gone (deleted outside anylaunch?)"
    if state == AppState.FAILED and not msg:
        failed = [r for r in replicas if r.state == AppState.FAILED]
        if failed:
            msg = f"replica {failed[0].role}/{failed[0].replica_id} failed: {failed[0].msg}"
    if state in (AppState.PENDING, AppState.SUBMITTED) and not msg:
        waiting = [r for r in replicas if r.msg and not r.state.is_terminal()]
        if waiting:
            msg = f"{waiting[0].role}/{waiting[0].replica_id} pending: {waiting[0].msg}"
    return state, msg


def describe_response(
    app_id: str,
    state: AppState,
    msg: str,
    replicas: Sequence[ReplicaView],
    roles: Sequence[Role],
    role_labels: Mapping[str, str],
    metadata: dict[str, str],
) -> DescribeAppResponse:
    """The description of an app in ``state``: a status per replica under its role's name
    (every replica of a CANCELLED app, whose workload is gone, shows CANCELLED), the most
    restarts of any replica, and the roles as recorded."""
    by_label = {label: role for role, label in role_labels.items()}
    statuses: dict[str, list[ReplicaStatus]] = {role.name: [] for role in roles}
    for rep in sorted(replicas, key=lambda r: (r.role, r.replica_id)):
        rep_state = rep.state
        if state == AppState.CANCELLED and not rep_state.is_terminal():
            rep_state = AppState.CANCELLED
        role_name = by_label.get(rep.role, rep.role)
        statuses.setdefault(role_name, []).append(
            ReplicaStatus(
                id=rep.replica_id,
                state=rep_state,
                role=role_name,
                hostname=rep.pod,
                structured_error_msg=rep.msg or NONE,
            )
        )
    if state == AppState.CANCELLED:  # the workload is gone: show every replica
        for role in roles:
            have = {r.id for r in statuses[role.name]}
            statuses[role.name] += [
                ReplicaStatus(i, AppState.CANCELLED, role.name, "")
                for i in range(role.num_replicas)
                if i not in have
            ]
    return DescribeAppResponse(
        app_id=app_id,
        state=state,
        num_restarts=max((r.restarts for r in replicas), default=0),
        msg=msg or NONE,
        ui_url=None,
        metadata=metadata,
        roles_statuses=[RoleStatus(role, reps) for role, reps in statuses.items()],
        roles=list(roles),
    )
