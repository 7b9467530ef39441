"""The op, the named-op factory and the asset factory on real in-process Dagster runs with
real local_cwd apps: logs stream into the run's event log while the app runs, a failing app
fails the step with metadata, a run timeout cancels the app, secrets stay out of the logs."""

import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import dagster as dg
import pytest

from anylaunch.runner import get_runner
from anylaunch.specs import AppDef, AppState, AppStatus, Role
from dagster_anylaunch import (
    AnylaunchOpConfig,
    AnylaunchResource,
    anylaunch_op,
    build_anylaunch_asset,
    build_anylaunch_op,
)
from dagster_anylaunch.ops import AnylaunchConfigError
from tests.integrations.flaky_apps import FAILS_ONCE, FIRST_FAILURE_IDS, FIRST_FAILURES

FAST = AnylaunchResource(poll_interval_s=0.2)


# also run in each engine version's own environment (scripts/engine_envs.sh)
pytestmark = pytest.mark.engine_matrix


def python_app(
    name: str, code: str, num_replicas: int = 1, env: Optional[Dict[str, str]] = None
) -> AppDef:
    role = Role(
        "main",
        image=".",
        entrypoint=sys.executable,
        args=["-c", code],
        num_replicas=num_replicas,
        env=dict(env or {}),
    )
    return AppDef(name, [role])


def one_op_job(op_def: dg.OpDefinition, resource: object = FAST) -> dg.JobDefinition:
    @dg.job(name=f"{op_def.name}_job", resource_defs={"anylaunch": resource})
    def _job() -> None:
        op_def()

    return _job


def entries_with(instance: dg.DagsterInstance, run_id: str, text: str) -> List[dg.EventLogEntry]:
    return [
        e for e in instance.all_logs(run_id) if e.dagster_event is None and text in e.user_message
    ]


#: Prints a line, then waits until the op has written both replicas' first lines into the run
#: log (marker files a run logger writes) before printing its last: the order proves the lines
#: were logged while the app ran, however loaded the machine is.
STREAMING_APP = """\
import os, sys, time
print("early line", flush=True)
marks = [os.path.join({marks!r}, str(k)) for k in (0, 1)]
deadline = time.monotonic() + 120
while not all(map(os.path.exists, marks)):
    if time.monotonic() > deadline:
        sys.exit("the early lines never reached the run log while the app ran")
    time.sleep(0.05)
print("late line", flush=True)
"""


