"""The blocks on real Prefect: save/load with secrets, registration from the entry point,
validation, and the sync and async JobRun variants."""

import asyncio
import hashlib
import json
import sys
import uuid
from pathlib import Path

import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from pydantic import ValidationError

import anylaunch.specs as specs
from anylaunch.specs.api import AppState
from anylaunch.specs.errors import InvalidSpecError, MalformedAppHandleException
from prefect_anylaunch import (
    AnylaunchAppTimeoutError,
    AnylaunchJob,
    AnylaunchJobRun,
    AnylaunchSchedulerSettings,
    run_app,
)

SLEEPER = "import time; print('started', flush=True); time.sleep(60)"


@pytest.mark.engine_matrix
def test_block_round_trip_keeps_the_secret_out_of_logs_and_artifacts(pf, tmp_path: Path) -> None:
    secret = f"tok-{uuid.uuid4().hex}"
    secret_log_dir = tmp_path / f"logs-{secret}"  # a secret run option: where logs go
    suffix = uuid.uuid4().hex[:8]
    settings = AnylaunchSchedulerSettings(
        cfg={"cancel_grace_s": 1.0},
        secret_cfg={"log_dir": str(secret_log_dir)},
        # a name local_cwd does not recognise as secret: masking must not depend on names
        secret_env={"OPENER": secret},
    )
    settings.save(f"shared-{suffix}")
    code = (
        "import hashlib, os; v = os.environ['OPENER'];"
        " print('sha', hashlib.sha256(v.encode()).hexdigest()); print('verbatim', v)"
    )
    AnylaunchJob(app=pf.py_app("secretive", code), settings=settings, poll_interval_s=0.2).save(
        f"job-{suffix}"
    )

    loaded = AnylaunchJob.load(f"job-{suffix}")
    assert loaded.settings is not None
    assert loaded.settings.env() == {"OPENER": secret}
    assert loaded.run_cfg() == {"cancel_grace_s": 1.0, "log_dir": str(secret_log_dir)}
    assert loaded.build_app().roles[0].env["OPENER"] == secret

    state = run_app(f"job-{suffix}", return_state=True)  # loaded by name inside the flow

    assert state.is_completed(), state.message
    flow_run_id = state.state_details.flow_run_id
    logs = "\n".join(pf.run_logs(flow_run_id))
    assert f"sha {hashlib.sha256(secret.encode()).hexdigest()}" in logs  # the app got it
    assert "verbatim ***" in logs
    assert any(secret_log_dir.rglob("combined.log"))  # the secret cfg reached the scheduler
    artifacts = pf.run_artifacts(flow_run_id)
    assert {a.key for a in artifacts} >= {"anylaunch-secretive-request", "anylaunch-secretive-link"}
    with get_client(sync_client=True) as client:
        # as the UI and `prefect block inspect` show them
        stored = [
            client.read_block_document_by_name(
                f"shared-{suffix}", "anylaunch-scheduler-settings", include_secrets=False
            ),
            client.read_block_document_by_name(
                f"job-{suffix}", "anylaunch-job", include_secrets=False
            ),
        ]
    seen = [
        logs,
        *(json.dumps(a.data) for a in artifacts),
        json.dumps(pf.read_flow_run(flow_run_id).parameters),
        *(json.dumps(doc.data, default=str) for doc in stored),
    ]
    leaks = [text[:200] for text in seen if secret in text]
    assert leaks == []


@pytest.mark.engine_matrix
def test_blocks_register_from_the_entry_point(pf) -> None:
    from prefect.plugins import load_prefect_collections

    import prefect_anylaunch

    assert load_prefect_collections()["prefect_anylaunch"] is prefect_anylaunch
    with get_client(sync_client=True) as client:
        # the server imported the collection and registered its blocks when it started
        block_type = client.read_block_type_by_slug("anylaunch-job")
        client.delete_block_type(block_type.id)

    out = pf.run_python(["-m", "prefect", "block", "register", "-m", "prefect_anylaunch"])

    assert out.returncode == 0, out.stdout + out.stderr
    assert "Anylaunch Job" in out.stdout and "Anylaunch Scheduler Settings" in out.stdout
    with get_client(sync_client=True) as client:
        client.read_block_type_by_slug("anylaunch-job")
        schema = client.get_most_recent_block_schema_for_block_type(
            client.read_block_type_by_slug("anylaunch-scheduler-settings").id
        )
    assert schema is not None
    assert {"secret_cfg.*", "secret_env.*"} <= set(schema.fields["secret_fields"])


