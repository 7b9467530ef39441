"""Job arrays on local_cwd (issue 28): one app, one supervisor, at most ``parallelism``
indices at once, per-index states, logs, cancel and retry."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import anylaunch.specs as specs
from anylaunch.runner import Runner, get_runner
from anylaunch.schedulers.local import state as ls
from anylaunch.specs import AppState
from tests.schedulers.arrays_kit import (
    FAILING_INDEX,
    PARALLELISM,
    SIZE,
    check_failed_array,
    check_retried,
    failing_array_app,
)
from tests.schedulers.local_helpers import CFG, gone, wait_until


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runner]:
    monkeypatch.setenv(ls.STATE_DIR_ENV, str(tmp_path / "state"))
    with get_runner("arrays") as r:
        yield r
        for app in r.list("local_cwd"):  # never leave processes behind
            if not app.state.is_terminal():
                r.cancel(app.app_handle)
                r.wait(app.app_handle, wait_interval=0.05, timeout=60)


def recorded_indices(runner: Runner, handle: str) -> list[Mapping[str, Any]]:
    """The per-index records the supervisor keeps (state, pid, start and end times)."""
    status = runner.status(handle)
    assert status is not None
    sched, app_id = runner._scheduler_app_id(handle)
    desc = sched.describe(app_id)
    assert desc is not None
    state = json.loads((Path(desc.metadata["app_dir"]) / ls.STATE_FILE).read_text())
    replicas: list[Mapping[str, Any]] = state["replicas"]
    return replicas


def most_at_once(replicas: Sequence[Mapping[str, Any]]) -> int:
    """The most indices that ran at the same time, from their recorded start and end times
    (an end at the very time of a start counts first: the supervisor records the end before
    it starts the next index)."""
    events = []
    for r in replicas:
        if r.get("started_at") is not None:
            events += [(r["started_at"], 1), (r["ended_at"], -1)]
    running = peak = 0
    for _, step in sorted(events):
        running += step
        peak = max(peak, running)
    return peak


def test_array_runs_k_at_once_fails_by_index_and_retries_it(runner: Runner) -> None:
    handle = runner.run(failing_array_app("."), "local_cwd", CFG)
    status = runner.wait(handle, wait_interval=0.05, timeout=120)
    check_failed_array(status)
    assert status is not None and status.array is not None
    assert status.array.exit_codes[FAILING_INDEX] == 1

    replicas = recorded_indices(runner, handle)
    assert sorted(r["id"] for r in replicas) == list(range(SIZE))
    assert all(r["started_at"] is not None and r["ended_at"] is not None for r in replicas)
    # the first PARALLELISM start together; no start while PARALLELISM run
    assert most_at_once(replicas) == PARALLELISM

    lines = list(runner.log_lines(handle, "shard", k=FAILING_INDEX))
    assert lines == [f"index={FAILING_INDEX} of={SIZE} arg=shard-{FAILING_INDEX}\n"]
    assert list(runner.log_lines(handle, "shard", k=12)) == [f"index=12 of={SIZE} arg=shard-12\n"]

    retried = runner.retry_failed(handle)
    assert retried != handle
    again = runner.wait(retried, wait_interval=0.05, timeout=60)
    check_retried(again)
    assert list(runner.log_lines(retried, "shard", k=FAILING_INDEX)) == lines
    with pytest.raises(specs.InvalidSpecError):  # only index 7 is in the retry
        runner.log_lines(retried, "shard", k=0)


SWEEP_SCRIPT = 'echo "arg=$1 env=$ANYLAUNCH_PARAM_X i=$ANYLAUNCH_ARRAY_INDEX"'


def test_sweep_passes_params_as_macros_and_env(runner: Runner) -> None:
    role = specs.Role(
        "sweep",
        image=".",
        entrypoint="sh",
        args=["-c", SWEEP_SCRIPT, "sh", "${param.x}"],
    )
    app = specs.sweep(
        specs.AppDef("sweep", [role]), [{"x": "a b"}, {"x": "it's"}, {"x": 3}], parallelism=2
    )
    handle = runner.run(app, "local_cwd", CFG)
    status = runner.wait(handle, wait_interval=0.05, timeout=60)
    assert status is not None and status.state == AppState.SUCCEEDED, status
    assert status.array is not None and status.array.in_state(AppState.SUCCEEDED) == [0, 1, 2]
    for index, value in enumerate(["a b", "it's", "3"]):
        lines = list(runner.log_lines(handle, "sweep", k=index))
        assert lines == [f"arg={value} env={value} i={index}\n"]


def test_cancel_stops_running_indices_and_never_starts_pending_ones(runner: Runner) -> None:
    role = specs.Role("nap", image=".", entrypoint="sleep", args=["60"])
    app = specs.AppDef("nap", [role], array=specs.ArraySpec(6, parallelism=2))
    handle = runner.run(app, "local_cwd", CFG)

    def two_running() -> bool:
        status = runner.status(handle)
        return (
            status is not None
            and status.array is not None
            and (len(status.array.in_state(AppState.RUNNING)) == 2)
        )

    wait_until(two_running, "two indices to run")
    pids = [r["pid"] for r in recorded_indices(runner, handle) if r["pid"]]
    assert len(pids) == 2
    runner.cancel(handle)
    status = runner.wait(handle, wait_interval=0.05, timeout=60)
    assert status is not None and status.state == AppState.CANCELLED, status
    assert status.array is not None
    assert status.array.in_state(AppState.CANCELLED) == list(range(6))
    assert all(gone(pid) for pid in pids)
    never = [r["id"] for r in recorded_indices(runner, handle) if r["started_at"] is None]
    assert never == [2, 3, 4, 5]
