"""Why an app failed, in a small stable set of categories every engine can act on.

A scheduler reports what its backend says (an exit code, ``OOMKilled``, an eviction, an image
that cannot be pulled, a request no node can take) in the status message and structured
error; :func:`failure_category` reads one category out of it. The categories are stable
names, shown in each engine's failure metadata, and :func:`retryable` is the one rule behind
the engines' "retry only infrastructure failures" option.

========================  ==================================================================
category                  meaning
========================  ==================================================================
``application``           the app's own code failed (a non-zero exit code)
``out_of_memory``         a replica was killed for exceeding its memory limit
``infrastructure``        the platform lost a replica: node lost, preemption, eviction,
                          a killed container or a supervisor that died
``startup``               the app could not start: an image that cannot be pulled, a request
                          no node can take, a startup timeout
``cancelled``             someone cancelled it
========================  ==================================================================

>>> from anylaunch.specs.api import AppState, AppStatus
>>> failure_category(AppStatus(AppState.FAILED, msg="w/0 exited 3",
...                            structured_error_msg='{"exit_code": 3}'))
<FailureCategory.APPLICATION: 'application'>
>>> failure_category(AppStatus(AppState.FAILED, msg="w/0: OOMKilled (exit code 137)"))
<FailureCategory.OUT_OF_MEMORY: 'out_of_memory'>
>>> failure_category(AppStatus(AppState.SUCCEEDED)) is None
True
"""

from __future__ import annotations

import enum
import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from anylaunch.runner.watch import Decision
    from anylaunch.specs.api import AppStatus

__all__ = ["FailureCategory", "decision_category", "failure_category", "retryable"]


class FailureCategory(str, enum.Enum):
    """The stable failure categories (their values appear in engines' metadata)."""

    APPLICATION = "application"
    OUT_OF_MEMORY = "out_of_memory"
    INFRASTRUCTURE = "infrastructure"
    STARTUP = "startup"
    CANCELLED = "cancelled"


# Evidence in a backend's words, most specific first. Matched case-insensitively against the
# status message and the structured error.
_EVIDENCE: tuple[tuple[FailureCategory, re.Pattern[str]], ...] = (
    # the kubelet refusing a pod the node has no room for (reason OutOfmemory / OutOfcpu):
    # a start that failed, not a replica that ran out of memory
    (FailureCategory.STARTUP, re.compile(r"node didn't have enough resource")),
    (FailureCategory.OUT_OF_MEMORY, re.compile(r"oom[\s_-]?kill|out of memory|outofmemory")),
    (
        FailureCategory.STARTUP,
        re.compile(
            r"imagepullbackoff|errimagepull|errimageneverpull|invalidimagename|"
            r"pull access denied|manifest unknown|no such image|unschedulable|"
            r"insufficient (cpu|memory|nvidia)|didn't match|startup timeout|did not start|"
            r"createcontainer(config)?error"
        ),
    ),
    (
        FailureCategory.INFRASTRUCTURE,
        re.compile(
            r"node ?lost|nodelost|node_fail|preempt|evict|spot interruption|"
            r"host terminated|supervisor (died|is gone)|killed by (the )?(platform|system)|"
            r"container was killed|deleted underneath|lost contact|"
            # Kubernetes >= 1.26 marks a pod the platform ends (preemption, taint manager,
            # eviction, pod GC, kubelet) with the DisruptionTarget condition
            r"disruptiontarget|node shutdown|deleted while it ran|"
            # AWS Batch / ECS: the instance went away (spot reclaim included); Fargate Spot
            r"host ec2 \(instance [^)]*\) (terminated|stopped)|spot task was interrupted"
        ),
    ),
)


def _structured(status: AppStatus) -> dict[str, object]:
    text = status.structured_error_msg
    if not text or text == "<NONE>":
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def failure_category(status: AppStatus | None) -> FailureCategory | None:
    """The category of a FAILED or CANCELLED app (None for any other state).

    A scheduler that knows better sets ``"category"`` in its structured error; otherwise the
    backend's words decide, and a failure with no other evidence is the application's.
    """
    from anylaunch.specs.api import AppState

    if status is None or status.state not in (AppState.FAILED, AppState.CANCELLED):
        return None
    if status.state == AppState.CANCELLED:
        return FailureCategory.CANCELLED
    data = _structured(status)
    declared = data.get("category")
    if isinstance(declared, str) and declared in FailureCategory._value2member_map_:
        return FailureCategory(declared)
    evidence = f"{status.msg}\n{status.structured_error_msg}".lower()
    for category, pattern in _EVIDENCE:
        if pattern.search(evidence):
            return category
    return FailureCategory.APPLICATION


def retryable(category: FailureCategory | None) -> bool:
    """True for the failures that retrying can fix without changing the app: a lost
    replica or a start that failed on the platform's side.

    >>> retryable(FailureCategory.INFRASTRUCTURE), retryable(FailureCategory.APPLICATION)
    (True, False)
    """
    return category in (FailureCategory.INFRASTRUCTURE, FailureCategory.STARTUP)


def decision_category(decision: Decision) -> FailureCategory | None:
    """The category of a watch that ended (None for an app that succeeded or still runs): a
    terminal app's own category, ``startup`` for a startup timeout, ``application`` for a run
    timeout (the app ran too long), ``infrastructure`` for a lost app.

    >>> from anylaunch.runner.watch import StartupTimedOut
    >>> from anylaunch.specs.api import AppState, AppStatus
    >>> decision_category(StartupTimedOut(AppStatus(AppState.PENDING), cancel=True))
    <FailureCategory.STARTUP: 'startup'>
    """
    from anylaunch.runner.watch import Done, Lost, RunTimedOut, StartupTimedOut

    if isinstance(decision, Done):
        return None if decision.succeeded else failure_category(decision.status)
    if isinstance(decision, StartupTimedOut):
        return FailureCategory.STARTUP
    if isinstance(decision, RunTimedOut):
        return FailureCategory.APPLICATION
    if isinstance(decision, Lost):
        return FailureCategory.INFRASTRUCTURE
    return None
