"""Job arrays on the LSF stand-in (issue 28): one ``bsub -J "name[1-20]%4"``, per-index
status from the one bjobs query, per-index logs, a native retry (``name[8]`` for index 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

import anylaunch
from anylaunch.runner import get_runner
from anylaunch.schedulers.common.job_metadata import OWNER_KEY
from anylaunch.schedulers.lsf_scheduler import create_scheduler
from anylaunch.specs import AppDef, AppState, Role, sweep
from anylaunch.specs.metadata_keys import app_metadata
from tests.schedulers.arrays_kit import (
    FAILING_INDEX,
    PARALLELISM,
    SIZE,
    check_failed_array,
    check_retried,
    failing_array_app,
)
from tests.schedulers.lsf.conftest import LsfCluster, wait_until


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    return peak


def test_array_is_one_bsub_limited_to_4_at_once_and_retries_natively(
    lsf_cluster: LsfCluster, tmp_path: Path
) -> None:
    slow_sh = tmp_path / "slow-sh"
    slow_sh.write_text('#!/bin/sh\nsleep 0.3\nexec sh "$@"\n')
    slow_sh.chmod(0o755)
    app = failing_array_app(str(tmp_path), entrypoint=str(slow_sh))
    with get_runner("arr") as runner:
        handle = runner.run(app, "lsf", {"jobdir": str(lsf_cluster.jobdir)})
        status = runner.wait(handle, wait_interval=0.3, timeout=180)
        check_failed_array(status)

        bsubs = [c for c in lsf_cluster.commands() if c[0] == "bsub"]
        assert len(bsubs) == 1, bsubs
        name = bsubs[0][bsubs[0].index("-J") + 1]
        assert name.endswith(f"[1-{SIZE}]%{PARALLELISM}"), name
        jobs = lsf_cluster.jobs()
        assert len({j["id"] for j in jobs}) == 1
        assert sorted(j["index"] for j in jobs) == list(range(1, SIZE + 1))
        spans = [(j["start_time"], j["finish_time"]) for j in jobs]
        assert 1 < _most_at_once(spans) <= PARALLELISM
        # LSF's element 8 ran index 7
        failed = [j for j in jobs if j["stat"] == "EXIT"]
        assert [j["index"] for j in failed] == [FAILING_INDEX + 1]

        assert list(runner.log_lines(handle, "shard", FAILING_INDEX)) == [
            f"index={FAILING_INDEX} of={SIZE} arg=shard-{FAILING_INDEX}\n"
        ]

        retried = runner.retry_failed(handle)
        status = runner.wait(retried, wait_interval=0.3, timeout=180)
        check_retried(status)
        bsubs = [c for c in lsf_cluster.commands() if c[0] == "bsub"]
        assert len(bsubs) == 2
        retry_name = bsubs[1][bsubs[1].index("-J") + 1]
        assert retry_name.endswith(f"[{FAILING_INDEX + 1}]"), retry_name
        assert list(runner.log_lines(retried, "shard", FAILING_INDEX)) == [
            f"index={FAILING_INDEX} of={SIZE} arg=shard-{FAILING_INDEX}\n"
        ]
    # cancel: one bkill of the array's job id ends every element
    sched = create_scheduler("c")
    cancel_app = sweep(
        AppDef("c", [Role("s", image=str(tmp_path), entrypoint="sleep", args=["${param.t}"])]),
        [{"t": 60}] * 3,
        parallelism=2,
    )
    app_id = sched.submit(cancel_app, {"jobdir": str(lsf_cluster.jobdir)})
    wait_until(lambda: (d := sched.describe(app_id)) and d.state == AppState.RUNNING, "RUNNING")
    sched.cancel(app_id)
    desc = wait_until(
        lambda: (d := sched.describe(app_id)) and d.state.is_terminal() and d, "cancelled", 60
    )
    assert desc.state == AppState.CANCELLED, desc
    assert desc.array.counts() == {"CANCELLED": 3}


def test_sweep_params_reach_each_index(
    lsf_cluster: LsfCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LSB_BJOBS_DISPLAY_ENH=Y: bjobs shows elements as JOBID[IDX] (the scenario reads JOBID)
    monkeypatch.setenv("LSB_BJOBS_DISPLAY_ENH", "Y")
    role = Role(
        "sw",
        image=str(tmp_path),
        entrypoint="sh",
        args=["-c", 'echo "x=$1 env=$ANYLAUNCH_PARAM_X"', "sh", "${param.x}"],
    )
    values = ["a b", "it's", "$HOME"]
    app = sweep(AppDef("sweep", [role]), [{"x": v} for v in values])
    sched = create_scheduler("s")
    app_id = sched.submit(app, {"jobdir": str(lsf_cluster.jobdir)})
    desc = wait_until(
        lambda: (d := sched.describe(app_id)) and d.state.is_terminal() and d, "the sweep", 120
    )
    assert desc.state == AppState.SUCCEEDED, desc
    for i, value in enumerate(values):
        assert list(sched.log_iter(app_id, "sw", i)) == [f"x={value} env={value}\n"]


def test_an_arrays_describe_returns_the_job_metadata_and_owner(
    lsf_cluster: LsfCluster, tmp_path: Path
) -> None:
    owner = "dagster:run-1"
    role = Role("a", image=str(tmp_path), entrypoint="true", env={"ANYLAUNCH_PARENT_RUN_ID": owner})
    sched = create_scheduler("s")
    app_id = sched.submit(
        sweep(AppDef("arr", [role]), [{}] * 2), {"jobdir": str(lsf_cluster.jobdir)}
    )
    desc = wait_until(
        lambda: (d := sched.describe(app_id)) and d.state.is_terminal() and d, "the array", 60
    )
    assert desc.state == AppState.SUCCEEDED, desc
    assert desc.metadata[OWNER_KEY] == owner
    assert desc.metadata[app_metadata.SCHEDULER] == "lsf"
    assert desc.metadata[app_metadata.VERSION] == anylaunch.__version__
