"""The run_app flow and the tasks on real Prefect with real local_cwd apps."""

import json
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
from tests.integrations.flaky_apps import FAILS_ONCE, FIRST_FAILURE_IDS, FIRST_FAILURES

# long enough to still run when the test looks at it, short enough not to linger if it leaks
SLEEPER = "import time; print('started', flush=True); time.sleep(60)"


@pytest.mark.engine_matrix
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


@pytest.mark.engine_matrix
def test_failing_app_fails_the_flow_with_its_exit_code_and_stderr_tail(pf) -> None:
    token = uuid.uuid4().hex
    code = (
        f"import sys; print('{token}-a', file=sys.stderr); print('{token}-b', file=sys.stderr);"
        " sys.exit(3)"
    )
    app = pf.py_app("doomed", code)
    state = run_app(AnylaunchJob(app=app, poll_interval_s=0.5), return_state=True)

    assert state.is_failed()
    error = state.result(raise_on_failure=False)
    assert type(error) is AnylaunchAppFailedError, error
    text = str(error)
    assert text.startswith(f"anylaunch app {error.app_handle} ended FAILED"), text
    assert "\nexit code: 3\n" in text, text
    # the app's own stderr, last lines in order, under the summary's heading
    assert f"last stderr:\n  {token}-a\n  {token}-b" in text, text
    assert token in state.message
    assert error.status is not None and error.status.state == AppState.FAILED
    assert pf.app_status(error.app_handle).state == AppState.FAILED


def test_our_run_timeout_cancels_the_app(pf) -> None:
    job = AnylaunchJob(app=pf.py_app("slow", SLEEPER), poll_interval_s=0.5, run_timeout_s=1)
    began = time.monotonic()
    state = run_app(job, return_state=True)

    assert time.monotonic() - began < 30
    assert state.is_failed()
    error = state.result(raise_on_failure=False)
    assert isinstance(error, AnylaunchAppTimeoutError), error
    assert (error.which, error.timeout_s, error.cancelled) == ("run", 1, True)
    assert f"anylaunch app {error.app_handle} did not finish within 1s" in str(error)
    assert "Fix: raise run_timeout_s" in str(error)
    pf.wait_for_state(error.app_handle, AppState.CANCELLED)
    (app,) = pf.launched_apps()
    assert app.state == AppState.CANCELLED


@pytest.mark.engine_matrix
def test_a_prefect_flow_timeout_cancels_the_app(pf) -> None:
    job = AnylaunchJob(app=pf.py_app("slow", SLEEPER), poll_interval_s=0.5)
    state = run_app.with_options(timeout_seconds=4)(job, return_state=True)

    assert state.is_failed()
    assert "timeout" in state.message.lower()
    (app,) = pf.launched_apps()
    pf.wait_for_state(app.app_handle, AppState.CANCELLED)
    logs = "\n".join(pf.run_logs(state.state_details.flow_run_id))
    assert f"cancelling {app.app_handle}" in logs


@pytest.mark.engine_matrix
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
        ({"cfg": {"log_dirr": "/tmp"}}, "log_dir"),
        ({"cfg": {"cancel_grace_s": "soon"}}, "cancel_grace_s"),
        # (a misspelt component name fails earlier, as the block is built: test_prefect_blocks)
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


@pytest.mark.engine_matrix
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


def test_every_app_line_is_one_prefect_record(pf) -> None:
    """One Prefect log record per app line, ``role/replica text``, in order: lines written
    in one burst are never merged into one record."""
    code = "for i in range(50): print(f'line{i}')"  # buffered: one burst at exit
    job = AnylaunchJob(app=pf.py_app("chatty", code), poll_interval_s=0.5)
    state = run_app(job, return_state=True)

    assert state.is_completed(), state.message
    logs = pf.run_logs(state.state_details.flow_run_id)
    app_records = [m for m in logs if m.startswith("w/0 ")]
    assert app_records == [f"w/0 line{i}" for i in range(50)]


@pytest.mark.engine_matrix
def test_secrets_never_reach_logs_artifacts_results_or_errors(pf) -> None:
    """Masked everywhere: a value declared secret under a name no built-in pattern matches
    (CONN_STRING, in the settings block), and an env value of the app whose name says it is
    secret (API_TOKEN, declared nowhere) - in log records, artifacts and the error, though
    the app prints both to stdout and stderr."""
    from prefect_anylaunch import AnylaunchSchedulerSettings

    declared = f"conn-{uuid.uuid4().hex}"
    by_name = f"tok-{uuid.uuid4().hex}"
    code = (
        "import os, sys\n"
        "conn, token = os.environ['CONN_STRING'], os.environ['API_TOKEN']\n"
        "print('conn=' + conn, flush=True)\n"
        "print('token=' + token, flush=True)\n"
        "print('err', conn, token, file=sys.stderr, flush=True)\n"
        "sys.exit(4)"
    )
    settings = AnylaunchSchedulerSettings(secret_env={"CONN_STRING": declared})
    app = pf.py_app("leaky", code, env={"API_TOKEN": by_name})
    job = AnylaunchJob(app=app, settings=settings, poll_interval_s=0.3)
    state = run_app(job, return_state=True)

    assert state.is_failed()
    error = state.result(raise_on_failure=False)
    assert isinstance(error, AnylaunchAppFailedError), error
    assert "exit code: 4" in str(error)
    assert "  err *** ***" in str(error)  # the stderr tail, masked
    flow_run_id = state.state_details.flow_run_id
    logs = pf.run_logs(flow_run_id)
    assert "w/0 conn=***" in logs and "w/0 token=***" in logs
    artifacts = pf.run_artifacts(flow_run_id)
    keys = {a.key for a in artifacts}
    assert {"anylaunch-leaky-request", "anylaunch-leaky-replicas"} <= keys, keys
    flow_run = pf.read_flow_run(flow_run_id)
    seen = [
        *logs,
        str(error),
        repr(error.status),
        state.message or "",
        *(json.dumps(a.data) for a in artifacts),
        json.dumps(flow_run.parameters, default=str),  # the job, as the UI shows the run
    ]
    leaks = [text[:300] for text in seen if declared in text or by_name in text]
    assert leaks == []


@pytest.mark.parametrize(
    ("first_attempt", "category", "launches"), FIRST_FAILURES, ids=FIRST_FAILURE_IDS
)
def test_retry_infrastructure_failures_retries_only_what_retrying_can_fix(
    pf, tmp_path, first_attempt: str, category: str, launches: int
) -> None:
    from prefect import task

    from prefect_anylaunch import retry_infrastructure_failures

    marker = tmp_path / "marker"
    app = pf.py_app("flaky", FAILS_ONCE.format(first=first_attempt))
    for role in app["roles"]:
        role.setdefault("env", {})["AL_TEST_MARKER"] = str(marker)

    @task(retries=2, retry_delay_seconds=0, retry_condition_fn=retry_infrastructure_failures)
    def launch_and_wait() -> dict:
        job = AnylaunchJob(app=app, poll_interval_s=0.2)
        return wait_for_app.fn(launch_app.fn(job), job)

    @flow
    def flaky_flow() -> dict:
        return launch_and_wait()

    state = flaky_flow(return_state=True)
    apps = pf.launched_apps()
    assert len(apps) == launches
    assert state.is_completed() == (launches == 2)
    if launches == 1:
        error = state.result(raise_on_failure=False)
        assert isinstance(error, AnylaunchAppFailedError)
        assert error.failure_category == category