def marker_logger(marks: Path) -> dg.LoggerDefinition:
    """A run logger that notes (as the file ``marks/<k>``) when ``main/<k> early line`` is
    logged."""
    import logging

    class Marker(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            for k in (0, 1):
                if f"main/{k} early line" in record.getMessage():
                    (marks / str(k)).touch()

    @dg.logger
    def _marker(_init_context: dg.InitLoggerContext) -> logging.Logger:
        log = logging.Logger("anylaunch-test-marker", logging.INFO)
        log.addHandler(Marker())
        return log

    return _marker


def test_op_streams_the_apps_lines_into_the_run_log_as_they_are_written(
    instance: dg.DagsterInstance, launched_apps, user_logs, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    app = python_app("stream", STREAMING_APP.format(marks=str(marks)), num_replicas=2)
    op_def = build_anylaunch_op("stream", app)

    @dg.job(
        name="stream_job",
        resource_defs={"anylaunch": FAST},
        logger_defs={"marker": marker_logger(marks), "console": dg.colored_console_logger},
    )
    def stream_job() -> None:
        op_def()

    result = stream_job.execute_in_process(
        instance=instance, run_config={"loggers": {"marker": {}, "console": {}}}
    )

    # the app waited for its early lines to be in the run log before it ended
    assert result.success
    (app,) = launched_apps()
    status = result.output_for_node("stream")
    assert isinstance(status, AppStatus) and status.state == AppState.SUCCEEDED
    logs = user_logs(instance, result.run_id)
    for k in (0, 1):
        early = entries_with(instance, result.run_id, f"main/{k} early line")
        late = entries_with(instance, result.run_id, f"main/{k} late line")
        assert len(early) == 1 and len(late) == 1, logs
        assert early[0].timestamp < late[0].timestamp
    # one entry tells the launch, its state then and the request (each entry is a row)
    (launched_at,) = [i for i, m in enumerate(logs) if m.startswith(f"launched {app.app_handle}")]
    assert "\nanylaunch request for scheduler local_cwd:\n" in logs[launched_at]
    assert not any(m.startswith("anylaunch request") for m in logs)
    first_line_at = next(i for i, m in enumerate(logs) if "main/0 early line" in m)
    assert launched_at < first_line_at
    told = logs[launched_at].split("\n")[0].split(": ")[-1].split(" (")[0]
    assert told in AppState.__members__, logs[launched_at]
    assert f"anylaunch app {app.app_handle} is {told}" not in logs  # not told twice
    # the handle is on the output and in a run tag (visible in the UI while the app runs)
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    metadata = output.step_output_data.metadata
    assert metadata["handle"].value == app.app_handle
    assert metadata["final_state"].value == "SUCCEEDED"
    assert isinstance(metadata["ui_url"], dg.UrlMetadataValue)
    assert result.dagster_run.run_id == result.run_id
    run = instance.get_run_by_id(result.run_id)
    assert run is not None and run.tags["anylaunch/stream"] == app.app_handle


def test_anylaunch_op_launches_the_component_its_config_names(
    instance: dg.DagsterInstance, launched_apps, user_logs
) -> None:
    config = AnylaunchOpConfig(
        component="utils.echo", component_args=["--msg", "hello from config"]
    )
    result = one_op_job(anylaunch_op).execute_in_process(
        instance=instance, run_config=dg.RunConfig(ops={"anylaunch_op": config})
    )
    assert result.success
    (app,) = launched_apps()
    assert app.name == "echo" and app.state == AppState.SUCCEEDED
    assert "echo/0 hello from config" in user_logs(instance, result.run_id)


def test_component_arguments_can_be_given_by_name_as_in_airflow_and_prefect(
    instance: dg.DagsterInstance, launched_apps, user_logs
) -> None:
    by_name = build_anylaunch_op("by_name", component="utils.echo", component_args={"msg": "x"})
    in_config = AnylaunchOpConfig(component="utils.echo", component_params={"msg": "from params"})
    for op_def, run_config, line in (
        (by_name, None, "echo/0 x"),
        (anylaunch_op, dg.RunConfig(ops={"anylaunch_op": in_config}), "echo/0 from params"),
    ):
        result = one_op_job(op_def).execute_in_process(instance=instance, run_config=run_config)
        assert result.success
        assert line in user_logs(instance, result.run_id)
    assert [a.state for a in launched_apps()] == [AppState.SUCCEEDED] * 2


FAILING_APP = """\
import sys
for i in range(80):
    print(f"working {i}", flush=True)
print("about to fail", flush=True)
sys.exit(3)
"""


def test_a_failing_app_fails_the_step_with_metadata(
    instance: dg.DagsterInstance, launched_apps
) -> None:
    op_def = build_anylaunch_op("doomed", python_app("doomed", FAILING_APP))
    result = one_op_job(op_def).execute_in_process(instance=instance, raise_on_error=False)

    assert not result.success
    (app,) = launched_apps()
    assert app.state == AppState.FAILED
    failure = result.failure_data_for_node("doomed")
    assert failure is not None and failure.user_failure_data is not None
    assert app.app_handle in (failure.user_failure_data.description or "")
    metadata = failure.user_failure_data.metadata
    assert metadata["handle"].value == app.app_handle
    assert metadata["final_state"].value == "FAILED"
    assert isinstance(metadata["ui_url"], dg.UrlMetadataValue)
    assert metadata["ui_url"].value.startswith("file://")
    assert "3" in metadata["error"].value  # the exit code
    tail = metadata["last_log_lines"].value.splitlines()
    assert tail[-1] == "main/0 about to fail"
    assert len(tail) == FAST.log_tail_lines  # the last lines, not all 81


def test_the_asset_factory_materializes_with_handle_state_url_and_duration(
    launched_apps,
) -> None:
    asset_def = build_anylaunch_asset(
        "greeting", component="utils.echo", component_args=["--msg", "hi"], group_name="demo"
    )
    result = dg.materialize([asset_def], resources={"anylaunch": FAST})

    assert result.success
    (app,) = launched_apps()
    (materialization,) = result.asset_materializations_for_node("greeting")
    metadata = materialization.metadata
    assert metadata["handle"].value == app.app_handle
    assert metadata["final_state"].value == "SUCCEEDED"
    assert isinstance(metadata["ui_url"], dg.UrlMetadataValue)
    assert 0 < metadata["duration_s"].value < 60
    assert metadata["reattached"].value is False


def test_a_failing_asset_fails_with_metadata(launched_apps) -> None:
    asset_def = build_anylaunch_asset("broken", python_app("broken", FAILING_APP))
    result = dg.materialize([asset_def], resources={"anylaunch": FAST}, raise_on_error=False)
    assert not result.success
    (app,) = launched_apps()
    failure = result.failure_data_for_node("broken")
    assert failure is not None and failure.user_failure_data is not None
    assert failure.user_failure_data.metadata["handle"].value == app.app_handle


def test_a_run_timeout_cancels_the_app_and_fails_the_step(
    instance: dg.DagsterInstance, launched_apps
) -> None:
    resource = AnylaunchResource(poll_interval_s=0.2, run_timeout_s=1)
    op_def = build_anylaunch_op("sleepy", python_app("sleepy", "import time; time.sleep(120)"))
    result = one_op_job(op_def, resource).execute_in_process(
        instance=instance, raise_on_error=False
    )
    assert not result.success
    (app,) = launched_apps()
    assert app.state == AppState.CANCELLED  # cancelled before the step ended
    failure = result.failure_data_for_node("sleepy")
    assert failure is not None and failure.user_failure_data is not None
    assert "did not finish within 1s (it was RUNNING)" in (
        failure.user_failure_data.description or ""
    )
    assert "run_timeout_s" in (failure.user_failure_data.description or "")
    assert failure.user_failure_data.metadata["reason"].value == "run_timeout"
    assert failure.user_failure_data.metadata["final_state"].value == "CANCELLED"


SECRET_APP = """\
import os, sys
print("token:", os.environ["API_TOKEN"], flush=True)
open(sys.argv[1], "w").write(os.environ["API_TOKEN"] + " " + os.environ["PLAIN"])
"""


def test_secret_env_reaches_the_app_but_never_the_logs(
    tmp_path: Path, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch, user_logs
) -> None:
    secret = "hunter2-very-secret"
    monkeypatch.setenv("TEST_API_TOKEN", secret)
    seen = tmp_path / "seen"
    app = python_app("secretive", SECRET_APP)
    app.roles[0].args.append(str(seen))
    resource = AnylaunchResource(
        poll_interval_s=0.2,
        env={"PLAIN": "visible"},
        secret_env={"API_TOKEN": dg.EnvVar("TEST_API_TOKEN")},
    )
    result = one_op_job(build_anylaunch_op("secretive", app), resource).execute_in_process(
        instance=instance
    )
    assert result.success
    assert seen.read_text() == f"{secret} visible"
    logs = "\n".join(user_logs(instance, result.run_id))
    assert "main/0 token: ***" in logs
    assert secret not in logs


def test_the_scheduler_can_come_from_an_env_var(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch, launched_apps
) -> None:
    monkeypatch.setenv("TEST_ANYLAUNCH_SCHEDULER", "local_cwd")
    resource = AnylaunchResource(
        scheduler=dg.EnvVar("TEST_ANYLAUNCH_SCHEDULER"), poll_interval_s=0.2
    )
    op_def = build_anylaunch_op("from_env", component="utils.echo")
    assert one_op_job(op_def, resource).execute_in_process(instance=instance).success
    assert len(launched_apps()) == 1


# --- bad config fails clearly, launches nothing and is not retried --------------------------


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # typos in names: run config is checked as the step builds the config (in Python,
        # AnylaunchOpConfig(...) itself refuses them)
        ({"component": "utils.echo", "scheduler": "lokal_cwd"}, "Did you mean 'local_cwd'?"),
        (AnylaunchOpConfig(component="utils.echo", cfg={"log_dirr": "/tmp"}), "log_dir"),
        (AnylaunchOpConfig(), "component=None is invalid: there is no app to launch"),
        (AnylaunchOpConfig(component="utils.echo", component_args=["--nope"]), "--nope"),
        ({"component": "utils.no_such_component"}, "no_such_component"),
        (
            AnylaunchOpConfig(
                component="utils.echo", component_args=["--msg", "a"], component_params={"msg": "b"}
            ),
            "give the arguments one way",
        ),
        (AnylaunchOpConfig(component="utils.echo", component_params={"msgg": "b"}), "msgg"),
    ],
    ids=[
        "unknown-scheduler",
        "unknown-run-option",
        "no-app",
        "bad-component-args",
        "unknown-component",
        "args-given-twice",
        "unknown-component-param",
    ],
)
def test_bad_op_config_fails_the_step_clearly_without_launching_or_retrying(
    config: AnylaunchOpConfig | dict, expected: str, instance: dg.DagsterInstance, launched_apps
) -> None:
    op_def = build_anylaunch_op("configured", retry_policy=dg.RetryPolicy(max_retries=2))
    if isinstance(config, dict):
        run_config: Any = {"ops": {"configured": {"config": config}}}
        with pytest.raises(AnylaunchConfigError, match=expected):
            AnylaunchOpConfig(**config)
    else:
        run_config = dg.RunConfig(ops={"configured": config})
    result = one_op_job(op_def).execute_in_process(
        instance=instance, run_config=run_config, raise_on_error=False
    )
    assert not result.success
    failure = result.failure_data_for_node("configured")
    assert failure is not None and failure.user_failure_data is not None
    assert expected in (failure.user_failure_data.description or "")
    assert launched_apps() == []
    assert not [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]


