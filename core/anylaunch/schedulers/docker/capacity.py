"""What a Docker engine offers the ``local_docker`` scheduler's containers, from one
``docker info`` (``GET /info``): its CPUs (``NCPU``) and memory (``MemTotal``).

Every container of an app runs on the engine's one host at the same time, so the replicas'
demands add up on one :class:`~anylaunch.schedulers.common.capacity.Room`. A container asking
more CPUs than ``NCPU`` is refused by the engine itself ("range of CPUs is from 0.01 to N");
memory limits are caps the engine does not reserve, so ``MemTotal`` is what the host has.

GPUs: the engine reports them only as CDI devices (``DiscoveredDevices``, newer engines with
CDI enabled, e.g. ``nvidia.com/gpu=0``). Without them an app that wants GPUs gets ``unknown``
when its CPUs and memory fit (the engine cannot say whether the GPUs exist), ``no`` when they
do not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from anylaunch.schedulers.common.capacity import CanRun, Capacity, Room, demands, fit
from anylaunch.specs.api import AppDef

__all__ = ["docker_capacity", "engine_gpus"]

_GPU_INDEX = re.compile(r"^[\w.-]+/gpu=\d+$")
_GPU_UUID = re.compile(r"^[\w.-]+/gpu=GPU-[\w-]+$")


def engine_gpus(info: Mapping[str, Any]) -> int | None:
    """The GPUs the engine lists as CDI devices (None: it lists no GPU, so it cannot say).

    >>> engine_gpus({"DiscoveredDevices": [{"Source": "cdi", "ID": "nvidia.com/gpu=0"},
    ...     {"Source": "cdi", "ID": "nvidia.com/gpu=1"}, {"Source": "cdi", "ID": "nvidia.com/gpu=all"}]})
    2
    >>> engine_gpus({"NCPU": 2}) is None
    True
    """
    ids = [
        str(d.get("ID", ""))
        for d in info.get("DiscoveredDevices") or []
        if isinstance(d, Mapping) and d.get("Source") == "cdi"
    ]
    # one GPU may be listed by index and by UUID: count one naming scheme
    for pattern in (_GPU_INDEX, _GPU_UUID):
        found = {i for i in ids if pattern.match(i)}
        if found:
            return len(found)
    return None


def docker_capacity(app: AppDef, info: Mapping[str, Any], calls: int) -> Capacity:
    """Whether every container of ``app`` fits the engine's host at once (``info`` is the
    engine's ``GET /info``; ``calls`` the engine calls the check made).

    >>> from anylaunch.specs import Resource, Role
    >>> info = {"Name": "h", "NCPU": 2, "MemTotal": 8 << 30}
    >>> app = AppDef("a", [Role("w", "busybox", num_replicas=2, resource=Resource(1, 0, 512))])
    >>> docker_capacity(app, info, 1).can_run
    <CanRun.YES: 'yes'>
    """
    ncpu, mem_total = info.get("NCPU"), info.get("MemTotal")
    if not isinstance(ncpu, int) or not isinstance(mem_total, int):
        return Capacity.unknown("the engine's info has no NCPU or MemTotal", calls)
    needs = demands(app)
    gpus = engine_gpus(info)
    wanted = any(need.gpu > 0 for need in needs)
    name = str(info.get("Name") or "docker")
    room = Room(name, ncpu, mem_total >> 20, gpus if gpus is not None else 0)
    if not wanted or gpus is not None:
        return fit(needs, [room], calls=calls)
    # GPUs the engine does not report: CPUs and memory can still say no
    without = [replace(need, gpu=0) for need in needs]
    answer = fit(without, [room], calls=calls)
    if answer.can_run == CanRun.NO:
        return answer
    runtimes = ", ".join(sorted(info.get("Runtimes") or {}))
    return Capacity.unknown(
        f"CPUs and memory fit on {name}, but the engine does not report its GPUs (no CDI GPU "
        f"devices in docker info; runtimes: {runtimes or 'none'})",
        calls,
    )
