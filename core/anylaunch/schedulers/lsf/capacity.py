"""Whether LSF has the job slots an app needs free now, from one ``bhosts -w``.

``bhosts -w`` (every LSF version, and OpenLava) prints one row per host::

    HOST_NAME          STATUS         JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV
    hostA              ok                -      8      3      3      0      0      0
    hostB              closed_Adm        -      8      0      0      0      0      0

A host takes new jobs when its status is ``ok``; its free slots are ``MAX`` (``-``: no
limit) minus the slots in use (``NJOBS``, or RUN + SSUSP + USUSP + RSV if more), at most
``JL/U`` (the per-user limit) where one is set. Each replica is one job of ``-n cpu`` slots on
one host (``span[hosts=1]``), so the replicas are placed on the hosts' free slots by the shared
first-fit rule. ``bhosts -w`` shows no memory or GPUs: memory is not checked, and an app that
wants GPUs gets ``unknown`` when its slots fit (``no`` when they do not).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from anylaunch.schedulers.common.capacity import CanRun, Capacity, Demand, Room, demands, fit
from anylaunch.specs.api import AppDef

__all__ = ["BHOSTS_ARGS", "LsfHost", "lsf_capacity", "parse_bhosts", "replica_slots"]

#: The command's arguments (after ``bhosts``): wide rows, statuses with their closed reason.
BHOSTS_ARGS = ("-w",)
_ROW = re.compile(
    r"^(?P<host>\S+)\s+(?P<status>\S+)\s+(?P<jlu>-|\d+)\s+(?P<max>-|\d+)\s+(?P<njobs>\d+)\s+"
    r"(?P<run>\d+)\s+(?P<ssusp>\d+)\s+(?P<ususp>\d+)\s+(?P<rsv>\d+)\s*$"
)


@dataclass(frozen=True)
class LsfHost:
    """One row of ``bhosts -w``."""

    name: str
    status: str
    free: float
    """Slots free for new jobs (``math.inf``: the host has no slot limit)."""


def parse_bhosts(text: str) -> tuple[list[LsfHost], list[str]]:
    """The hosts of ``bhosts -w`` output, and the rows that are not a host's (e.g. a
    condensed host group's, whose status carries host counts).

    >>> out = '''HOST_NAME          STATUS         JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV
    ... hostA              ok                -      8      3      3      0      0      0
    ... hostB              closed_Full       2      4      4      4      0      0      0
    ... hostC              ok                -      -      1      1      0      0      0'''
    >>> hosts, other = parse_bhosts(out)
    >>> [(h.name, h.status, h.free) for h in hosts], other
    ([('hostA', 'ok', 5), ('hostB', 'closed_Full', 0), ('hostC', 'ok', inf)], [])
    """
    hosts: list[LsfHost] = []
    other: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("HOST_NAME"):
            continue
        row = _ROW.match(line)
        if row is None:
            other.append(line.strip())
            continue
        used = max(int(row["njobs"]), sum(int(row[k]) for k in ("run", "ssusp", "ususp", "rsv")))
        free: float = math.inf if row["max"] == "-" else max(int(row["max"]) - used, 0)
        if row["jlu"] != "-":  # this user's share of the host (its own jobs there unknown)
            free = min(free, int(row["jlu"]))
        hosts.append(LsfHost(row["host"], row["status"], free))
    return hosts, other


def replica_slots(cpu: float) -> int:
    """The slots one replica's job takes: ``-n cpu``, one without a CPU request.

    >>> replica_slots(4), replica_slots(0)
    (4, 1)
    """
    return math.ceil(cpu) if cpu > 0 else 1


def lsf_capacity(app: AppDef, hosts: Sequence[LsfHost], other: Sequence[str]) -> Capacity:
    """Whether every replica's job finds its slots free on one open host.

    >>> from anylaunch.specs import Resource, Role
    >>> app = AppDef("a", [Role("w", "", num_replicas=2, resource=Resource(4, 0, 512))])
    >>> lsf_capacity(app, [LsfHost("h1", "ok", 6), LsfHost("h2", "ok", 4)], []).can_run
    <CanRun.YES: 'yes'>
    >>> print(lsf_capacity(app, [LsfHost("h1", "ok", 6)], []).reason)
    replica w/1 needs 4 CPU, 0 MB, 0 GPU; the most free on one host (h1) after placing 1 other replica(s) is 2 CPU, 0 MB, 0 GPU (CPU: LSF job slots, free on hosts whose bhosts status is ok; memory is not checked)
    """
    wanted = demands(app)
    needs = [Demand(d.name, replica_slots(d.cpu), 0, 0) for d in wanted]
    # a full host is open too: it has 0 slots free, which says more than leaving it out
    rooms = [Room(h.name, h.free, 0, 0) for h in hosts if h.status in ("ok", "closed_Full")]
    if not rooms:
        shown = ", ".join(f"{h.name} {h.status}" for h in hosts) or "no host"
        answer = Capacity(CanRun.NO, f"no LSF host takes jobs now (bhosts -w: {shown})", calls=1)
    else:
        answer = fit(needs, rooms, calls=1)
        answer = Capacity(
            answer.can_run,
            f"{answer.reason} (CPU: LSF job slots, free on hosts whose bhosts status is ok;"
            " memory is not checked)",
            calls=1,
        )
    if answer.can_run == CanRun.NO and other:
        return Capacity.unknown(
            f"{answer.reason}; but bhosts -w also printed rows this check cannot read "
            f"(condensed host groups?): {'; '.join(other)[:300]}",
            1,
        )
    if answer.can_run == CanRun.YES and any(d.gpu > 0 for d in wanted):
        return Capacity.unknown(f"{answer.reason}; bhosts -w does not show GPUs", 1)
    return answer