def test_config_of_the_wrong_shape_is_rejected_before_the_run(
    instance: dg.DagsterInstance, launched_apps
) -> None:
    run_config = {"ops": {"anylaunch_op": {"config": {"component_args": "--msg hi"}}}}
    with pytest.raises(dg.DagsterInvalidConfigError, match="component_args"):
        one_op_job(anylaunch_op).execute_in_process(instance=instance, run_config=run_config)
    assert launched_apps() == []


def test_a_resource_that_is_not_an_anylaunch_resource_fails_clearly(
    instance: dg.DagsterInstance,
) -> None:
    op_def = build_anylaunch_op("misconfigured", component="utils.echo")
    result = one_op_job(
        op_def, resource=dg.ResourceDefinition.hardcoded_resource("nope")
    ).execute_in_process(instance=instance, raise_on_error=False)
    failure = result.failure_data_for_node("misconfigured")
    assert failure is not None and failure.user_failure_data is not None
    assert "must be an AnylaunchResource" in (failure.user_failure_data.description or "")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"poll_interval_s": 0}, "poll_interval_s"),
        ({"startup_timeout_s": -1}, "startup_timeout_s"),
        ({"run_timeout_s": float("nan")}, "run_timeout_s"),
        ({"startup_timeout_s": float("inf")}, "startup_timeout_s=inf is invalid"),
        ({"cancel_timeout_s": 0}, "cancel_timeout_s"),
        ({"log_tail_lines": -1}, "log_tail_lines"),
        ({"scheduler": "lokal_cwd"}, "Did you mean 'local_cwd'"),
    ],
)
def test_bad_resource_settings_fail_naming_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        AnylaunchResource(**kwargs)


