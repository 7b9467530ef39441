"""A 1,000-index Slurm job array against 1,000 separate apps, each watched to the end.

Run it with ``bash scripts/bench.sh slurm-arrays`` (it is skipped otherwise: it keeps the
two-node cluster busy for minutes). Three sides run the same tiny program per index:

- ``array``: one array app, watched the way the Runner does it (one ``describe_many`` per poll);
- ``separate``: N apps, also watched through one ``describe_many`` per poll (one shared
  controller snapshot whatever the number of apps);
- ``per_app_watchers``: N apps, each watched by its own watcher, what a fan-out in an engine
  does today (N task instances, each waiting on its job like TorchX's Slurm scheduler, see
  ``tests/benchmarks/engine_scale/naive_slurm.py``): per app and per poll ``squeue -j ID``, and
  ``sacct -j ID`` once squeue forgot the job. Every poll round asks all still-running apps from
  a pool of ``WATCHER_THREADS`` threads (an engine's triggerer runs its watchers concurrently),
  then every watcher sleeps ``POLL_S``.

Measured per side: submissions (sbatch calls), slurmctld RPCs (the delta of ``sdiag``'s
per-type counters, split into the calls this process made, i.e. submissions and queries, and
those the nodes' daemons made for the jobs), slurmdbd RPCs (``sacctmgr show stats``: sacct's
queries land there, beside the controller's job records), squeue/sacct calls, the watcher's
CPU seconds (this process and the Slurm commands it ran) and wall time. Results go to
``.benchmarks/slurm_arrays.json``; nothing asserts on time. The counters are the cluster's: run
it while nothing else uses the cluster (``foreign_jobs``: jobs the controller started meanwhile
that were not the side's).
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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
SETTLE_S = 120.0  # at most this long for the nodes to finish a side's jobs before counting
WATCHER_THREADS = 8
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


def slurmdbd_rpcs() -> dict[str, int]:
    """slurmdbd's RPC counts by message type (``sacctmgr show stats``; its own call left out)."""
    cmd = ["sacctmgr", "show", "stats"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    section = out.split("Remote Procedure Call statistics by message type", 1)[-1]
    section = section.split("Remote Procedure Call statistics by user", 1)[0]
    found: dict[str, int] = {}
    for name, count in re.findall(r"^\s+(\S+)\s+\(\s*\d+\)\s+count:(\d+)", section, re.M):
        if name not in ("DBD_GET_STATS", "SLURM_PERSIST_INIT", "DBD_FINI"):
            found[name] = int(count)
    # every sacct/sacctmgr opens one connection (SLURM_PERSIST_INIT ... DBD_FINI): count sacct's
    # by its query (DBD_GET_JOBS_COND) instead, so this call's own connection stays out
    return found


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The counters that grew (sdiag and slurmdbd reset theirs at midnight: then it fails)."""
    if any(after.get(k, 0) < v for k, v in before.items()):
        raise AssertionError("the RPC counters were reset during the run: run it again")
    return {k: v - before.get(k, 0) for k, v in sorted(after.items()) if v > before.get(k, 0)}


def jobs_started() -> int:
    """sdiag's count of jobs (array tasks included) the controller started today."""
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"^Jobs started:\s+(\d+)", out, re.M)
    assert found, out[:500]
    return int(found.group(1))


