"""Dagster deployed as operators run it without the UI (a gRPC code server, dagster-daemon
with run monitoring and run retries, the default run launcher's run worker processes), with
faults injected while a step's 25 s app runs."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from tests.deployments.conftest import app_ids, app_state, live_processes
from tests.deployments.dagster_deployment import DagsterDeployment
from tests.deployments.processes import wait_until

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


def test_sigkill_of_the_run_worker_retries_the_run_which_reattaches(
    dagster: DagsterDeployment,
) -> None:
    before = app_ids(dagster.state_dir, "dticker")
    runs_before = {r["id"] for r in dagster.runs()}
    run_id = dagster.launch()
    app_id = _running_app(dagster, before)
    workers = wait_until(dagster.run_workers, 60, "the run worker")
    for pid in workers:  # type: ignore[union-attr]
        os.kill(pid, signal.SIGKILL)

    def retry_done() -> dict | None:
        mine = [r for r in dagster.runs() if r["id"] not in runs_before]
        child = next((r for r in mine if r["parent"] == run_id), None)
        return child if child and child["status"] in ("SUCCESS", "FAILURE", "CANCELED") else None

    child = wait_until(retry_done, 300, "the retried run to end", interval=1)
    statuses = {r["id"]: r["status"] for r in dagster.runs()}
    assert statuses[run_id] == "FAILURE"  # run monitoring saw its worker die
    assert child["status"] == "SUCCESS"  # type: ignore[index]
    assert [a for a in app_ids(dagster.state_dir, "dticker") if a not in before] == [app_id]
    assert app_state(dagster.state_dir, app_id) == "SUCCEEDED"
    wait_until(lambda: not live_processes(MARKER), 60, "no app process left")


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