def test_bad_resource_run_config_fails_the_run_naming_the_field(
    instance: dg.DagsterInstance,
) -> None:
    job = one_op_job(anylaunch_op, AnylaunchResource.configure_at_launch())
    result = job.execute_in_process(
        instance=instance,
        run_config={"resources": {"anylaunch": {"config": {"poll_interval_s": -5}}}},
        raise_on_error=False,
    )
    assert not result.success
    (init_failure,) = [
        e.dagster_event
        for e in instance.all_logs(result.run_id)
        if e.dagster_event is not None
        and e.dagster_event.event_type_value == "RESOURCE_INIT_FAILURE"
    ]
    assert "poll_interval_s=-5.0 is invalid" in init_failure.event_specific_data.error.message


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"app": "utils.echo"}, "app"),
        (
            {
                "component": "utils.echo",
                "app": AppDef("a", [Role("r", image=".", entrypoint="true")]),
            },
            "app/component",
        ),
        ({"component_args": ["--msg", "hi"]}, "component_args"),
        ({"component": "utils.echo", "component_args": "--msg hi"}, "component_args"),
        ({"component": "utils.echo", "component_args": {1: "hi"}}, "component_args"),
        ({"component": "utils.echo", "resource_key": "not a key"}, "resource_key"),
    ],
)
def test_the_factories_reject_bad_arguments_naming_the_field(kwargs: dict, field: str) -> None:
    from anylaunch.specs import InvalidSpecError

    for factory in (build_anylaunch_op, build_anylaunch_asset):
        with pytest.raises(InvalidSpecError, match=f"^{field}="):
            factory("x", **kwargs)