def settle(ours: set[str]) -> None:
    """Waits (up to SETTLE_S) until no job of ``ours`` is pending, running or completing."""
    end = time.monotonic() + SETTLE_S
    while time.monotonic() < end:
        cmd = ["squeue", "-h", "-t", "PD,CF,R,CG", "-o", "%A"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        if not ours & set(out.split()):
            return
        time.sleep(1.0)


def cpu_s() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class PerAppCalls:
    """How many squeue/sacct commands the per-app watchers ran (thread-safe)."""

    def __init__(self) -> None:
        self.calls = {"squeue": 0, "sacct": 0}
        self._lock = threading.Lock()

    def add(self, command: str) -> None:
        with self._lock:
            self.calls[command] += 1


PER_APP = PerAppCalls()
#: Slurm's terminal job states (what the per-app watcher stops on)
TERMINAL = frozenset(
    [
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    ]
)


def measure(name: str, run: Callable[[], tuple[int, list[str]]]) -> dict[str, Any]:
    """Runs one side: ``run`` submits and watches, returning (submissions, app ids)."""
    query = create_scheduler("bench", squeue_ttl=POLL_S).query
    calls, own = dict(query.calls), dict(PER_APP.calls)
    rpcs, dbd, started = sdiag_rpcs(), slurmdbd_rpcs(), jobs_started()
    cpu, start = cpu_s(), time.monotonic()
    submissions, ids = run()
    wall, used = time.monotonic() - start, cpu_s() - cpu
    settle(set(ids))  # the nodes' last RPCs for these jobs belong to this side
    ctld, dbd = delta(rpcs, sdiag_rpcs()), delta(dbd, slurmdbd_rpcs())
    started = jobs_started() - started
    client = {k: v for k, v in ctld.items() if not NODE_RPCS.search(k)}
    return {
        "side": name,
        "apps": len(ids),
        "submissions": submissions,
        "slurmctld_rpcs": sum(ctld.values()),
        "slurmctld_rpcs_by_watcher": sum(client.values()),
        "slurmctld_rpcs_by_nodes": sum(ctld.values()) - sum(client.values()),
        "rpcs_by_type": ctld,
        "slurmdbd_rpcs": sum(dbd.values()),
        "slurmdbd_rpcs_by_type": dbd,
        **{
            f"{cmd}_calls": query.calls[cmd] - calls[cmd] + PER_APP.calls[cmd] - own[cmd]
            for cmd in ("squeue", "sacct")
        },
        "watcher_cpu_s": round(used, 2),
        "wall_s": round(wall, 1),
        "foreign_jobs": started - N,
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


def poll_one(job_id: str) -> bool:
    """One poll of one per-app watcher: ``squeue -j``, then ``sacct -j`` once squeue forgot it.

    Returns True once the job ended (naive_slurm.NaiveSlurmTrigger's and TorchX's describe).
    """
    PER_APP.add("squeue")
    cmd = ["squeue", "-h", "-j", job_id, "-o", "%T"]
    state = subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    # squeue shows no finished job (its default states) and errs "Invalid job id" once the
    # controller purged it: then ask accounting
    if not state:
        PER_APP.add("sacct")
        cmd = ["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"]
        state = subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    return (state.split() or [""])[0] in TERMINAL


def watch_each(ids: list[str]) -> None:
    """Every app has its own watcher; a round polls each running one, then they sleep POLL_S."""
    end = time.monotonic() + DEADLINE_S
    pending = list(ids)
    with ThreadPoolExecutor(WATCHER_THREADS) as pool:
        while pending:
            assert time.monotonic() < end, f"{len(pending)} apps still running"
            done = list(pool.map(poll_one, pending))
            pending = [a for a, ended in zip(pending, done, strict=True) if not ended]
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

    def per_app_side() -> tuple[int, list[str]]:
        sbatches[0] = 0
        info = sched.submit_dryrun(
            AppDef("bench-each", [role]), {"job_dir": str(tmp_path / "each")}
        )
        ids = [sched.schedule(info) for _ in range(N)]
        watch_each(ids)
        return sbatches[0], ids

    array = measure("array", array_side)
    separate = measure("separate", separate_side)
    per_app = measure("per_app_watchers", per_app_side)
    result: dict[str, Any] = {
        "n": N,
        "poll_s": POLL_S,
        "watcher_threads": WATCHER_THREADS,
        "array": array,
        "separate": separate,
        "per_app_watchers": per_app,
    }
    for other in (separate, per_app):  # how many times the array's cost each side pays
        result[f"ratios_{other['side']}_vs_array"] = {
            key: round(other[key] / max(array[key], 0.01), 1)
            for key in (
                "submissions",
                "slurmctld_rpcs",
                "slurmctld_rpcs_by_watcher",
                "slurmctld_rpcs_by_nodes",
                "slurmdbd_rpcs",
                "watcher_cpu_s",
                "wall_s",
            )
        }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print("\nslurm arrays:", json.dumps(result, indent=2))
    assert array["submissions"] == 1
    assert separate["submissions"] == N
    assert per_app["submissions"] == N
