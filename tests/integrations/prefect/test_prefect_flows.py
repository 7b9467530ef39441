"""The run_app flow and the tasks on real Prefect with real local_cwd apps."""

import time
import uuid

import pytest
from prefect import flow

from anylaunch.specs.api import AppState
from prefect_anylaunch import (
    AnylaunchAppFailedError,
    AnylaunchAppTimeoutError,
    AnylaunchJob,
    cancel_app,
    get_app_logs,
    launch_app,
    run_app,
    wait_for_app,
)

# long enough to still run when the test looks at it, short enough not to linger if it leaks
SLEEPER = "import time; print('started', flush=True); time.sleep(60)"


def test_run_app_succeeds_and_its_lines_reach_the_run_log(pf) -> None:
    token = uuid.uuid4().hex
    app = pf.py_app(
        "hello",
        f"import os, time; print('{token}-first', os.environ['REPLICA']); time.sleep(0.3);"
        f" print('{token}-second', os.environ['REPLICA'])",
        replicas=2,
    )
    state = run_app(AnylaunchJob(app=app, poll_interval_s=0.5), return_state=True)

    assert state.is_completed(), state.message
    result = state.result()
    assert result["state"] == "SUCCEEDED"
    handle = result["app_handle"]
    assert pf.app_status(handle).state == AppState.SUCCEEDED
    flow_run_id = state.state_details.flow_run_id
    logs = "\n".join(pf.run_logs(flow_run_id))
    for replica in (0, 1):
        assert f"w/{replica} {token}-first {replica}" in logs
        assert f"w/{replica} {token}-second {replica}" in logs
    assert f"launched {handle}" in logs
    # the handle is on the flow run while the app runs (and the cancel hooks find it there)
    labels = pf.read_flow_run(flow_run_id).labels
    assert handle in labels.values()
    artifacts = {a.key: a for a in pf.run_artifacts(flow_run_id)}
    assert result["ui_url"] in artifacts["anylaunch-hello-link"].data
    assert "role w: 2 replica(s)" in artifacts["anylaunch-hello-request"].data
    rows = artifacts["anylaunch-hello-replicas"].data
    assert rows.count('"SUCCEEDED"') == 2, rows


def test_failing_app_fails_the_flow_with_its_message(pf) -> None:
    token = uuid.uuid4().hex
    app = pf.py_app("doomed", f"import sys; print('{token}', file=sys.stderr); sys.exit(3)")
    state = run_app(AnylaunchJob(app=app, poll_interval_s=0.5), return_state=True)

    assert state.is_failed()
    error = state.result(raise_on_failure=False)
    assert isinstance(error, AnylaunchAppFailedError), error
    assert "ended FAILED" in str(error) and "exit code 3" in str(error)
    assert token in str(error)  # the app's own stderr
    assert token in state.message
    assert pf.app_status(error.app_handle).state == AppState.FAILED


def test_our_run_timeout_cancels_the_app(pf) -> None:
    job = AnylaunchJob(app=pf.py_app("slow", SLEEPER), poll_interval_s=0.5, run_timeout_s=1)
    began = time.monotonic()
    state = run_app(job, return_state=True)

    assert time.monotonic() - began < 30
    assert state.is_failed()
    error = state.result(raise_on_failure=False)
    assert isinstance(error, AnylaunchAppTimeoutError), error
    assert "did not finish within 1s" in str(error)
    pf.wait_for_state(error.app_handle, AppState.CANCELLED)
    (app,) = pf.launched_apps()
    assert app.state == AppState.CANCELLED


def test_a_prefect_flow_timeout_cancels_the_app(pf) -> None:
    job = AnylaunchJob(app=pf.py_app("slow", SLEEPER), poll_interval_s=0.5)
    state = run_app.with_options(timeout_seconds=4)(job, return_state=True)

    assert state.is_failed()
    assert "timeout" in state.message.lower()
    (app,) = pf.launched_apps()
    pf.wait_for_state(app.app_handle, AppState.CANCELLED)
    logs = "\n".join(pf.run_logs(state.state_details.flow_run_id))
    assert f"cancelling {app.app_handle}" in logs


def test_a_retried_wait_attaches_to_the_same_app(pf) -> None:
    # each attempt gives up after 0.5 s without cancelling; the app needs 5 s
    code = "import time; time.sleep(5); print('done')"
    job = AnylaunchJob(
        app=pf.py_app("patient", code),
        poll_interval_s=0.2,
        run_timeout_s=0.5,
        cancel_on_timeout=False,
    )
    state = run_app(job, wait_retries=10, wait_retry_delay_s=0, return_state=True)

    assert state.is_completed(), state.message
    (app,) = pf.launched_apps()  # launched once
    assert app.state == AppState.SUCCEEDED
    flow_run_id = state.state_details.flow_run_id
    waits = [t for t in pf.task_runs(flow_run_id) if t.task_key.startswith("wait_for_app")]
    assert len(waits) == 1 and waits[0].run_count >= 2, [(t.name, t.run_count) for t in waits]
    assert f"attaching to {app.app_handle}" in "\n".join(pf.run_logs(flow_run_id))