def test_a_custom_resource_key(instance: dg.DagsterInstance, launched_apps) -> None:
    op_def = build_anylaunch_op(
        "keyed",
        component="utils.echo",
        component_args=["--msg", "keyed"],
        resource_key="gpu_cluster",
    )

    @dg.job(resource_defs={"gpu_cluster": FAST})
    def keyed_job() -> None:
        op_def()

    assert keyed_job.execute_in_process(instance=instance).success
    assert len(launched_apps()) == 1


def test_the_resource_methods_one_at_a_time() -> None:
    resource = AnylaunchResource(poll_interval_s=0.2, env={"GREETING": "hi"})
    code = "import os, time; print(os.environ['GREETING'], flush=True); time.sleep(float(os.environ['S']))"
    info = resource.dryrun(python_app("methods", code, env={"S": "0"}))
    assert "GREETING=hi" in str(info)  # env reaches every role
    handle = resource.launch(python_app("methods", code, env={"S": "0"}))
    final = resource.wait(handle, timeout=60)
    assert final is not None and final.state == AppState.SUCCEEDED
    assert list(resource.log_lines(handle, "main")) == ["hi\n"]

    long_running = resource.launch(python_app("methods", code, env={"S": "300"}))
    status = resource.status(long_running)
    assert status is not None and not status.is_terminal()
    resource.cancel(long_running)
    final = resource.wait(long_running, timeout=60)
    assert final is not None and final.state == AppState.CANCELLED
    with get_runner("dagster") as runner:
        assert {a.app_handle for a in runner.list("local_cwd")} == {handle, long_running}


def test_the_resource_launches_components_by_name() -> None:
    resource = AnylaunchResource(poll_interval_s=0.2)
    handle = resource.launch("utils.echo", ["--msg", "by name"])
    assert handle.startswith("local_cwd://dagster/echo-")
    resource.wait(handle, timeout=60)
    assert list(resource.log_lines(handle, "echo")) == ["by name\n"]


