"""Whether an AWS Batch job queue can run an app: the ``aws_batch`` scheduler's capacity check.

Two calls: ``describe_job_queues`` (the queue must exist, be ENABLED and not INVALID, else
Batch refuses or never runs the job) and ``describe_compute_environments`` of the queue's
compute environments (those ENABLED and not INVALID serve it). Then:

- anylaunch's jobs are EC2 jobs (``platformCapabilities: EC2``): a queue served by Fargate
  compute environments only never runs them;
- an app needing more vCPUs at once (every node of a multi-node job starts together) than
  the ``maxvCpus`` of the managed compute environments add up to never starts;
- an app needing GPUs never starts where no compute environment may launch a GPU instance
  type (a ``p*``/``g*`` family; ``optimal`` and ``default_*`` choose none).

An UNMANAGED compute environment runs on instances its owner registers, of which Batch says
nothing: with one in the queue there is no bound. A ``yes`` means the queue takes the app
and its compute environments can grow to hold it, not that they have it free now (Batch
does not say what is free); memory per instance type is not checked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from anylaunch.schedulers.common.capacity import CanRun, Capacity, Demand

__all__ = ["queue_capacity"]

#: Instance types (or families) with NVIDIA GPUs, e.g. p3, p4d.24xlarge, g4dn, g5.xlarge.
_GPU_TYPE = re.compile(r"^(p|g)\d")
#: Compute environment statuses that serve no job.
_BROKEN = ("INVALID", "DELETING", "DELETED")


def _serving(ce: Mapping[str, Any]) -> bool:
    return ce.get("state") == "ENABLED" and ce.get("status") not in _BROKEN


def queue_capacity(
    queue: Mapping[str, Any] | None,
    environments: Sequence[Mapping[str, Any]],
    needs: Sequence[Demand],
    name: str,
    calls: int,
) -> Capacity:
    """The answer for ``needs`` on job queue ``name`` from its description (None: no such
    queue) and its compute environments' (see the module docstring).

    >>> from anylaunch.schedulers.common.capacity import Demand
    >>> q = {"state": "ENABLED", "status": "VALID", "computeEnvironmentOrder": []}
    >>> ce = {"computeEnvironmentName": "ce", "type": "MANAGED", "state": "ENABLED",
    ...       "status": "VALID", "computeResources": {"type": "EC2", "maxvCpus": 4,
    ...                                              "instanceTypes": ["optimal"]}}
    >>> queue_capacity(q, [ce], [Demand("w/0", 8, 1024, 0)], "q", 2).can_run
    <CanRun.NO: 'no'>
    >>> queue_capacity(q, [ce], [Demand("w/0", 2, 1024, 0)], "q", 2).can_run
    <CanRun.YES: 'yes'>
    """
    if queue is None:
        return Capacity(CanRun.NO, f"AWS Batch has no job queue {name}", calls=calls)
    state, status = queue.get("state"), queue.get("status")
    if state != "ENABLED" or status in _BROKEN:
        said = f": {queue['statusReason']}" if queue.get("statusReason") else ""
        return Capacity(
            CanRun.NO, f"job queue {name} is {state} (status {status}){said}", calls=calls
        )
    serving = [ce for ce in environments if _serving(ce)]
    if not serving:
        listed = ", ".join(
            f"{ce.get('computeEnvironmentName')} {ce.get('state')}/{ce.get('status')}"
            for ce in environments
        )
        return Capacity(
            CanRun.NO,
            f"no compute environment of job queue {name} is ENABLED and valid ({listed or 'none'})",
            calls=calls,
        )
    unmanaged = [ce for ce in serving if ce.get("type") == "UNMANAGED"]
    ec2 = unmanaged + [
        ce for ce in serving if (ce.get("computeResources") or {}).get("type") in ("EC2", "SPOT")
    ]
    if not ec2:
        return Capacity(
            CanRun.NO,
            f"job queue {name} is served by Fargate compute environments only; anylaunch "
            "submits EC2 jobs",
            calls=calls,
        )
    names = ", ".join(str(ce.get("computeEnvironmentName")) for ce in ec2)
    if unmanaged:
        return Capacity(
            CanRun.YES,
            f"job queue {name} is ENABLED; compute environment "
            f"{unmanaged[0].get('computeEnvironmentName')} is UNMANAGED (its instances are not "
            "counted)",
            calls=calls,
        )
    vcpus = sum(need.cpu for need in needs)
    most = sum(int((ce.get("computeResources") or {}).get("maxvCpus", 0)) for ce in ec2)
    if vcpus > most:
        return Capacity(
            CanRun.NO,
            f"the app needs {vcpus:g} vCPUs at once; the compute environments of job queue "
            f"{name} ({names}) allow at most {most} (maxvCpus)",
            calls=calls,
        )
    if any(need.gpu > 0 for need in needs):
        types = sorted(
            {t for ce in ec2 for t in (ce.get("computeResources") or {}).get("instanceTypes") or []}
        )
        if not any(_GPU_TYPE.match(t) for t in types):
            return Capacity(
                CanRun.NO,
                f"the app needs GPUs; the compute environments of job queue {name} ({names}) "
                f"launch no GPU instance type (instanceTypes: {', '.join(types) or 'none'})",
                calls=calls,
            )
    return Capacity(
        CanRun.YES,
        f"job queue {name} is ENABLED; its compute environments ({names}) allow {most} vCPUs "
        f"(maxvCpus), the app needs {vcpus:g}",
        calls=calls,
    )
