"""Whether a backend can run an app now: the :class:`Capacity` answer every scheduler's
``check_capacity`` gives, and the fit rule the host- and node-based backends share.

A capacity check reads the backend and changes nothing on it. Its answer is one of three:
``yes`` (the app's replicas fit what the backend has free now, or the backend says it would
start them), ``no`` (they do not fit what is free now, or the backend refuses the request:
placement moves on), ``unknown`` (the backend gives no honest signal, or it could not be
asked: placement tries it).

>>> need = [Demand("trainer/0", cpu=3, mem_mb=1024, gpu=0)]
>>> fit(need, [Room("node1", cpu=2, mem_mb=8192, gpu=0)]).can_run
<CanRun.NO: 'no'>
>>> fit(need, [Room("node1", cpu=4, mem_mb=8192, gpu=0)]).can_run
<CanRun.YES: 'yes'>
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from anylaunch.specs.api import AppDef

__all__ = ["CanRun", "Capacity", "Demand", "Room", "demands", "fit"]


class CanRun(str, enum.Enum):
    """The three answers of a capacity check (their values are stable: docs, CLI, metadata)."""

    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Capacity:
    """A backend's answer to "can this app run now?".

    Args:
        can_run: yes / no / unknown
        reason: why, in the backend's terms (shown in logs and the placement history)
        expected_start: when the backend expects to start it, where it says (Slurm)
        calls: how many backend calls the check made
    """

    can_run: CanRun
    reason: str
    expected_start: datetime | None = None
    calls: int = 0

    @classmethod
    def unknown(cls, reason: str, calls: int = 0) -> Capacity:
        """An answer without a signal: placement tries the target anyway."""
        return cls(CanRun.UNKNOWN, reason, None, calls)

    def __str__(self) -> str:
        start = (
            f" (expected start {self.expected_start.isoformat()})" if self.expected_start else ""
        )
        return f"{self.can_run.value}: {self.reason}{start}"


@dataclass(frozen=True)
class Demand:
    """What one replica asks for (``-1`` fields of a null resource count as 0)."""

    name: str
    cpu: float
    mem_mb: int
    gpu: int


@dataclass(frozen=True)
class Room:
    """What one host or node has free for new work."""

    name: str
    cpu: float
    mem_mb: int
    gpu: int


def demands(app: AppDef) -> list[Demand]:
    """Every replica's demand, one per replica (an array's indices share one replica's).

    >>> from anylaunch.specs import AppDef, Resource, Role
    >>> demands(AppDef("a", [Role("w", "i", num_replicas=2, resource=Resource(2, 0, 512))]))
    [Demand(name='w/0', cpu=2, mem_mb=512, gpu=0), Demand(name='w/1', cpu=2, mem_mb=512, gpu=0)]
    """
    found = []
    for role in app.roles:
        res = role.resource
        for k in range(role.num_replicas):
            found.append(
                Demand(f"{role.name}/{k}", max(res.cpu, 0), max(res.memMB, 0), max(res.gpu, 0))
            )
    return found


def _fits(need: Demand, room: Room) -> bool:
    return need.cpu <= room.cpu and need.mem_mb <= room.mem_mb and need.gpu <= room.gpu


def _short(need: Demand) -> str:
    return f"{need.cpu:g} CPU, {need.mem_mb} MB, {need.gpu} GPU"


def fit(needs: Sequence[Demand], rooms: Sequence[Room], *, calls: int = 0) -> Capacity:
    """Places the replicas on the rooms, largest first, each on the first room it fits
    (first-fit decreasing: a replica that fits nowhere on an empty backend is a ``no``).

    ``yes`` when every replica fits what the rooms have free; ``no`` naming the first replica
    that does not, with the most any one room has free.
    """
    if not rooms:
        return Capacity(CanRun.NO, "no host or node can take work", calls=calls)
    free = {room.name: room for room in rooms}
    for placed, need in enumerate(
        sorted(needs, key=lambda d: (d.gpu, d.cpu, d.mem_mb), reverse=True)
    ):
        host = next((r for r in free.values() if _fits(need, r)), None)
        if host is None:
            # what is left once the replicas placed before it took their share
            biggest = max(free.values(), key=lambda r: (r.gpu, r.cpu, r.mem_mb))
            after = f" after placing {placed} other replica(s)" if placed else ""
            return Capacity(
                CanRun.NO,
                f"replica {need.name} needs {_short(need)}; the most free on one host"
                f" ({biggest.name}){after} is {biggest.cpu:g} CPU, {biggest.mem_mb} MB,"
                f" {biggest.gpu} GPU",
                calls=calls,
            )
        free[host.name] = Room(
            host.name, host.cpu - need.cpu, host.mem_mb - need.mem_mb, host.gpu - need.gpu
        )
    hosts = ", ".join(sorted(r.name for r in rooms))
    return Capacity(CanRun.YES, f"{len(needs)} replica(s) fit on {hosts}", calls=calls)
