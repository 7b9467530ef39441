"""Dagster deployed as operators run it at scale, without the UI (two code locations with a
gRPC code server each, dagster-daemon with the queued run coordinator, run monitoring and run
retries, the default run launcher's run worker processes), with faults injected while a
step's 25 s app runs: on the Slurm cluster (second location) the run worker is lost, on
local_cwd (first location) the run is terminated from the engine."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.deployments.conftest import app_ids, app_state, live_processes
from tests.deployments.dagster_deployment import DagsterDeployment
from tests.deployments.processes import kill_tree, wait_until

pytestmark = pytest.mark.slow
MARKER = "print('dtick', i, flush=True)"


@pytest.fixture(scope="module")
def dagster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterDeployment]:
    deployment = DagsterDeployment(tmp_path_factory.mktemp("dagster"))
    try:
        deployment.start()
        yield deployment
    finally:
        deployment.stop()


def _running_app(dagster: DagsterDeployment, before: list[str]) -> str:
    def ticking() -> str | None:
        for app_id in app_ids(dagster.state_dir, "dticker"):
            log = dagster.state_dir / app_id / "logs" / "ticker" / "0" / "stdout.log"
            if app_id not in before and log.exists() and log.read_text().count("dtick") >= 3:
                return app_id
        return None

    return str(wait_until(ticking, 240, "the step's app printing lines"))


def _ticks(messages: list[str]) -> list[int]:
    """The ticks a run's log shows, in order (``ticker/0 stick 7`` gives 7)."""
    import re

    return [int(m.group(1)) for line in messages if (m := re.search(r"\bstick (\d+)\b", line))]


def test_killing_the_run_worker_fails_the_run_and_its_retry_reattaches_to_the_slurm_job(
    dagster: DagsterDeployment, slurm_cluster: object
) -> None:
    """The run worker (the step's process below it too) is lost mid-step: run monitoring
    fails the run, run retries start its retry from failure, and the retried step reattaches
    to the same Slurm job (one submission) and logs its lines on from where they were."""
    from anylaunch.runner import get_runner
    from anylaunch.specs import AppState

    runs_before = {r["id"] for r in dagster.runs()}
    run_id = dagster.launch("slurm_ticker_job", "anylaunch-slurm")
    wait_until(lambda: len(_ticks(dagster.log_messages(run_id))) >= 3, 240, "the job ticking")
    worker = wait_until(lambda: dagster.run_worker(run_id), 30, "the run worker's pid")
    kill_tree(int(worker))  # type: ignore[call-overload]
    ticks_before = _ticks(dagster.log_messages(run_id))

    def retry_done() -> dict | None:
        mine = [r for r in dagster.runs() if r["id"] not in runs_before]
        child = next((r for r in mine if r["parent"] == run_id), None)
        return child if child and child["status"] in ("SUCCESS", "FAILURE", "CANCELED") else None

    child = dict(wait_until(retry_done, 300, "the retried run to end", interval=1))  # type: ignore[call-overload]
    statuses = {r["id"]: r["status"] for r in dagster.runs()}
    assert statuses[run_id] == "FAILURE"  # run monitoring saw its worker die
    assert child["status"] == "SUCCESS"
    assert [r["id"] for r in dagster.runs() if r["id"] not in runs_before] == [run_id, child["id"]]
    messages = dagster.log_messages(child["id"])
    (handle,) = {m.split()[3] for m in messages if m.startswith("reattaching to app ")}
    assert not any(m.startswith("launched ") for m in messages)  # one submission
    assert any(f"launched {handle}" in m for m in dagster.log_messages(run_id))
    ticks_after = _ticks(messages)
    assert ticks_after[-1] == int(dagster.env()["TICKER_DURATION"]) - 1  # to the job's end
    assert ticks_after[0] <= ticks_before[-1] + 1  # no line lost across the retry
    with get_runner() as runner:
        status = runner.status(handle)
    assert status is not None and status.state == AppState.SUCCEEDED


def test_terminating_the_run_from_the_engine_cancels_the_app(dagster: DagsterDeployment) -> None:
    before = app_ids(dagster.state_dir, "dticker")
    run_id = dagster.launch()
    app_id = _running_app(dagster, before)
    started = time.monotonic()
    dagster.cancel(run_id)

    wait_until(lambda: app_state(dagster.state_dir, app_id) == "CANCELLED", 90, "the app cancelled")
    assert time.monotonic() - started < 90
    wait_until(
        lambda: {r["id"]: r["status"] for r in dagster.runs()}[run_id] == "CANCELED",
        120,
        "the run canceled",
    )
    assert [a for a in app_ids(dagster.state_dir, "dticker") if a not in before] == [app_id]
    wait_until(lambda: not live_processes(MARKER), 60, "no app process left")
