"""Job arrays on the real Slurm cluster (issue 28): one ``sbatch --array``, per-index
status from the one squeue/sacct query, per-index logs, a native retry (``--array=7``)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import anylaunch.schedulers.slurm.scheduler as slurm_scheduler
from anylaunch.runner import get_runner
from anylaunch.schedulers.slurm.query import parse_sacct
from anylaunch.schedulers.slurm_scheduler import SlurmScheduler, create_scheduler
from anylaunch.specs import AppDef, AppState, Resource, Role, sweep
from tests.schedulers.arrays_kit import (
    FAILING_INDEX,
    PARALLELISM,
    SIZE,
    check_failed_array,
    check_retried,
    failing_array_app,
)
from tests.schedulers.slurm.cluster import SlurmCluster, wait_done, wait_until

SMALL = Resource(cpu=1, gpu=0, memMB=64)


@pytest.fixture
def sched(slurm_cluster: SlurmCluster) -> Iterator[SlurmScheduler]:
    scheduler = create_scheduler("test", squeue_ttl=0.5)
    yield scheduler
    scheduler.close()


def _sacct_tasks(array_id: str, count: int) -> list[tuple[str, datetime, datetime]]:
    """(JobID, Start, End) of each task of the array, once accounting has ``count`` ended."""
    found: Any = wait_until(
        lambda: (lambda t: t if len(t) >= count else None)(_sacct_ended(array_id)),
        f"slurmdbd to record the {count} tasks of {array_id}",
        timeout=120,
    )
    return list(found)


def _sacct_ended(array_id: str) -> list[tuple[str, datetime, datetime]]:
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-o", "JobID,Start,End", "-j", array_id],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    # (slurmdbd may hold a placeholder without the task id for a task that just ended)
    rows = [r for r in rows if "_" in r[0] and r[2] not in ("Unknown", "None", "")]
    return [(r[0], datetime.fromisoformat(r[1]), datetime.fromisoformat(r[2])) for r in rows]


def _most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    """The most half-open [start, end) spans that overlap at one time."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    running = peak = 0
    for _, delta in events:  # an end sorts before a start at the same second
        running += delta
        peak = max(peak, running)
    return peak


def test_array_is_one_sbatch_limited_to_4_at_once_and_retries_natively(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sbatches: list[list[str]] = []
    real_run = slurm_scheduler.run_slurm

    def counting(cmd: Any, timeout: float, stdin: str | None = None) -> str:
        if cmd[0] == "sbatch":
            sbatches.append(list(cmd))
        return real_run(cmd, timeout, stdin)

    monkeypatch.setattr(slurm_scheduler, "run_slurm", counting)
    # each index runs for a second, so the limit of 4 at once is visible in sacct
    slow_sh = tmp_path / "slow-sh"
    slow_sh.write_text('#!/bin/sh\nsleep 1\nexec sh "$@"\n')
    slow_sh.chmod(0o755)
    app = failing_array_app("", entrypoint=str(slow_sh), resource=SMALL)
    job_dir = tmp_path / "job"

    with get_runner("arr") as runner:
        handle = runner.run(app, "slurm", {"job_dir": str(job_dir)})
        status = runner.wait(handle, wait_interval=0.5, timeout=300)
        check_failed_array(status)
        assert len(sbatches) == 1, sbatches
        array_id = handle.rsplit("/", 1)[1]

        tasks = _sacct_tasks(array_id, SIZE)
        assert sorted(t[0] for t in tasks) == sorted(f"{array_id}_{i}" for i in range(SIZE))
        assert 1 < _most_at_once([(s, e) for _, s, e in tasks]) <= PARALLELISM

        assert list(runner.log_lines(handle, "shard", FAILING_INDEX)) == [
            f"index={FAILING_INDEX} of={SIZE} arg=shard-{FAILING_INDEX}\n"
        ]
        assert list(runner.log_lines(handle, "shard", 3)) == [f"index=3 of={SIZE} arg=shard-3\n"]

        retried = runner.retry_failed(handle)
        assert len(sbatches) == 2, sbatches
        status = runner.wait(retried, wait_interval=0.5, timeout=300)
        check_retried(status)
        retry_id = retried.rsplit("/", 1)[1]
        assert [t[0] for t in _sacct_tasks(retry_id, 1)] == [f"{retry_id}_{FAILING_INDEX}"]
        assert list(runner.log_lines(retried, "shard", FAILING_INDEX)) == [
            f"index={FAILING_INDEX} of={SIZE} arg=shard-{FAILING_INDEX}\n"
        ]


def test_sweep_params_reach_each_index_and_status_is_one_query(
    sched: SlurmScheduler, tmp_path: Path
) -> None:
    role = Role(
        name="sw",
        image="",
        entrypoint="sh",
        args=["-c", 'echo "x=$1 env=$ANYLAUNCH_PARAM_X"', "sh", "${param.x}"],
        resource=SMALL,
    )
    values = ["a b", "it's", "$HOME"]
    app = sweep(AppDef("sweep", [role]), [{"x": v} for v in values], parallelism=2)
    app_id = sched.submit(app, {"job_dir": str(tmp_path / "job")})
    desc = wait_done(sched, app_id, timeout=300)
    assert desc.state == AppState.SUCCEEDED, desc
    assert desc.array is not None and desc.array.counts() == {"SUCCEEDED": 3}
    for i, value in enumerate(values):
        assert list(sched.log_iter(app_id, "sw", i)) == [f"x={value} env={value}\n"]

    # a watcher that sees the array only in accounting (or partly in the controller) still
    # pays one squeue and at most one sacct for it, like for one plain app
    watcher = create_scheduler("watch", squeue_ttl=60)
    calls = watcher.query.calls
    before = dict(calls)
    assert watcher.describe_many([app_id])[app_id] is not None
    assert calls["squeue"] - before["squeue"] <= 1
    assert calls["sacct"] - before["sacct"] <= 1


def test_parse_sacct_reads_array_tasks_and_pending_ranges() -> None:
    sep = "\x1f"
    name = "a:r [anylaunch-array size=6;ratio=1.0]"
    rows = [
        ["872", "871_0", "COMPLETED", "0:0", "", "node1", "/w", "None", "0", name],
        ["875", "871_3", "FAILED", "1:0", "", "node1", "/w", "None", "0", name],
        ["871", "871_[4-5%2]", "PENDING", "0:0", "", "None assigned", "/w", "None", "0", name],
    ]
    jobs = parse_sacct("\n".join(sep.join(r) for r in rows))
    assert [(j.leader_id, j.array_task) for j in jobs] == [
        ("871", "0"),
        ("871", "3"),
        ("871", "4-5%2"),
    ]
    desc = slurm_scheduler._describe("871", jobs)
    assert desc.array is not None
    assert desc.array.failed() == [3]
    assert desc.array.counts() == {"PENDING": 4, "SUCCEEDED": 1, "FAILED": 1}  # 1, 2: unknown
    assert desc.state == AppState.RUNNING
