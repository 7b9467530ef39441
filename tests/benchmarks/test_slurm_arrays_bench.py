"""A 1,000-index Slurm job array against 1,000 separate apps, each watched to the end.

Run it with ``bash scripts/bench.sh slurm-arrays`` (it is skipped otherwise: it keeps the
two-node cluster busy for minutes). Both sides run the same tiny program per index and are
watched the way the Runner does it (one ``describe_many`` per poll, which costs one shared
controller snapshot whatever the number of apps). Measured per side: submissions (sbatch
calls), slurmctld RPCs (the delta of ``sdiag``'s per-type counters, split into the calls this
process made, i.e. submissions and queries, and those the nodes' daemons made for the jobs),
squeue/sacct calls, the watcher's CPU seconds (this process and the Slurm commands it ran) and
wall time. Results go to ``.benchmarks/slurm_arrays.json``; nothing asserts on time.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import anylaunch.schedulers.slurm.scheduler as slurm_scheduler
from anylaunch.schedulers.slurm_scheduler import create_scheduler
from anylaunch.specs import AppDef, ArraySpec, Resource, Role
from tests.schedulers.slurm.cluster import SlurmCluster, slurm_cluster

__all__ = ["slurm_cluster"]

N = int(os.environ.get("ANYLAUNCH_SLURM_ARRAYS_N", "1000"))
POLL_S = 1.0
DEADLINE_S = 3600.0  # a safety net
RESULTS = Path(__file__).resolve().parents[2] / ".benchmarks" / "slurm_arrays.json"
#: RPCs the nodes send for every job (slurmd, and srun inside the batch script)
NODE_RPCS = re.compile(
    r"COMPLETE_BATCH_SCRIPT|COMPLETE_PROLOG|EPILOG_COMPLETE|NODE_REGISTRATION|STEP_COMPLETE|"
    r"COMPLETE_JOB_ALLOCATION|JOB_STEP_CREATE|STEP_LAYOUT|ALLOC_INFO|JOB_SBCAST"
)

pytestmark = pytest.mark.skipif(
    os.environ.get("ANYLAUNCH_SLURM_ARRAYS_BENCH") != "1",
    reason="run with `bash scripts/bench.sh slurm-arrays` (minutes of cluster time)",
)


def sdiag_rpcs() -> dict[str, int]:
    """slurmctld's RPC counts by message type (``sdiag``; its own call is left out)."""
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    found: dict[str, int] = {}
    section = out.split("Remote Procedure Call statistics by message type", 1)[-1]
    section = section.split("Remote Procedure Call statistics by user", 1)[0]
    for name, count in re.findall(r"^\s+(\S+)\s+\(\s*\d+\)\s+count:(\d+)", section, re.M):
        if name != "REQUEST_STATS_INFO":
            found[name] = int(count)
    return found


def cpu_s() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def measure(name: str, run: Callable[[], tuple[int, list[str]]]) -> dict[str, Any]:
    """Runs one side: ``run`` submits and watches, returning (submissions, app ids)."""
    query = create_scheduler("bench", squeue_ttl=POLL_S).query
    calls = dict(query.calls)
    rpcs = sdiag_rpcs()
    cpu, start = cpu_s(), time.monotonic()
    submissions, ids = run()
    wall, used = time.monotonic() - start, cpu_s() - cpu
    after = sdiag_rpcs()
    delta = {k: v - rpcs.get(k, 0) for k, v in after.items() if v - rpcs.get(k, 0) > 0}
    if any(v < 0 for v in delta.values()):  # sdiag resets its counters at midnight
        raise AssertionError("sdiag's counters were reset during the run: run it again")
    client = {k: v for k, v in delta.items() if not NODE_RPCS.search(k)}
    return {
        "side": name,
        "apps": len(ids),
        "submissions": submissions,
        "slurmctld_rpcs": sum(delta.values()),
        "slurmctld_rpcs_by_watcher": sum(client.values()),
        "slurmctld_rpcs_by_nodes": sum(delta.values()) - sum(client.values()),
        "rpcs_by_type": dict(sorted(delta.items())),
        "squeue_calls": query.calls["squeue"] - calls["squeue"],
        "sacct_calls": query.calls["sacct"] - calls["sacct"],
        "watcher_cpu_s": round(used, 2),
        "wall_s": round(wall, 1),
    }


def watch(sched: Any, ids: list[str]) -> None:
    """Polls ``describe_many`` until every app ended (what Runner.wait/status_many do)."""
    end = time.monotonic() + DEADLINE_S
    pending = list(ids)
    while pending:
        assert time.monotonic() < end, f"{len(pending)} apps still running"
        found = sched.describe_many(pending)
        pending = [a for a, d in found.items() if d is None or not d.state.is_terminal()]
        if pending:
            time.sleep(POLL_S)


def test_array_vs_separate_apps(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sbatches = [0]
    real_run = slurm_scheduler.run_slurm

    def counting(cmd: Any, timeout: float, stdin: str | None = None) -> str:
        sbatches[0] += cmd[0] == "sbatch"
        return real_run(cmd, timeout, stdin)

    monkeypatch.setattr(slurm_scheduler, "run_slurm", counting)
    role = Role("w", image="", entrypoint="sleep", args=["0.1"], resource=Resource(1, 0, 64))
    sched = create_scheduler("bench", squeue_ttl=POLL_S)

    def array_side() -> tuple[int, list[str]]:
        sbatches[0] = 0
        app = AppDef("bench-array", [role], array=ArraySpec(N))
        app_id = sched.submit(app, {"job_dir": str(tmp_path / "array")})
        watch(sched, [app_id])
        desc = sched.describe(app_id)
        assert desc is not None and desc.array is not None
        assert desc.array.counts() == {"SUCCEEDED": N}, desc.array.to_dict()
        return sbatches[0], [app_id]

    def separate_side() -> tuple[int, list[str]]:
        sbatches[0] = 0
        info = sched.submit_dryrun(AppDef("bench-one", [role]), {"job_dir": str(tmp_path / "one")})
        ids = [sched.schedule(info) for _ in range(N)]
        watch(sched, ids)
        return sbatches[0], ids

    array = measure("array", array_side)
    separate = measure("separate", separate_side)
    result = {
        "n": N,
        "poll_s": POLL_S,
        "array": array,
        "separate": separate,
        "ratio_rpcs": round(separate["slurmctld_rpcs"] / max(array["slurmctld_rpcs"], 1), 1),
        "ratio_rpcs_by_watcher": round(
            separate["slurmctld_rpcs_by_watcher"] / max(array["slurmctld_rpcs_by_watcher"], 1), 1
        ),
        "ratio_submissions": separate["submissions"] / max(array["submissions"], 1),
        "ratio_watcher_cpu": round(
            separate["watcher_cpu_s"] / max(array["watcher_cpu_s"], 0.01), 1
        ),
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print("\nslurm arrays:", json.dumps(result, indent=2))
    assert array["submissions"] == 1
    assert separate["submissions"] == N
