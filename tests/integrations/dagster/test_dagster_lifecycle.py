"""The Dagster driver of the core lifecycle policy, on real in-process runs and real apps:
one event-log record per app line, secrets nowhere, a failure that says why (exit code and
stderr tail), and the timeouts on a job the real Slurm cluster holds pending (``--begin``).

The poll-error and fault-injection rows are the lifecycle matrix's (test_lifecycle_matrix.py).
"""

import re
import sys
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import dagster as dg
import pytest

from anylaunch.runner import get_runner
from anylaunch.specs import AppDef, AppState, Resource, Role
from dagster_anylaunch import AnylaunchResource, build_anylaunch_op
from tests.schedulers.slurm.cluster import slurm_cluster as slurm_cluster  # a fixture

UserLogs = Callable[[dg.DagsterInstance, str], List[str]]


# also run in each engine version's own environment (scripts/engine_envs.sh)
pytestmark = pytest.mark.engine_matrix


def python_app(name: str, code: str, env: Optional[Dict[str, str]] = None) -> AppDef:
    role = Role("main", image=".", entrypoint=sys.executable, args=["-c", code])
    role.env.update(env or {})
    return AppDef(name, [role])


def run_op(
    op_def: dg.OpDefinition, resource: AnylaunchResource, instance: dg.DagsterInstance
) -> dg.ExecuteInProcessResult:
    @dg.job(name=f"{op_def.name}_job", resource_defs={"anylaunch": resource})
    def _job() -> None:
        op_def()

    return _job.execute_in_process(instance=instance, raise_on_error=False)


def failure_of(result: dg.ExecuteInProcessResult, node: str) -> Any:
    """The step's dagster.Failure data (description, metadata)."""
    failure = result.failure_data_for_node(node)
    assert failure is not None and failure.user_failure_data is not None, failure
    return failure.user_failure_data