@pytest.mark.parametrize(
    "fields, expected",
    [
        ({"component": "utils.echo", "app": "name: a"}, "set only one"),
        (
            {"app": {"name": "a", "roles": [{"name": "r", "image": ".", "entrypont": "x"}]}},
            "Did you mean 'entrypoint'",
        ),
        ({"app": "name: [oops"}, "is not valid YAML"),
        (
            {"scheduler": "kubernetes", "settings": AnylaunchSchedulerSettings()},
            "differs from the settings block's scheduler 'local_cwd'",
        ),
        ({"poll_interval_s": 0}, "poll_interval_s"),
        ({"run_timeout_s": -1}, "run_timeout_s"),
        ({"startup_timeout_s": float("inf")}, "AnylaunchJob.startup_timeout_s"),
        ({"poll_interval_s": float("inf")}, "AnylaunchJob.poll_interval_s"),
        ({"log_stream": "both"}, "log_stream"),
    ],
)
def test_a_bad_job_is_refused_when_it_is_built(fields, expected) -> None:
    with pytest.raises(ValidationError, match=expected):
        AnylaunchJob(**fields)


def test_bad_settings_and_handles_are_refused() -> None:
    with pytest.raises(ValidationError, match="not both"):
        AnylaunchSchedulerSettings(cfg={"log_dir": "/a"}, secret_cfg={"log_dir": "/b"})
    with pytest.raises(ValidationError, match="environment variable name"):
        AnylaunchSchedulerSettings(secret_env={"A=B": "x"})
    with pytest.raises(InvalidSpecError, match="nothing to launch"):
        AnylaunchJob().dryrun()
    with pytest.raises(MalformedAppHandleException):
        AnylaunchJobRun(AnylaunchJob(), "not-a-handle")


def test_an_appdef_is_stored_as_data_and_dry_runs_offline() -> None:
    app = specs.AppDef(
        "typed",
        [
            specs.Role(
                "w",
                image=".",
                entrypoint="echo",
                args=["hi"],
                resource=specs.resource(h="cpu.small"),
            )
        ],
    )
    job = AnylaunchJob(app=app)

    assert isinstance(job.app, dict)
    assert job.build_app() == app
    info = job.dryrun()  # no Prefect server, no launch
    assert "echo hi" in str(info)
    assert "echo hi" in job.dryrun_markdown(info)


@pytest.mark.engine_matrix
def test_sync_variants_work_outside_any_flow(pf) -> None:
    job = AnylaunchJob(app=pf.py_app("plain", "print('hello')"), poll_interval_s=0.2)

    run = job.trigger()
    run.wait_for_completion()

    assert run.fetch_result()["state"] == "SUCCEEDED"
    assert run.status().state == AppState.SUCCEEDED
    sleeper = AnylaunchJob(app=pf.py_app("sleeper", SLEEPER)).trigger()
    pf.wait_for_state(sleeper.app_handle, AppState.RUNNING)
    sleeper.cancel()
    pf.wait_for_state(sleeper.app_handle, AppState.CANCELLED)


@pytest.mark.engine_matrix
def test_async_variants_in_an_async_flow(pf) -> None:
    token = uuid.uuid4().hex
    job = AnylaunchJob(app=pf.py_app("async-hello", f"print('{token}')"), poll_interval_s=0.2)
    slow = AnylaunchJob(app=pf.py_app("async-slow", SLEEPER), poll_interval_s=0.2, run_timeout_s=1)
    sleeper = AnylaunchJob(app=pf.py_app("async-sleeper", SLEEPER), poll_interval_s=0.2)

    @flow
    async def lifecycle() -> tuple:
        run = await job.trigger()  # dispatched to atrigger in async code
        await run.wait_for_completion()
        result = await run.fetch_result()
        timed = await slow.atrigger()
        try:
            await timed.await_for_completion()
        except AnylaunchAppTimeoutError as e:
            timeout_error = e
        stopped = await sleeper.atrigger()
        await stopped.acancel()
        return result, timeout_error, stopped.app_handle

    state = asyncio.run(lifecycle(return_state=True))

    assert state.is_completed(), state.message
    result, timeout_error, stopped = state.result()
    assert result["state"] == "SUCCEEDED"
    assert token in "\n".join(pf.run_logs(state.state_details.flow_run_id))
    assert timeout_error.cancelled
    pf.wait_for_state(timeout_error.app_handle, AppState.CANCELLED)
    pf.wait_for_state(stopped, AppState.CANCELLED)


