"""The reaper sensor cancels the app of a run whose worker died without any hook running,
once Dagster knows the run ended (as run monitoring marks it), and keeps it before."""

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import dagster as dg
import pytest

from anylaunch.runner import get_runner
from anylaunch.specs import AppState
from dagster_anylaunch.reap import build_anylaunch_reaper_sensor

HERE = Path(__file__).resolve().parent


# also run in each engine version's own environment (scripts/engine_envs.sh)
pytestmark = pytest.mark.engine_matrix


def _evaluate(sensor: dg.SensorDefinition, instance: dg.DagsterInstance) -> str:
    with dg.build_sensor_context(instance=instance) as context:
        result = sensor(context)
    assert isinstance(result, dg.SkipReason)
    return str(result.skip_message)


def test_the_reaper_sensor_cancels_the_app_of_a_run_that_ended_without_cancelling_it(
    instance_dir: Path,
    persistent_instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
    launched_apps,
    user_logs,
    wait_for,
) -> None:
    monkeypatch.setenv("TEST_APP_SLEEP_S", "300")
    run_id = str(uuid.uuid4())
    worker = subprocess.Popen(
        [sys.executable, str(HERE / "run_worker.py"), str(instance_dir), "slow_job", run_id],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    try:
        wait_for(
            "the app's first line in the run's log",
            lambda: any("main/0 started" in m for m in user_logs(persistent_instance, run_id)),
        )
    finally:
        worker.send_signal(signal.SIGKILL)  # no hook, no finally: the app is left running
        worker.wait(60)
    (app,) = launched_apps()
    with get_runner() as runner:
        described = runner.describe(app.app_handle)
    assert described is not None
    assert described.roles[0].env["ANYLAUNCH_PARENT_RUN_ID"] == f"dagster:{run_id}"

    sensor = build_anylaunch_reaper_sensor(["local_cwd"], minimum_interval_seconds=30)
    # the run is still STARTED as far as Dagster knows: the app is kept
    assert "keep" in _evaluate(sensor, persistent_instance)
    assert launched_apps()[0].state == AppState.RUNNING

    run = persistent_instance.get_run_by_id(run_id)
    assert run is not None
    persistent_instance.report_run_failed(run)  # what run monitoring does for a dead worker
    assert "1 cancelled" in _evaluate(sensor, persistent_instance)
    with get_runner() as runner:
        status = runner.wait(app.app_handle, wait_interval=0.5, timeout=60)
    assert status is not None and status.state == AppState.CANCELLED
