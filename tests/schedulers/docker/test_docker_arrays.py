"""Job arrays on local_docker (issue 28): one app, one container per index, at most
``parallelism`` running (the array's detached runner starts the next as one ends; this
process only describes), per-index states, logs, cancel and retry."""

from __future__ import annotations

from typing import Any

import anylaunch.specs as specs
from anylaunch.runner import Runner
from anylaunch.schedulers.docker.request import _parse_time
from anylaunch.specs import AppState
from tests.schedulers.arrays_kit import (
    FAILING_INDEX,
    PARALLELISM,
    SIZE,
    check_failed_array,
    check_retried,
    failing_array_app,
)

CFG = {"cancel_grace_s": 1.0}


def most_at_once(docker_client: Any, containers: list[str]) -> int:
    """The most index containers that ran at the same time, by the engine's own start and
    finish times (a finish at the very time of a start counts first)."""
    events = []
    for name in containers:
        state = docker_client.api.inspect_container(name)["State"]
        started, finished = _parse_time(state["StartedAt"]), _parse_time(state["FinishedAt"])
        assert started and finished, (name, state)
        events += [(started, 1), (finished, -1)]
    running = peak = 0
    for _, step in sorted(events):
        running += step
        peak = max(peak, running)
    return peak


def test_array_runs_k_at_once_fails_by_index_and_retries_it(
    runner: Runner, busybox_image: str, docker_client: Any
) -> None:
    handle = runner.run(failing_array_app(busybox_image), "local_docker", CFG)
    status = runner.wait(handle, wait_interval=0.2, timeout=240)
    check_failed_array(status)
    assert status is not None and status.array is not None
    assert status.array.exit_codes[FAILING_INDEX] == 1

    app_id = handle.rsplit("/", 1)[1]
    names = [f"{app_id}-shard-{i}" for i in range(SIZE)]
    assert 1 <= most_at_once(docker_client, names) <= PARALLELISM

    lines = list(runner.log_lines(handle, "shard", k=FAILING_INDEX))
    assert lines == [f"index={FAILING_INDEX} of={SIZE} arg=shard-{FAILING_INDEX}\n"]

    retried = runner.retry_failed(handle)
    assert retried != handle
    again = runner.wait(retried, wait_interval=0.2, timeout=120)
    check_retried(again)
    assert list(runner.log_lines(retried, "shard", k=FAILING_INDEX)) == lines


def test_sweep_passes_params_as_macros_and_env(runner: Runner, busybox_image: str) -> None:
    script = 'echo "arg=$1 env=$ANYLAUNCH_PARAM_X"'
    role = specs.Role(
        "sweep", image=busybox_image, entrypoint="sh", args=["-c", script, "sh", "${param.x}"]
    )
    app = specs.sweep(specs.AppDef("sweep", [role]), [{"x": "a b"}, {"x": 3}], parallelism=1)
    handle = runner.run(app, "local_docker", CFG)
    status = runner.wait(handle, wait_interval=0.2, timeout=120)
    assert status is not None and status.state == AppState.SUCCEEDED, status
    for index, value in enumerate(["a b", "3"]):
        assert list(runner.log_lines(handle, "sweep", k=index)) == [f"arg={value} env={value}\n"]


def test_cancel_stops_running_indices_and_never_starts_pending_ones(
    runner: Runner, busybox_image: str, docker_client: Any
) -> None:
    role = specs.Role("nap", image=busybox_image, entrypoint="sleep", args=["60"])
    app = specs.AppDef("nap", [role], array=specs.ArraySpec(4, parallelism=2))
    handle = runner.run(app, "local_docker", CFG)
    status = runner.status(handle)
    assert status is not None and status.array is not None
    assert status.array.in_state(AppState.RUNNING) == [0, 1], status.array.to_dict()
    runner.cancel(handle)
    status = runner.wait(handle, wait_interval=0.2, timeout=120)
    assert status is not None and status.state == AppState.CANCELLED, status
    assert status.array is not None
    assert status.array.in_state(AppState.CANCELLED) == [0, 1, 2, 3]
    app_id = handle.rsplit("/", 1)[1]
    states = {
        i: docker_client.api.inspect_container(f"{app_id}-nap-{i}")["State"] for i in range(4)
    }
    assert not any(s["Running"] for s in states.values())
    assert [i for i, s in states.items() if s["Status"] == "created"] == [2, 3]
