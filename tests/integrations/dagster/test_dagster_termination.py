"""Terminating a Dagster run cancels its anylaunch app before the step ends.

The run executes in a real run worker process (run_worker.py) against a persistent instance;
the test terminates it the way `dagster run terminate` / the UI does (the run goes CANCELING
and the worker's main thread is interrupted), then checks the local_cwd app, which any process
can see, ended CANCELLED, and that the step logged the app's end before it failed.
"""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import dagster as dg
import pytest

from anylaunch.runner import get_runner
from anylaunch.specs import AppState

HERE = Path(__file__).resolve().parent


# also run in each engine version's own environment (scripts/engine_envs.sh)
pytestmark = pytest.mark.engine_matrix


def test_terminating_the_run_cancels_the_app(
    instance_dir: Path,
    persistent_instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
    launched_apps,
    user_logs,
    wait_for,
) -> None:
    monkeypatch.setenv("TEST_APP_SLEEP_S", "300")  # would outlive the test by far
    run_id = str(uuid.uuid4())
    worker = subprocess.Popen(
        [sys.executable, str(HERE / "run_worker.py"), str(instance_dir), "slow_job", run_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
    )
    try:
        # the step is watching the app once the app printed its first line into the run's log
        wait_for(
            "the app's first line in the run's log",
            lambda: any("main/0 started" in m for m in user_logs(persistent_instance, run_id)),
        )
        (app,) = launched_apps()
        assert app.state == AppState.RUNNING

        run = persistent_instance.get_run_by_id(run_id)
        assert run is not None
        persistent_instance.report_run_canceling(run)  # what run termination does first
        out, _ = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()

    assert worker.returncode == 0, out
    with get_runner() as runner:
        status = runner.status(app.app_handle)
    assert status is not None and status.state == AppState.CANCELLED

    # the app ended before the step did: its end is logged before the step's failure event
    entries = persistent_instance.all_logs(run_id)
    ended_at = next(
        i
        for i, e in enumerate(entries)
        if e.dagster_event is None and "ended CANCELLED" in e.user_message
    )
    step_failed_at = next(
        i
        for i, e in enumerate(entries)
        if e.dagster_event is not None and e.dagster_event.event_type_value == "STEP_FAILURE"
    )
    assert ended_at < step_failed_at
    failure = entries[step_failed_at].dagster_event.step_failure_data.error
    assert "DagsterExecutionInterruptedError" in failure.cls_name
    final = persistent_instance.get_run_by_id(run_id)
    assert final is not None and final.status == dg.DagsterRunStatus.CANCELED
    assert len(launched_apps()) == 1
