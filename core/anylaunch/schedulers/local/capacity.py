"""What this host offers the ``local_cwd`` scheduler's replicas, for its capacity check.

Every replica of a ``local_cwd`` app runs on this host at the same time, so the replicas'
demands add up on the one :class:`~anylaunch.schedulers.common.capacity.Room` it is:

- CPUs: the ones this process may run on (``sched_getaffinity``, which a cgroup cpuset or
  ``taskset`` narrows; ``os.cpu_count()`` where it does not exist). CPUs are time-shared,
  so they are counted whole, not minus what other processes use now.
- memory: ``MemAvailable`` from ``/proc/meminfo``, the kernel's estimate of what new work
  can take now without swapping. ``MemTotal`` would call an app that fits an empty host a
  ``yes`` on a host whose memory is already in use, where it would be killed or swap.
- GPUs: the GPUs the scheduler would hand out (``$CUDA_VISIBLE_DEVICES``, else
  ``nvidia-smi -L``), asked only when a replica wants GPUs (nvidia-smi can be slow).
"""

from __future__ import annotations

import os
import shutil
import socket

from anylaunch.schedulers.common.capacity import Capacity, Room, demands, fit
from anylaunch.schedulers.local.request import _visible_gpus
from anylaunch.specs.api import AppDef

__all__ = ["host_cpus", "host_room", "local_capacity", "mem_available_mb"]

MEMINFO = "/proc/meminfo"


def host_cpus() -> int:
    """The CPUs this process (and so every replica it starts) may run on.

    >>> host_cpus() >= 1
    True
    """
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return len(affinity(0))
    return os.cpu_count() or 1


def mem_available_mb(path: str = MEMINFO) -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in MB (None where there is no such file)."""
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key == "MemAvailable":
                    return int(value.split()[0]) // 1024  # the kernel says kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def host_room(gpus_wanted: bool) -> tuple[Room | None, int]:
    """This host as one room, and the reads it took (``/proc/meminfo``, ``nvidia-smi``);
    None when the host's memory cannot be read (not Linux)."""
    reads = 1
    mem = mem_available_mb()
    if mem is None:
        return None, reads
    gpus = 0
    if gpus_wanted:
        if "CUDA_VISIBLE_DEVICES" not in os.environ and shutil.which("nvidia-smi"):
            reads += 1  # _visible_gpus runs nvidia-smi -L
        gpus = len(_visible_gpus())
    return Room(socket.gethostname() or "localhost", host_cpus(), mem, gpus), reads


def local_capacity(app: AppDef) -> Capacity:
    """Whether every replica of ``app`` fits this host at once (they all run here)."""
    needs = demands(app)
    room, reads = host_room(any(need.gpu > 0 for need in needs))
    if room is None:
        return Capacity.unknown(f"{MEMINFO} cannot be read: this host's memory is unknown", reads)
    return fit(needs, [room], calls=reads)
