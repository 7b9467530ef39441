"""Watching 200 Slurm apps until they are done: how many squeue calls and how long.

Each of the 200 apps is watched the way a sensor or a trigger does it: its own ``describe``
call every poll interval. The shared controller snapshot (``squeue_ttl``) serves all of them,
so the squeue calls follow the wall time, not the number of apps. The numbers are printed and
kept in ``benchmark.extra_info``; nothing asserts on time.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pytest_benchmark.fixture import BenchmarkFixture

from anylaunch.schedulers.slurm_scheduler import create_scheduler
from anylaunch.specs import AppDef, AppState, Resource, Role
from tests.schedulers.slurm.cluster import SlurmCluster, slurm_cluster

__all__ = ["slurm_cluster"]

N_APPS = 200
POLL_S = 0.5
DEADLINE_S = 240.0  # a safety net


def watch_200(job_dir: Path) -> dict[str, float]:
    sched = create_scheduler("bench", squeue_ttl=2.0)
    query = sched.query
    app = AppDef("bench", [Role("w", image="", entrypoint="true", resource=Resource(1, 0, 64))])
    info = sched.submit_dryrun(app, {"job_dir": str(job_dir)})
    before = dict(query.calls)

    start = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(lambda _: sched.schedule(info), range(N_APPS)))
    submitted = time.monotonic()

    describes = 0
    pending = set(ids)
    states: dict[str, AppState] = {}
    while pending and time.monotonic() - start < DEADLINE_S:
        for app_id in sorted(pending):  # every watcher polls its own app
            desc = sched.describe(app_id)
            describes += 1
            if desc is not None and desc.state.is_terminal():
                states[app_id] = desc.state
                pending.discard(app_id)
        if pending:
            time.sleep(POLL_S)
    done = time.monotonic()
    assert not pending, f"{len(pending)} apps not done after {DEADLINE_S}s"
    assert set(states.values()) == {AppState.SUCCEEDED}

    # one describe_many over the 200 finished apps, from a scheduler with nothing cached
    fresh = create_scheduler("bench", squeue_ttl=5.0)
    many_before = fresh.query.calls["squeue"]
    assert all(d is not None for d in fresh.describe_many(ids).values())
    return {
        "apps": N_APPS,
        "describe_calls": describes,
        "squeue_calls": query.calls["squeue"] - before["squeue"],
        "sacct_calls": query.calls["sacct"] - before["sacct"],
        "submit_s": round(submitted - start, 2),
        "watch_until_done_s": round(done - submitted, 2),
        "total_s": round(done - start, 2),
        "describe_many_squeue_calls": fresh.query.calls["squeue"] - many_before,
    }


def test_watch_200_slurm_apps(
    benchmark: BenchmarkFixture, slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    result = benchmark.pedantic(watch_200, args=(tmp_path / "bench",), rounds=1, iterations=1)
    benchmark.extra_info.update(result)
    print("\nwatching 200 slurm apps:", result)
    # the point of the shared snapshot: far fewer squeue calls than describe calls
    assert result["squeue_calls"] * 10 < result["describe_calls"]
    assert result["describe_many_squeue_calls"] == 1
