"""How an AWS Batch job description reads as anylaunch state: app state, roles, hosts and
log streams (no I/O)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from anylaunch.schedulers.aws.batch_request import (
    _QUEUED,
    _STATES,
    CANCEL_REASON,
    ROLE_NAME_ENV,
    STARTUP_TIMEOUT_TAG,
    TIMEOUT_REASON,
)
from anylaunch.schedulers.common.roles import RANK0_ENV
from anylaunch.specs.api import (
    AppState,
    Resource,
    Role,
)

log: logging.Logger = logging.getLogger(__name__)

__all__ = [
    "env_of",
    "job_host",
    "job_state",
    "log_stream_of",
    "node_groups",
    "role_name_of",
    "role_of",
]


def job_state(job: Mapping[str, Any], now: float) -> tuple[AppState, str, bool]:
    """(state, message, whether the startup timeout has just expired) of a Batch job.

    A FAILED job's message is Batch's reason, its last attempt's when that says more, the
    exit code and the container's reason:

    >>> job_state({"status": "FAILED", "statusReason": "Essential container in task exited",
    ...     "attempts": [{"statusReason": "Host EC2 (instance i-0123) terminated."}]}, 0)[1]
    'Essential container in task exited; Host EC2 (instance i-0123) terminated.'
    """
    status = str(job.get("status", ""))
    reason = str(job.get("statusReason") or "")
    state = _STATES.get(status, AppState.UNKNOWN)
    if reason.startswith(CANCEL_REASON):
        return (
            (AppState.CANCELLED, "cancelled by request", False)
            if status == "FAILED"
            else (
                state,
                f"{status}: cancel requested",
                False,
            )
        )
    if reason.startswith(TIMEOUT_REASON):
        return AppState.FAILED, reason, False
    timeout = int((job.get("tags") or {}).get(STARTUP_TIMEOUT_TAG, "0") or 0)
    if status in _QUEUED and timeout > 0:
        attempts = job.get("attempts") or []
        # a retried job queues again after its last attempt stopped
        since_ms = (attempts[-1].get("stoppedAt") if attempts else None) or job.get("createdAt")
        waited = now - float(since_ms or now * 1000) / 1000
        if waited > timeout:
            said = f"; AWS Batch says: {reason}" if reason else ""
            return (
                AppState.FAILED,
                f"{TIMEOUT_REASON}: {status} for {waited:.0f}s, longer than "
                f"startup_timeout={timeout}s{said}",
                True,
            )
    details = []
    container = job.get("container") or {}
    if status == "FAILED":
        # the last attempt's own reason (e.g. "Host EC2 (instance i-...) terminated."): the
        # job's may be a summary; earlier attempts were retried and do not say why it ended
        attempts = job.get("attempts") or []
        said = str(attempts[-1].get("statusReason") or "") if attempts else ""
        if said and said != reason:
            details.append(said)
        if container.get("exitCode") is not None:
            details.append(f"exit code {container['exitCode']}")
        if container.get("reason"):
            details.append(str(container["reason"]))
    text = "; ".join([reason, *details] if reason else details)
    if status in _QUEUED | {"STARTING"}:
        text = f"{status}: {text}" if text else status
    return state, text, False


def job_host(job: Mapping[str, Any]) -> str:
    interfaces = (job.get("container") or {}).get("networkInterfaces") or []
    return str(interfaces[0].get("privateIpv4Address", "")) if interfaces else ""


def log_stream_of(job: Mapping[str, Any] | None) -> str | None:
    if not job:
        return None
    stream = (job.get("container") or {}).get("logStreamName")
    if not stream:
        attempts = job.get("attempts") or []
        stream = (attempts[-1].get("container") or {}).get("logStreamName") if attempts else None
    return str(stream) if stream else None


def node_groups(job: Mapping[str, Any]) -> list[tuple[str, int, int, dict[str, Any]]]:
    """(role name, first node, last node, container) of each node group of a job."""
    props = job.get("nodeProperties")
    if not props:
        return [(role_name_of(job.get("container") or {}, 0), 0, 0, job.get("container") or {})]
    num_nodes = int(props.get("numNodes", 1))
    groups = []
    for i, group in enumerate(props.get("nodeRangeProperties", [])):
        first, sep, last = str(group.get("targetNodes", "")).partition(":")
        start = int(first) if first else 0
        end = (int(last) if last else num_nodes - 1) if sep else start
        container = group.get("container") or {}
        groups.append((role_name_of(container, i), start, end, container))
    return groups


def env_of(container: Mapping[str, Any]) -> dict[str, str]:
    return {str(e["name"]): str(e.get("value", "")) for e in container.get("environment") or []}


def role_name_of(container: Mapping[str, Any], index: int) -> str:
    name = env_of(container).get(ROLE_NAME_ENV, "")
    return name if re.match(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$", name) else f"group{index}"


def role_of(name: str, start: int, end: int, container: Mapping[str, Any]) -> Role:
    """A Role as Batch knows it (commands as run, after macros and any replica wrapper)."""
    command = [str(c) for c in container.get("command") or []]
    reqs = {
        r.get("type"): str(r.get("value", "0")) for r in container.get("resourceRequirements") or []
    }
    env = {k: v for k, v in env_of(container).items() if k not in (ROLE_NAME_ENV, RANK0_ENV)}
    return Role(
        name=name,
        image=str(container.get("image", "")),
        entrypoint=command[0] if command else "<MISSING>",
        args=command[1:],
        env=env,
        num_replicas=end - start + 1,
        resource=Resource(
            cpu=max(int(float(reqs.get("VCPU", container.get("vcpus", 0)) or 0)), 0),
            gpu=max(int(float(reqs.get("GPU", 0) or 0)), 0),
            memMB=max(int(float(reqs.get("MEMORY", container.get("memory", 0)) or 0)), 0),
        ),
    )