def test_a_refused_launch_logs_the_request_it_refused_and_fails_the_step(
    instance: dg.DagsterInstance, user_logs: UserLogs, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a real refusal: no Docker engine answers at this socket
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/anylaunch-test/docker.sock")
    app = AppDef("refused", [Role("main", image="busybox:latest", entrypoint="echo")])
    resource = AnylaunchResource(scheduler="local_docker")
    result = run_op(build_anylaunch_op("refused", app), resource, instance)

    assert not result.success
    data = failure_of(result, "refused")
    assert data.metadata["reason"].value == "launch"
    assert data.description.startswith("could not launch the app: cannot reach the local_docker")
    logs = user_logs(instance, result.run_id)
    assert [m for m in logs if m.startswith("anylaunch request for scheduler local_docker:")]
    assert not [m for m in logs if m.startswith("launched ")]


# --- one record per line ---------------------------------------------------------------------

FIFTY_LINES = "for i in range(50): print(f'line{i}', flush=True)"


def test_every_app_line_is_one_event_log_record(
    instance: dg.DagsterInstance, user_logs: UserLogs
) -> None:
    @dg.op
    def fifty(context: dg.OpExecutionContext, anylaunch: AnylaunchResource) -> List[str]:
        return list(anylaunch.run(context, python_app("fifty", FIFTY_LINES)).last_log_lines)

    result = run_op(fifty, AnylaunchResource(poll_interval_s=0.2, log_tail_lines=5), instance)

    assert result.success
    logs = user_logs(instance, result.run_id)
    app_records = [m for m in logs if re.match(r"main/\d+ ", m)]
    # one record each, in order, none merged with another (no record holds two lines)
    assert app_records == [f"main/0 line{i}" for i in range(50)], logs
    assert [m for m in logs if "main/0 line" in m] == app_records
    # the run's last lines come from the same buffer (its tail, log_tail_lines long)
    assert result.output_for_node("fifty") == [f"main/0 line{i}" for i in range(45, 50)]


# --- secrets ---------------------------------------------------------------------------------

LEAKY_APP = """\
import os, sys
for name in ("CONN_STRING", "DB_PASSWORD", "HF_TOKEN"):
    print(name, "=", os.environ[name], flush=True)
    print(name, "is", os.environ[name], file=sys.stderr, flush=True)
sys.exit(2)
"""


def test_secret_values_never_reach_the_event_log_metadata_or_failure(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch, user_logs: UserLogs
) -> None:
    """Three ways a value is secret: declared in secret_env (an EnvVar, a name no pattern
    matches), a secret-looking name in the resource's env, and one in the app's own env."""
    declared, by_name, in_app = "conn-0b7f3c-declared", "pw-8d1e-by-name", "hf-5a2c-in-app"
    monkeypatch.setenv("TEST_CONN_STRING", declared)
    resource = AnylaunchResource(
        poll_interval_s=0.2,
        env={"DB_PASSWORD": by_name},
        secret_env={"CONN_STRING": dg.EnvVar("TEST_CONN_STRING")},
    )
    app = python_app("leaky", LEAKY_APP, env={"HF_TOKEN": in_app})

    result = run_op(build_anylaunch_op("leaky", app), resource, instance)

    assert not result.success
    logs = user_logs(instance, result.run_id)
    # the app got every value (it printed them), the log shows them masked
    for name in ("CONN_STRING", "DB_PASSWORD", "HF_TOKEN"):
        assert f"main/0 {name} = ***" in logs, logs
    data = failure_of(result, "leaky")
    assert data.metadata["reason"].value == "failed"
    assert "HF_TOKEN is ***" in data.description
    everything = [dg.serialize_value(entry) for entry in instance.all_logs(result.run_id)]
    everything += [data.description, *(str(v.value) for v in data.metadata.values())]
    for secret in (declared, by_name, in_app):
        assert not [text for text in everything if secret in text], secret


def test_the_resources_repr_never_shows_a_secret_value(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "tok-4e9a1b-resolved"
    monkeypatch.setenv("TEST_API_SECRET", secret)
    resource = AnylaunchResource(
        env={"DB_PASSWORD": "pw-in-env-77", "LR": "0.1"},
        secret_env={"CONN": dg.EnvVar("TEST_API_SECRET"), "PLAIN_LOOKING": "literal-3c5d"},
    )

    @dg.op
    def show(anylaunch: AnylaunchResource) -> List[str]:
        # the resource as the op sees it: initialized, its EnvVar resolved
        assert anylaunch.secret_env["CONN"] == secret
        return [repr(anylaunch), str(anylaunch)]

    result = run_op(show, resource, instance)
    assert result.success
    initialized = resource.process_config_and_initialize()
    shown = [repr(resource), str(resource), repr(initialized), *result.output_for_node("show")]
    for text in shown:
        for value in (secret, "pw-in-env-77", "literal-3c5d"):
            assert value not in text, text
        assert "'LR': '0.1'" in text and "'CONN': '***'" in text, text


def test_a_bad_secret_env_value_is_rejected_without_quoting_it() -> None:
    with pytest.raises(ValueError, match="secret_env") as raised:
        AnylaunchResource(secret_env={"API_TOKEN": 9876543210})  # type: ignore[dict-item]
    assert "9876543210" not in str(raised.value)


# --- a failure says why ----------------------------------------------------------------------

FAILING_WITH_STDERR = """\
import sys
print("loading data", flush=True)
print("warning: retrying the download", file=sys.stderr, flush=True)
print("root cause: disk /scratch is full", file=sys.stderr, flush=True)
sys.exit(5)
"""


def test_a_failed_apps_failure_holds_the_exit_code_and_stderr_tail(
    instance: dg.DagsterInstance, launched_apps: Callable[[], List[Any]]
) -> None:
    op_def = build_anylaunch_op("broken", python_app("broken", FAILING_WITH_STDERR))
    result = run_op(op_def, AnylaunchResource(poll_interval_s=0.2), instance)

    assert not result.success
    (app,) = launched_apps()
    assert app.state == AppState.FAILED
    data = failure_of(result, "broken")
    assert data.metadata["reason"].value == "failed"
    assert data.metadata["final_state"].value == "FAILED"
    assert data.metadata["exit_code"].value == 5
    assert data.metadata["stderr_tail"].value.splitlines()[-1] == (
        "root cause: disk /scratch is full"
    )
    # the description is the core failure summary: headline, exit code, stderr, last lines
    description = data.description
    assert description.startswith(f"anylaunch app {app.app_handle} ended FAILED")
    assert "exit code: 5" in description
    assert "last stderr:\n" in description and "  root cause: disk /scratch is full" in description
    assert "last log lines:\n" in description and "main/0 loading data" in description
    assert "main/0 loading data" in data.metadata["last_log_lines"].value.splitlines()


# --- bookkeeping writes are best effort -------------------------------------------------------


def test_a_run_tag_write_that_keeps_failing_is_a_warning_not_a_failed_step(
    instance: dg.DagsterInstance, user_logs: UserLogs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SQLite instance under load says "database table is locked" on the run-tag write
    after the app is launched: the step still watches the app to its end."""
    import sqlite3

    tries: List[str] = []

    def locked(run_id: str, new_tags: Dict[str, str]) -> None:
        tries.append(run_id)
        raise sqlite3.OperationalError("database table is locked: runs")

    monkeypatch.setattr(instance, "add_run_tags", locked)

    @dg.op
    def tagged(context: dg.OpExecutionContext, anylaunch: AnylaunchResource) -> str:
        return anylaunch.run(context, python_app("tagged", "print('done')")).handle

    result = run_op(tagged, AnylaunchResource(poll_interval_s=0.2), instance)

    assert result.success, result.all_events
    handle = result.output_for_node("tagged")
    assert get_runner().status(handle).state == AppState.SUCCEEDED
    assert len(tries) >= 2  # it was retried before giving up
    logs = user_logs(instance, result.run_id)
    assert any("could not tag the run" in m and "table is locked" in m for m in logs), logs
    assert "main/0 done" in logs


# --- timeouts on a job the Slurm cluster holds pending ----------------------------------------


@pytest.fixture
def slurm_session(slurm_cluster: object) -> Iterator[str]:
    """A session of this test's own on the real Slurm cluster; its apps are cancelled after
    the test (held jobs would otherwise wait an hour)."""
    session = f"dagster-{uuid.uuid4().hex[:8]}"
    yield session
    with get_runner(session) as runner:
        for app in runner.list("slurm"):
            if f"://{session}/" in app.app_handle and not app.state.is_terminal():
                runner.cancel(app.app_handle)


def held_app(name: str) -> AppDef:
    role = Role(
        "main",
        image="",
        entrypoint="sh",
        args=["-c", "echo running; sleep 300"],
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    return AppDef(name, [role])


def told_at(logs: List[str], handle: str, state: str) -> Optional[int]:
    """Where the run log first tells that the app is in ``state``: its launch line (the
    state the launch saw) or the session's state line, once."""
    told = [
        i
        for i, m in enumerate(logs)
        if m.split("\n")[0] in (f"launched {handle}: {state}", f"anylaunch app {handle} is {state}")
        or m.split("\n")[0].startswith(f"launched {handle}: {state} (")
    ]
    assert len(told) <= 1, logs  # never told twice
    return told[0] if told else None


def slurm_state(session: str, handle: str) -> Optional[AppState]:
    with get_runner(session) as runner:
        status = runner.status(handle)
    return None if status is None else status.state


def test_startup_timeout_cancels_a_job_held_pending(
    slurm_session: str, tmp_path: Path, instance: dg.DagsterInstance, user_logs: UserLogs
) -> None:
    resource = AnylaunchResource(
        scheduler="slurm",
        session_name=slurm_session,
        # Slurm holds the job for an hour: it stays PENDING until it is cancelled
        cfg={"job_dir": str(tmp_path / "slurm-job"), "sbatch_args": ["--begin=now+3600"]},
        poll_interval_s=0.5,
        startup_timeout_s=3,
    )
    result = run_op(build_anylaunch_op("held", held_app("held")), resource, instance)

    assert not result.success
    data = failure_of(result, "held")
    handle = data.metadata["handle"].value
    assert data.metadata["reason"].value == "startup_timeout"
    assert data.description.startswith(
        f"anylaunch app {handle} did not start (RUNNING) within 3s (it was PENDING)"
    )
    assert "startup_timeout_s" in data.description
    # cancelled before the step ended
    assert data.metadata["final_state"].value == "CANCELLED"
    assert slurm_state(slurm_session, handle) == AppState.CANCELLED
    assert told_at(user_logs(instance, result.run_id), handle, "PENDING") is not None


def test_run_timeout_counts_from_the_start_and_cancels(
    slurm_session: str, tmp_path: Path, instance: dg.DagsterInstance, user_logs: UserLogs
) -> None:
    """The job is held 8s, longer than the 3s run timeout: had the timeout counted from the
    launch, it would have fired while the job was PENDING."""
    resource = AnylaunchResource(
        scheduler="slurm",
        session_name=slurm_session,
        cfg={"job_dir": str(tmp_path / "slurm-job"), "sbatch_args": ["--begin=now+8"]},
        poll_interval_s=0.5,
        run_timeout_s=3,
    )
    result = run_op(build_anylaunch_op("late", held_app("late")), resource, instance)

    assert not result.success
    data = failure_of(result, "late")
    handle = data.metadata["handle"].value
    assert data.metadata["reason"].value == "run_timeout"
    assert data.description.startswith(
        f"anylaunch app {handle} did not finish within 3s (it was RUNNING)"
    ), data.description
    assert data.metadata["final_state"].value == "CANCELLED"
    assert slurm_state(slurm_session, handle) == AppState.CANCELLED
    logs = user_logs(instance, result.run_id)
    pending, running = told_at(logs, handle, "PENDING"), told_at(logs, handle, "RUNNING")
    assert pending is not None and running is not None, logs
    assert pending < running
    assert "main/0 running" in logs  # its line was streamed while it ran