@pytest.mark.parametrize(
    "job_fields, expected",
    [
        ({"scheduler": "local_cwdd"}, "Did you mean 'local_cwd'"),
        ({"cfg": {"log_dirr": "/tmp"}}, "log_dir"),
        ({"cfg": {"cancel_grace_s": "soon"}}, "cancel_grace_s"),
        ({"component": "utils.ecoh", "app": None}, "Did you mean 'utils.echo'"),
        ({"component": "utils.echo", "component_args": {"msgg": "x"}, "app": None}, "msgg"),
        ({"log_roles": ["worker"]}, "has no such role"),
    ],
)
def test_bad_input_fails_clearly_before_anything_is_launched(pf, job_fields, expected) -> None:
    fields = {"app": pf.py_app("never", "print('should not run')"), **job_fields}
    state = run_app(AnylaunchJob(**fields), return_state=True)

    assert state.is_failed()
    assert expected in state.message, state.message
    assert pf.launched_apps() == []


def test_tasks_launch_wait_logs_and_cancel(pf) -> None:
    token = uuid.uuid4().hex
    done_job = AnylaunchJob(app=pf.py_app("talker", f"print('{token}')"), poll_interval_s=0.2)
    sleeper_job = AnylaunchJob(app=pf.py_app("sleeper", SLEEPER), poll_interval_s=0.2)

    @flow
    def lifecycle() -> tuple:
        handle = launch_app(done_job)
        final = wait_for_app(handle, done_job)
        logs = get_app_logs(handle)
        sleeper = launch_app(sleeper_job)
        cancelled = cancel_app(sleeper, wait_timeout_s=20)
        return final, logs, cancelled

    final, logs, cancelled = lifecycle()

    assert final["state"] == "SUCCEEDED"
    assert logs == {"w/0": [token]}
    assert cancelled["state"] == "CANCELLED"
    assert pf.app_status(cancelled["app_handle"]).state == AppState.CANCELLED


def test_get_app_logs_filters_and_rejects_bad_arguments(pf) -> None:
    code = "import os; print('even' if int(os.environ['REPLICA']) % 2 == 0 else 'odd')"
    job = AnylaunchJob(app=pf.py_app("parity", code, replicas=2), poll_interval_s=0.2)

    @flow
    def logs_of(**kwargs) -> dict:
        handle = launch_app(job)
        wait_for_app(handle, job)
        return get_app_logs(handle, **kwargs)

    assert logs_of(role_name="w", k=1) == {"w/1": ["odd"]}
    assert logs_of(regex="^ev") == {"w/0": ["even"], "w/1": []}
    state = logs_of(k=1, return_state=True)
    assert state.is_failed() and "needs role_name" in state.message
    state = logs_of(streams="stdoutt", return_state=True)
    assert state.is_failed() and "is not a stream" in state.message


def test_every_app_line_is_one_record_and_no_secret_is_logged(pf) -> None:
    """One Prefect log record per app line (never several lines merged), prefixed
    ``role/replica``; a secret env value (declared in the settings block under a name no
    built-in pattern matches) is masked in every record and in the failure."""
    from prefect_anylaunch import AnylaunchSchedulerSettings

    secret = f"conn-{uuid.uuid4().hex}"
    code = (
        "import os, sys\n"
        "for i in range(50): print(f'line {i}', flush=True)\n"
        "print('conn=' + os.environ['CONN_STRING'], flush=True)\n"
        "sys.exit(4)"
    )
    settings = AnylaunchSchedulerSettings(secret_env={"CONN_STRING": secret})
    job = AnylaunchJob(app=pf.py_app("chatty", code), settings=settings, poll_interval_s=0.5)
    state = run_app(job, return_state=True)

    assert state.is_failed()
    with pytest.raises(AnylaunchAppFailedError) as err:
        state.result()
    assert secret not in str(err.value)
    assert "exit code: 4" in str(err.value)
    logs = pf.run_logs(state.state_details.flow_run_id)
    app_lines = [m for m in logs if m.startswith("w/0 ")]
    assert [m for m in app_lines if m.startswith("w/0 line ")] == [
        f"w/0 line {i}" for i in range(50)
    ]
    assert "w/0 conn=***" in app_lines
    assert not any(secret in m for m in logs)
