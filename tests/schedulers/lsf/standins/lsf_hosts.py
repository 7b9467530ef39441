"""Stand-in ``bhosts`` (LSF 10.1 / OpenLava contract) for the lsf tests.

``bhosts [-w] [host_name ...]`` prints one row per host of ``cluster.json``'s ``hosts``,
sorted by name, in LSF's fixed columns (OpenLava's ``prtHostsShort``: ``%-18s`` host,
``%-14s`` status under ``-w`` (``%-11s`` without), ``%5s`` JL/U, ``%6s`` MAX, ``%6d`` for
NJOBS, RUN, SSUSP, USUSP and RSV, a header whose every word is followed by a space)::

    HOST_NAME          STATUS          JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV
    hostA              ok                 -      8      2      2      0      0      0

The slots in use are those of the stand-in's started jobs on the host (every job runs on the
first host, see ``run_job``; a job takes its ``-n`` slots): RUN, SSUSP and USUSP by the
state bjobs shows, NJOBS their sum plus UNKWN/ZOMBI jobs' slots (still held). A host's
``max_slots`` (MXJ, default its ``ncpus``; ``null``: no limit, shown ``-``), ``jl_u`` (per-user
limit, default none) and ``status`` (forced, e.g. ``closed_Adm``, ``unavail``) come from its
``cluster.json`` entry. Status ``ok``, or ``closed_Full`` once NJOBS reaches MAX; without
``-w`` every ``closed_*`` shows as ``closed``. The stand-in does not hold a job back for slots
(it dispatches by its own rules), so NJOBS may pass MAX under load, as it never does in LSF.

Unknown options (including ``-l``, ``-o``, ``-R``, which the stand-in does not implement) and
unknown host names are rejected on stderr with exit 255.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # run by lsf_standin.main, which is loaded by then (see the executables)
    from lsf_standin import State

_HELD = ("UNKWN", "ZOMBI")


def _usage() -> str:
    return "Usage: bhosts [-h] [-V] [-w] [host_name ...]"


def _row(
    host: dict[str, Any],
    jobs: list[dict[str, Any]],
    wide: bool,
    shown_stat: Callable[[dict[str, Any]], str],
) -> str:
    counts = {"RUN": 0, "SSUSP": 0, "USUSP": 0, "held": 0}
    for job in jobs:
        stat = shown_stat(job)
        hosts = str(job.get("exec_host") or "").split(":")
        if job.get("start_time") is None or host["name"] not in hosts:
            continue
        slots = hosts.count(host["name"])
        if stat in counts:
            counts[stat] += slots
        elif stat in _HELD:
            counts["held"] += slots
    njobs = counts["RUN"] + counts["SSUSP"] + counts["USUSP"] + counts["held"]
    max_slots = host.get("max_slots", host["ncpus"])
    status = host.get("status") or (
        "closed_Full" if max_slots is not None and njobs >= int(max_slots) else "ok"
    )
    if not wide and status.startswith("closed"):
        status = "closed"
    jl_u = host.get("jl_u")
    name = f"{host['name']:<18} " if wide else f"{host['name'][:18]:<18} "
    return (
        name
        + (f"{status:<14} " if wide else f"{status:<11} ")
        + (f"{int(jl_u):>5} " if jl_u is not None else f"{'-':>5} ")
        + (f"{int(max_slots):>6} " if max_slots is not None else f"{'-':>6} ")
        + f"{njobs:>6} {counts['RUN']:>6} {counts['SSUSP']:>6} {counts['USUSP']:>6} {0:>6}"
    )


def bhosts(state: State, argv: list[str]) -> int:
    from lsf_standin import LsfError, shown_stat

    wide = False
    names: list[str] = []
    for arg in argv:
        if arg == "-w":
            wide = True
        elif arg in ("-h", "-help"):
            raise LsfError(_usage())
        elif arg == "-V":
            print("IBM Spectrum LSF 10.1.0.0 (anylaunch stand-in)", file=sys.stderr)
            return 0
        elif arg.startswith("-"):
            raise LsfError(f"bhosts: illegal option -- {arg.lstrip('-')}\n{_usage()}")
        else:
            names.append(arg)
    hosts = sorted(state.config["hosts"], key=lambda h: str(h["name"]))
    for name in names:
        if name not in {h["name"] for h in hosts}:
            raise LsfError(f"{name}: Bad host name, host group name or cluster name")
    if names:
        hosts = [h for h in hosts if h["name"] in names]
    jobs = state.all_jobs()
    header = ["HOST_NAME".ljust(18), "STATUS".ljust(14 if wide else 11), "JL/U".rjust(5)]
    header += [word.rjust(6) for word in ("MAX", "NJOBS", "RUN", "SSUSP", "USUSP", "RSV")]
    print(" ".join(header) + " ")
    for host in hosts:
        print(_row(host, jobs, wide, shown_stat))
    return 0
