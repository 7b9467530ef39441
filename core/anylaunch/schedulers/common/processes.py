"""Identifying a process by its pid AND start time, so that a recycled pid is never mistaken
for the process that had it (local_cwd's supervisors and replicas, local_docker's array
runner). Only the standard library: the local_cwd supervisor imports it.
"""

from __future__ import annotations

import os

__all__ = ["is_alive", "process_start_time"]


def process_start_time(pid: int) -> str | None:
    """Returns an opaque start-time token of a live process, or None if it is gone or a zombie.

    Together with the pid it identifies a process: a recycled pid has another start time.

    >>> process_start_time(os.getpid()) == process_start_time(os.getpid()) is not None
    True
    """
    if pid <= 0:
        return None
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:  # no procfs (macOS, BSD): ask ps
        return _ps_start_time(pid)
    try:
        stat = os.read(fd, 4096)  # (procfs hands out the whole line in one read)
    except ProcessLookupError:
        return None  # it exited between the open and the read
    finally:
        os.close(fd)
    if not stat:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after the last ")"
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):  # a zombie has finished running
        return None
    return fields[19].decode()  # field 22: start time in clock ticks since boot


def _ps_start_time(pid: int) -> str | None:
    import subprocess  # only without procfs (it would slow the fork-server's children down)

    try:
        out = subprocess.run(
            ["ps", "-o", "stat=,lstart=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if not out or out.startswith("Z"):
        return None
    return out.split(None, 1)[1] if " " in out else out


def is_alive(pid: int | None, start_time: str | None) -> bool:
    """True if the process ``pid`` runs and is the one that started at ``start_time``.

    >>> is_alive(os.getpid(), process_start_time(os.getpid())), is_alive(os.getpid(), "0")
    (True, False)
    """
    if not pid:
        return False
    current = process_start_time(pid)
    return current is not None and (start_time is None or current == start_time)
