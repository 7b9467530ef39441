"""Startup and run timeouts of the Prefect wait, as the core watch policy decides them: the
startup timeout limits only the time until the app runs, the run timeout counts from the app's
start (time spent queued does not count), and a timed-out app ends CANCELLED (or keeps running
with ``cancel_on_timeout=False``).

The waits run through ``AnylaunchJobRun`` directly rather than the ``run_app`` flow, whose
``finally`` would cancel the app too: here only the wait itself can have cancelled it. The
queued phase needs a real queue: a Slurm job held with ``--begin``.
"""

from typing import Any, Dict

import pytest

from anylaunch.specs.api import AppState
from prefect_anylaunch import AnylaunchAppTimeoutError, AnylaunchJob, run_app
from tests.schedulers.slurm.cluster import slurm_cluster as slurm_cluster  # a fixture

SLEEPER = "import time; print('started', flush=True); time.sleep(60)"


def _slurm_sleep(name: str, seconds: int) -> Dict[str, Any]:
    role = {"name": "main", "image": "/tmp", "entrypoint": "sleep", "args": [str(seconds)]}
    role["resource"] = {"cpu": 1, "gpu": 0, "memMB": 64}
    return {"name": name, "roles": [role]}


@pytest.mark.engine_matrix
def test_the_run_timeout_cancels_the_app(pf) -> None:
    run = AnylaunchJob(
        app=pf.py_app("overrun", SLEEPER), poll_interval_s=0.3, run_timeout_s=1
    ).trigger()

    with pytest.raises(AnylaunchAppTimeoutError) as err:
        run.wait_for_completion()

    error = err.value
    assert (error.which, error.cancelled, error.last_state) == ("run", True, AppState.RUNNING)
    assert str(error).startswith(f"anylaunch app {run.app_handle} did not finish within 1s")
    assert "it is being cancelled" in str(error)
    pf.wait_for_state(run.app_handle, AppState.CANCELLED)


def test_a_run_timeout_without_cancel_leaves_the_app_running(pf) -> None:
    job = AnylaunchJob(
        app=pf.py_app("kept", SLEEPER),
        poll_interval_s=0.3,
        run_timeout_s=1,
        cancel_on_timeout=False,
    )
    run = job.trigger()
    try:
        with pytest.raises(AnylaunchAppTimeoutError) as err:
            run.wait_for_completion()

        assert (err.value.which, err.value.cancelled) == ("run", False)
        assert "it was left running" in str(err.value)
        assert pf.app_status(run.app_handle).state == AppState.RUNNING
    finally:
        run.cancel()
    pf.wait_for_state(run.app_handle, AppState.CANCELLED)


def test_the_startup_timeout_does_not_limit_a_running_app(pf) -> None:
    # started well within 5 s, then runs past it: only the start is timed
    code = "import time; print('up', flush=True); time.sleep(8); print('down', flush=True)"
    job = AnylaunchJob(app=pf.py_app("late", code), poll_interval_s=0.3, startup_timeout_s=5)
    state = run_app(job, return_state=True)

    assert state.is_completed(), state.message
    assert state.result()["state"] == "SUCCEEDED"


@pytest.mark.engine_matrix
def test_the_startup_timeout_cancels_an_app_that_never_starts(pf, slurm_cluster) -> None:
    job = AnylaunchJob(
        app=_slurm_sleep("held", 60),
        scheduler="slurm",
        cfg={"sbatch_args": ["--begin=now+3600"]},  # queued for an hour
        poll_interval_s=0.3,
        startup_timeout_s=2,
    )
    run = job.trigger()
    try:
        with pytest.raises(AnylaunchAppTimeoutError) as err:
            run.wait_for_completion()

        error = err.value
        assert (error.which, error.cancelled) == ("startup", True)
        assert error.last_state in (AppState.SUBMITTED, AppState.PENDING)
        assert "did not start (RUNNING) within 2s" in str(error)
        assert "Fix: raise startup_timeout_s" in str(error)
        pf.wait_for_state(run.app_handle, AppState.CANCELLED)
    finally:
        run.cancel()


def test_the_run_timeout_counts_from_the_start_not_from_the_queue(pf, slurm_cluster) -> None:
    # queued ~15 s (longer than the run timeout), then runs 1 s (well within it)
    job = AnylaunchJob(
        app=_slurm_sleep("queued", 1),
        scheduler="slurm",
        cfg={"sbatch_args": ["--begin=now+15"]},
        poll_interval_s=0.3,
        run_timeout_s=8,
    )
    state = run_app(job, return_state=True)

    assert state.is_completed(), state.message
    result = state.result()
    assert result["state"] == "SUCCEEDED"
    logs = pf.run_logs(state.state_details.flow_run_id)
    handle = result["app_handle"]
    # the watch saw it queued first (one record per state change), then running
    changes = [m for m in logs if m.startswith(f"anylaunch app {handle} is ")]
    assert changes[0] == f"anylaunch app {handle} is PENDING", changes
    assert f"anylaunch app {handle} is SUCCEEDED" in changes, changes