CHATTY_FAILING_APP = """\
import os, sys
for i in range(50):
    print(f"line {i}", flush=True)
print("conn=" + os.environ["CONN_STRING"], flush=True)
sys.exit(4)
"""


def test_every_app_line_is_one_event_and_a_failure_says_why(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch, user_logs
) -> None:
    """One context.log record per app line (never merged), prefixed ``role/replica``; the
    Failure carries the reason, exit code and masked text; a declared secret (a name no
    built-in pattern matches) appears nowhere."""
    secret = "conn-string-0b7f3c"
    monkeypatch.setenv("TEST_CONN", secret)
    resource = AnylaunchResource(
        poll_interval_s=0.2, secret_env={"CONN_STRING": dg.EnvVar("TEST_CONN")}
    )
    op_def = build_anylaunch_op("chatty", python_app("chatty", CHATTY_FAILING_APP))
    result = one_op_job(op_def, resource).execute_in_process(
        instance=instance, raise_on_error=False
    )
    assert not result.success
    logs = user_logs(instance, result.run_id)
    assert [m for m in logs if m.startswith("main/0 line ")] == [
        f"main/0 line {i}" for i in range(50)
    ]
    assert "main/0 conn=***" in logs
    assert not any(secret in m for m in logs)
    failure = result.failure_data_for_node("chatty")
    assert failure is not None and failure.user_failure_data is not None
    data = failure.user_failure_data
    assert data.metadata["reason"].value == "failed"
    assert data.metadata["exit_code"].value == 4
    assert "exit code: 4" in (data.description or "")
    assert secret not in (data.description or "")
    assert all(secret not in str(v.value) for v in data.metadata.values())


@pytest.mark.parametrize(
    ("first_attempt", "category", "attempts"), FIRST_FAILURES, ids=FIRST_FAILURE_IDS
)
def test_only_infrastructure_failures_use_the_retry_policy(
    instance: dg.DagsterInstance,
    launched_apps,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    first_attempt: str,
    category: str,
    attempts: int,
) -> None:
    monkeypatch.setenv("AL_TEST_MARKER", str(tmp_path / "marker"))
    resource = AnylaunchResource(poll_interval_s=0.2, retry_only_infrastructure_failures=True)
    op_def = build_anylaunch_op(
        "flaky",
        python_app("flaky", FAILS_ONCE.format(first=first_attempt)),
        retry_policy=dg.RetryPolicy(max_retries=2),
    )
    result = one_op_job(op_def, resource).execute_in_process(
        instance=instance, raise_on_error=False
    )
    apps = launched_apps()
    assert len(apps) == attempts
    from anylaunch.runner.failures import failure_category

    with get_runner() as runner:
        first_status = runner.status(apps[0].app_handle)
    category_seen = failure_category(first_status)
    assert category_seen is not None and category_seen.value == category
    if attempts == 1:  # the step failed at once: its metadata names the category
        failure = result.failure_data_for_node("flaky")
        assert failure is not None and failure.user_failure_data is not None
        assert failure.user_failure_data.metadata["failure_category"].value == category
    assert result.success == (attempts == 2)


def test_a_step_ends_with_the_app_not_at_the_next_poll() -> None:
    """With a 10-minute poll interval, the step ends within moments of the app: the
    scheduler's change feed (inotify on local_cwd) wakes the wait, which still streams the
    lines. Without it the step would sleep out the interval."""
    import time

    code = "import time; time.sleep(1); print('woken line', flush=True)"
    op_def = build_anylaunch_op("feed_woken", python_app("feed-woken", code))
    job = one_op_job(op_def, AnylaunchResource(poll_interval_s=600))
    started = time.monotonic()
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(instance=instance)
        took = time.monotonic() - started
        assert result.success
        assert entries_with(instance, result.run_id, "woken line")
    assert took < 300, took  # far below the 600 s a missed wake-up would cost
