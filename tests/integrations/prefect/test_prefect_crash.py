"""A flow process that is interrupted or killed must not leave its app running.

- SIGTERM (what a runner, a worker or Kubernetes sends): the process unwinds and dies, so
  run_app's ``finally`` cancels the app (Prefect runs no crash hook on a raw SIGTERM);
- SIGINT: Prefect reports the crash in-process and runs the ``on_crashed`` hook of a user's
  flow (no try/finally there), which finds the app by the flow run's label;
- SIGKILL: nothing runs in that process; the hook run elsewhere (as a runner does for a
  crashed flow run) still finds and cancels the app through the API.
"""

import importlib.util
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from anylaunch.specs.api import AppState

CRASH_FLOWS = Path(__file__).resolve().parent / "crash_flows.py"


def _start(pf, mode: str):
    proc = subprocess.Popen(
        [sys.executable, str(CRASH_FLOWS), mode],
        env=pf.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "starting":
        proc.kill()
        pytest.fail(f"the script did not start: {line}{proc.communicate()[1]}")
    pf.wait_for(
        "the app to run", lambda: [a.state for a in pf.launched_apps()] == [AppState.RUNNING]
    )
    (app,) = pf.launched_apps()
    # the launch task labels the flow run with the handle before it returns it
    pf.wait_for("the handle label", lambda: pf.flow_run_labelled(app.app_handle) is not None)
    return proc, pf.flow_run_labelled(app.app_handle), app.app_handle


def _stop(proc, sig: int) -> None:
    try:
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        print(err[-5000:])  # shown if the test fails
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _run_crash_hook_elsewhere(pf, flow_name: str, flow_run_id: Any) -> None:
    """Runs the flow's crash hook in this process, as a worker does for a crashed flow run."""
    spec = importlib.util.spec_from_file_location("anylaunch_test_crash_flows", CRASH_FLOWS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    flow_run = pf.read_flow_run(flow_run_id)
    from prefect_anylaunch import cancel_launched_apps

    cancel_launched_apps(getattr(module, flow_name), flow_run, flow_run.state)


@pytest.mark.engine_matrix
def test_sigterm_during_run_app_cancels_the_app(pf) -> None:
    proc, _, handle = _start(pf, "run_app")
    _stop(proc, signal.SIGTERM)

    pf.wait_for_state(handle, AppState.CANCELLED)


@pytest.mark.engine_matrix
def test_a_crash_runs_the_hook_that_cancels_the_app(pf) -> None:
    proc, flow_run_id, handle = _start(pf, "hooks")
    _stop(proc, signal.SIGINT)

    pf.wait_for_state(handle, AppState.CANCELLED)
    assert pf.read_flow_run(flow_run_id).state.is_crashed()
    logs = "\n".join(pf.run_logs(flow_run_id))
    assert "Running hook 'cancel_launched_apps'" in logs
    assert f"cancelling {handle}" in logs


def test_the_hook_cancels_the_app_from_another_process(pf) -> None:
    proc, flow_run_id, handle = _start(pf, "hooks")
    _stop(proc, signal.SIGKILL)
    assert pf.app_status(handle).state == AppState.RUNNING  # nobody cleaned up

    _run_crash_hook_elsewhere(pf, "launch_and_sleep", flow_run_id)

    pf.wait_for_state(handle, AppState.CANCELLED)
    assert f"cancelling {handle}" in "\n".join(pf.run_logs(flow_run_id))


def test_a_killed_parent_flow_cancels_the_app_of_its_run_app_subflow(pf) -> None:
    """The parent and its subflow die together (one process); the parent's crash hook, run
    elsewhere as a worker does, finds the subflow's app through the parent's labels."""
    proc, _, handle = _start(pf, "parent")

    def top_level_run_labelled() -> Any:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(limit=200)
        return next(
            (r.id for r in runs if handle in r.labels.values() and r.parent_task_run_id is None),
            None,
        )

    pf.wait_for("the parent flow run labelled", lambda: top_level_run_labelled() is not None)
    parent_id = top_level_run_labelled()
    _stop(proc, signal.SIGKILL)
    assert pf.app_status(handle).state == AppState.RUNNING  # nobody cleaned up

    _run_crash_hook_elsewhere(pf, "parent_of_run_app", parent_id)

    pf.wait_for_state(handle, AppState.CANCELLED)


def _reap(pf, *extra: str) -> dict:
    import json

    argv = ["reap", "-s", "local_cwd", "--engine", "prefect", "--json", *extra]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "anylaunch"), *argv],
        env=pf.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_anylaunch_reap_cancels_the_app_of_a_flow_run_that_ended_without_hooks(pf) -> None:
    """The flow's process is SIGKILLed and no hook runs anywhere; once Prefect marks the flow
    run crashed (as a worker does), ``anylaunch reap`` cancels its app. While the flow run
    is running, the reaper leaves the app alone."""
    proc, flow_run_id, handle = _start(pf, "hooks")
    try:
        report = _reap(pf)
        assert [(a["handle"], a["action"]) for a in report["actions"]] == [(handle, "keep")]
    finally:
        _stop(proc, signal.SIGKILL)
    assert pf.app_status(handle).state == AppState.RUNNING  # nobody cleaned up

    from prefect.client.orchestration import get_client
    from prefect.states import Crashed

    with get_client(sync_client=True) as client:
        client.set_flow_run_state(flow_run_id, Crashed(message="process killed"), force=True)

    assert _reap(pf, "--dry-run")["cancelled"] == []  # a dry run only reports
    assert pf.app_status(handle).state == AppState.RUNNING
    report = _reap(pf)
    assert report["cancelled"] == [handle]
    pf.wait_for_state(handle, AppState.CANCELLED)