def test_the_collection_imports_no_other_orchestrator_or_backend_sdk() -> None:
    import subprocess

    code = (
        "import sys, prefect_anylaunch;"
        " print([m for m in ('airflow', 'dagster', 'kubernetes', 'boto3', 'botocore', 'docker')"
        " if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_misspelt_block_field_is_an_error_with_a_suggestion() -> None:
    from anylaunch.specs.errors import InvalidSpecError
    from prefect_anylaunch import AnylaunchJob, AnylaunchSchedulerSettings

    with pytest.raises(InvalidSpecError, match="Did you mean 'scheduler'") as err:
        AnylaunchJob(sheduler="kubernetes")
    assert err.value.field == "AnylaunchJob.sheduler"
    with pytest.raises(InvalidSpecError, match="secret_env") as err:
        AnylaunchSchedulerSettings(secret_envv={"DB_URL": "hunter2-s3cr3t"})
    assert "hunter2" not in str(err.value)


def test_a_typo_in_a_name_is_refused_with_a_suggestion() -> None:
    with pytest.raises(
        ValidationError, match=r"AnylaunchJob\.component='utils\.ecoh'.*'utils\.echo'"
    ):
        AnylaunchJob(component="utils.ecoh")
    with pytest.raises(
        ValidationError, match=r"Settings\.scheduler='slurmm'.*Did you mean 'slurm'"
    ):
        AnylaunchSchedulerSettings(scheduler="slurmm")
    AnylaunchJob(component="path/to/components.py:train")  # a file is read at launch


@pytest.mark.engine_matrix
def test_a_saved_document_with_a_typo_is_refused_when_loaded(pf) -> None:
    suffix = uuid.uuid4().hex[:8]
    # written without validation, as an older version or the API could have stored it
    AnylaunchJob.model_construct(component="utils.ecoh").save(f"typo-{suffix}")
    # Prefect raises "failed validation" from the validation error, which names the field
    with pytest.raises(RuntimeError, match="failed validation") as err:
        AnylaunchJob.load(f"typo-{suffix}")
    cause = err.value.__cause__
    assert isinstance(cause, ValidationError) and "Did you mean 'utils.echo'" in str(cause)
    secret = f"tok-{uuid.uuid4().hex}"
    bad_env = AnylaunchSchedulerSettings.model_construct(
        scheduler="local_cwd", secret_env={"HF TOKEN": secret}
    )
    bad_env.save(f"typo-env-{suffix}")
    with pytest.raises(RuntimeError, match="failed validation") as err:
        AnylaunchSchedulerSettings.load(f"typo-env-{suffix}")
    cause = err.value.__cause__
    assert isinstance(cause, ValidationError) and "secret_env='HF***'" in str(cause)
    assert secret not in str(cause)


@pytest.mark.engine_matrix
def test_a_wait_ends_with_the_app_not_at_the_next_poll(pf) -> None:
    """With a 10-minute poll interval, both waits end within moments of the app: the
    scheduler's change feed (inotify on local_cwd) wakes them. Without it each would sleep
    out the interval."""
    import time

    token = uuid.uuid4().hex
    code = f"import time; time.sleep(1); print('{token}', flush=True)"
    job = AnylaunchJob(app=pf.py_app("feed-woken", code), poll_interval_s=600)

    started = time.monotonic()
    run = job.trigger()
    run.wait_for_completion()
    sync_s = time.monotonic() - started
    assert run.fetch_result()["state"] == "SUCCEEDED"

    async def waits() -> float:
        started = time.monotonic()
        arun = await job.atrigger()
        await arun.await_for_completion()
        assert (await arun.fetch_result())["state"] == "SUCCEEDED"
        return time.monotonic() - started

    async_s = asyncio.run(waits())
    # far below the 600 s a missed wake-up would cost, on any machine
    assert sync_s < 300 and async_s < 300, (sync_s, async_s)
