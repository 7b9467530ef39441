"""AnylaunchOperator on real Airflow (dag.test(), SQLite) and real local_cwd apps."""

import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest

from tests.schedulers.slurm.cluster import slurm_cluster as slurm_cluster  # a fixture


def test_a_failing_app_fails_the_task_with_its_message_and_last_lines(
    airflow: Any, apps: Callable[[], List[Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    dagrun = airflow.run(airflow.test_dag("operator_dags.py", "al_sync_fail"))
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"fail": "failed"}
    (app,) = apps()
    assert app.state.name == "FAILED"
    assert f"AnylaunchAppError: anylaunch app {app.app_handle} ended FAILED" in out
    # the core failure summary: the exit code and stderr tail the scheduler reported...
    summary = out[out.index("AnylaunchAppError: ") :]
    assert "\nexit code: 3\n" in summary
    assert "last stderr:\n  about to fail: the input is missing" in summary
    # ...and the last lines the app wrote (stderr included), each ``role/replica text``
    assert "last log lines:\n  worker/0 preparing the data" in summary
    assert "  worker/0 about to fail: the input is missing" in summary
    # one INFO record per state change, however many polls saw it
    assert out.count(f"anylaunch app {app.app_handle} is FAILED") == 1
    # the handle was on XCom before the wait, so it is there although the task failed
    assert airflow.xcoms(dagrun, "fail")["app_handle"] == app.app_handle


def test_deferred_run_streams_the_selected_replica_from_the_trigger(
    airflow: Any, apps: Callable[[], List[Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    dagrun = airflow.run(airflow.test_dag("operator_dags.py", "al_deferred_logs"))
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"count": "success"}
    for i in range(4):
        assert f"worker/1 tick {i}" in out
    assert "worker/0 tick" not in out  # log_replicas=[1]
    (app,) = apps()
    xcoms = airflow.xcoms(dagrun, "count")
    result = xcoms["return_value"]
    assert (result["app_handle"], result["state"]) == (app.app_handle, "SUCCEEDED")
    # the worker deferred at once, without asking local_cwd (which would have logged the
    # UI); the link is filled in from the last status when the task ends
    assert f"anylaunch app {app.app_handle} UI:" not in out
    assert xcoms["ui_url"].startswith("file://")
    assert airflow.app_link(airflow.test_dag("operator_dags.py", "al_deferred_logs"), dagrun,
                            "count") == xcoms["ui_url"]  # fmt: skip


def test_deferred_failure_fails_the_task_with_the_message(
    airflow: Any, apps: Callable[[], List[Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    dagrun = airflow.run(airflow.test_dag("operator_dags.py", "al_deferred_fail"))
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"fail": "failed"}
    (app,) = apps()
    summary = out[out.index(f"AnylaunchAppError: anylaunch app {app.app_handle} ended FAILED") :]
    assert "\nexit code: 3\n" in summary
    assert "last stderr:\n  about to fail: the input is missing" in summary
    assert "  worker/0 about to fail: the input is missing" in summary


def test_scheduler_and_cfg_come_from_the_anylaunch_connection(
    airflow: Any,
    apps: Callable[[], List[Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    log_dir = tmp_path / "conn-logs"
    monkeypatch.setenv("AL_TEST_LOG_DIR", str(log_dir))
    extra = {"scheduler": "local_cwd", "cfg": f"log_dir={log_dir},cancel_grace_s=1"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_ANYLAUNCH_TEST", json.dumps({"conn_type": "anylaunch", "extra": extra})
    )
    dagrun = airflow.run(airflow.test_dag("operator_dags.py", "al_conn_defaults"))
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"from_conn": "success"}
    (app,) = apps()
    assert app.app_handle.startswith("local_cwd://")
    # the connection's log_dir reached the scheduler: the logs are there
    assert (
        (log_dir / app.app_id / "python" / "0" / "combined.log")
        .read_text()
        .startswith("log dir is")
    )
    assert f"python/0 log dir is {log_dir}" in out


def test_templated_fields_are_rendered_and_typed(
    airflow: Any,
    apps: Callable[[], List[Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    log_dir = tmp_path / "templated-logs"
    monkeypatch.setenv("AIRFLOW_VAR_AL_LOG_DIR", str(log_dir))
    dagrun = airflow.run(airflow.test_dag("operator_dags.py", "al_templated_cfg"))
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"templated": "success"}
    (app,) = apps()
    assert app.name == "renamed-al-templated-cfg"
    assert "echo/0 echo from al_templated_cfg" in out and "echo/1 echo from al_templated_cfg" in out
    # the rendered log_dir reached the scheduler
    for k in (0, 1):
        combined = log_dir / app.app_id / "echo" / str(k) / "combined.log"
        assert combined.read_text() == "echo from al_templated_cfg\n"


@pytest.mark.parametrize("dag_id", ["al_templated_app", "al_templated_native"])
def test_jinja_inside_the_appdef_is_rendered(
    airflow: Any, apps: Callable[[], List[Any]], dag_id: str, capfd: pytest.CaptureFixture[str]
) -> None:
    dagrun = airflow.run(airflow.test_dag("operator_dags.py", dag_id))
    out = capfd.readouterr().out
    tasks = {"al_templated_app": ["app", "built"], "al_templated_native": ["app"]}[dag_id]
    assert airflow.states(dagrun) == dict.fromkeys(tasks, "success")
    launched = apps()
    assert sorted(app.name for app in launched) == [f"tpl-{dag_id.replace('_', '-')}"] * len(tasks)
    # a native 42 reaches the process as the text "42", like every other argument
    assert out.count("args ['hi', '42'] env run-hi") == len(tasks)
    assert "{{" not in " ".join(app.name for app in launched)


def test_dry_run_renders_templates_for_a_sample_logical_date(
    capsys: pytest.CaptureFixture[str], afc: Any
) -> None:
    import sys
    from datetime import datetime

    from airflow_anylaunch.exceptions import AnylaunchInputError
    from airflow_anylaunch.operators import AnylaunchOperator

    sys.path.insert(0, str(Path(__file__).parent / "dags"))
    try:
        import operator_dags
    finally:
        sys.path.pop(0)
    with afc.DAG("dry_dag", schedule=None, params={"word": "hi"}):
        op = AnylaunchOperator(
            task_id="app",
            app=operator_dags.templated_app(),
            scheduler="local_cwd",
            env={"DAY": "{{ ds }}"},
        )
        needs_var = AnylaunchOperator(
            task_id="var", component="utils.echo", env={"X": "{{ var.value.x }}"}
        )
    op.dry_run(logical_date=datetime(2026, 1, 2))
    out = capsys.readouterr().out
    assert "local_cwd app tpl-dry-dag-" in out and "DAY=2026-01-02" in out
    assert " hi 42" in out and "AL_RUN=run-hi" in out
    request = op.dryrun_request(logical_date=datetime(2026, 1, 2))
    assert "tpl-dry-dag" in str(request) and "DAY=2026-01-02" in str(request)
    # the task itself keeps its templates for the real run
    assert op.app.roles[0].args[-2:] == ["{{ params.word }}", "{{ 20 + 22 }}"]  # type: ignore[union-attr]
    assert op.env == {"DAY": "{{ ds }}"}
    with pytest.raises(AnylaunchInputError, match="'var' is undefined"):
        needs_var.dry_run(logical_date=datetime(2026, 1, 2))


def test_the_rendered_template_view_masks_declared_secrets(
    airflow: Any, apps: Callable[[], List[Any]]
) -> None:
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.utils.session import create_session

    dagrun = airflow.run(airflow.test_dag("operator_dags.py", "al_templated_secret"))
    assert airflow.states(dagrun) == {"app": "success"}
    (ti,) = airflow.tis(dagrun).values()
    with create_session() as session:
        fields = RenderedTaskInstanceFields.get_templated_fields(ti, session=session)
    assert fields is not None and "DB_LOGIN" in str(fields["app"])
    stored = str(fields)
    # the param renders to the secret; neither its rendered nor its raw form is shown
    assert "value-Q7" not in stored
    (app,) = apps()
    assert app.state.name == "SUCCEEDED"


@pytest.mark.parametrize(
    ("dag_id", "end_state"), [("al_kill_sync", "CANCELLED"), ("al_kill_keep", "RUNNING")]
)
def test_killing_the_task_cancels_the_app_unless_told_to_keep_it(
    airflow: Any,
    apps: Callable[[], List[Any]],
    kill_task_when_running: Callable[[], Dict[str, Any]],
    waiter: Callable[..., Any],
    capfd: pytest.CaptureFixture[str],
    dag_id: str,
    end_state: str,
) -> None:
    seen = kill_task_when_running()
    dagrun = airflow.run(airflow.test_dag("operator_dags.py", dag_id))
    (app,) = apps()
    out = capfd.readouterr().out
    waiter("the kill", lambda: "states_after_kill" in seen, timeout=30)
    if end_state == "CANCELLED":
        waiter("the app to end", lambda: apps()[0].state.name == "CANCELLED", timeout=30)
        assert f"task killed: cancelling anylaunch app {app.app_handle}" in out
        assert airflow.states(dagrun) == {"long": "failed"}
        assert seen["states_after_kill"] == ["CANCELLED"]
    else:
        assert f"leaving anylaunch app {app.app_handle} running" in out
        assert seen["states_after_kill"] == ["RUNNING"]


@pytest.mark.parametrize("dag_id", ["al_timeout_sync", "al_timeout_deferred"])
def test_execution_timeout_cancels_the_app(
    airflow: Any,
    apps: Callable[[], List[Any]],
    waiter: Callable[..., Any],
    capfd: pytest.CaptureFixture[str],
    dag_id: str,
) -> None:
    dagrun = airflow.run(airflow.test_dag("operator_dags.py", dag_id))
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"long": "failed"}
    waiter("the app to be cancelled", lambda: apps()[0].state.name == "CANCELLED", timeout=30)
    (app,) = apps()
    assert f"cancelling anylaunch app {app.app_handle}" in out


def test_startup_timeout_cancels_an_app_that_is_not_running_in_time(
    airflow: Any,
    slurm_cluster: Any,
    waiter: Callable[..., Any],
    capfd: pytest.CaptureFixture[str],
) -> None:
    from anylaunch.runner import get_runner
    from anylaunch.specs import AppState

    dagrun = airflow.run(airflow.test_dag("operator_dags.py", "al_startup_timeout"))
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"slow_start": "failed"}
    match = re.search(
        r"anylaunch app (slurm://\S+) did not start \(RUNNING\) within 3s.*Fix: raise startup_timeout",
        out,
    )
    assert match, out[-3000:]
    handle = match.group(1)
    with get_runner() as runner:
        # the job was held PENDING by Slurm; the timeout cancelled it
        waiter(
            "the held Slurm job to be cancelled",
            lambda: (s := runner.status(handle)) is not None and s.state == AppState.CANCELLED,
            timeout=60,
        )


def test_bad_inputs_fail_at_execute_time_without_retries(
    airflow: Any, apps: Callable[[], List[Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    dagrun = airflow.run(airflow.test_dag("operator_dags.py", "al_bad_inputs"))
    out = capfd.readouterr().out
    tis = airflow.tis(dagrun)
    assert {t: str(ti.state) for t, ti in tis.items()} == {
        "unknown_scheduler": "failed",
        "bad_cfg": "failed",
        "bad_component_args": "failed",
        "no_scheduler": "failed",
    }
    # AirflowFailException: retries=3 is not used up on input that cannot work
    assert tis["unknown_scheduler"].try_number == 1 and tis["bad_cfg"].try_number == 1
    assert "unknown scheduler 'local_cdw'. Did you mean 'local_cwd'?" in out
    assert "log_dirr" in out and "Did you mean 'log_dir'?" in out
    assert "msgg" in out
    assert "no scheduler given" in out
    assert apps() == []  # nothing was launched
    # the extra link does not look for a ui_url XCom that no app ever pushed
    assert "XCom not found" not in out


def test_env_var_connection_is_not_needed_when_the_default_is_missing() -> None:
    # sanity check of the test environment itself: no anylaunch_default connection here
    assert "AIRFLOW_CONN_ANYLAUNCH_DEFAULT" not in os.environ


@pytest.mark.parametrize("mode", ["sync", "deferred"])
def test_one_record_per_line_and_no_secret_in_log_or_xcom(
    airflow: Any,
    apps: Callable[[], List[Any]],
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    afc: Any,
) -> None:
    conn, token = "conn-string-5e1d0a", "tok-93c2aa7f"
    monkeypatch.setenv("AL_TEST_CONN", conn)  # declared secret (secret_env_names)
    monkeypatch.setenv("AL_TEST_TOKEN", token)  # secret by its name
    dagrun = airflow.run(airflow.test_dag("operator_dags.py", f"al_lines_secrets_{mode}"))
    out = airflow.without_airflow_debug(capfd.readouterr().out)
    assert airflow.states(dagrun) == {"chatty": "failed"}
    (app,) = apps()
    assert app.state.name == "FAILED"
    # exactly one task-log record per app line, in order
    # the log records (the failure's "last log lines" quote the tail again, unprefixed)
    records = [  # Airflow 3's records say "[info", Airflow 2's " INFO - "
        line
        for line in out.splitlines()
        if ("[info" in line or " INFO - " in line) and "worker/0 line " in line
    ]
    numbers = [re.search(r"worker/0 line (\d+)\b", r) for r in records]
    assert [m.group(1) if m else r for m, r in zip(numbers, records, strict=True)] == [
        str(i) for i in range(50)
    ], records[:3]
    assert "worker/0 conn=*** token=***" in out
    assert "exit code: 4" in out
    assert "last stderr:\n  failing with token ***" in out
    assert conn not in out and token not in out
    xcoms = json.dumps(airflow.xcoms(dagrun, "chatty"), default=str)
    assert app.app_handle in xcoms and conn not in xcoms and token not in xcoms
    # Airflow's own masker was told the values too: its logs of anything else mask them
    assert afc.redact(f"x {conn} {token} y") == "x *** *** y"


@pytest.mark.parametrize("mode", ["sync", "deferred"])
def test_run_timeout_cancels_the_app(
    airflow: Any,
    apps: Callable[[], List[Any]],
    waiter: Callable[..., Any],
    capfd: pytest.CaptureFixture[str],
    mode: str,
) -> None:
    dagrun = airflow.run(airflow.test_dag("operator_dags.py", f"al_run_timeout_{mode}"))
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"overrun": "failed"}
    waiter("the app to be cancelled", lambda: apps()[0].state.name == "CANCELLED", timeout=30)
    assert "AnylaunchAppTimeout" in out
    assert "did not finish" in out  # within 2s, or by the deadline fixed at deferral


def test_operator_flags_must_be_real_booleans() -> None:
    from airflow_anylaunch.operators import AnylaunchOperator
    from anylaunch.specs.errors import InvalidSpecError

    for flag in ("deferrable", "stream_logs", "wait_for_completion"):
        with pytest.raises(InvalidSpecError, match=flag):
            AnylaunchOperator(task_id="t", component="utils.echo", **{flag: "no"})
    with pytest.raises(InvalidSpecError, match="run_timeout"):
        AnylaunchOperator(task_id="t", component="utils.echo", run_timeout=float("nan"))
    with pytest.raises(InvalidSpecError, match="secret_env_names"):
        AnylaunchOperator(task_id="t", component="utils.echo", secret_env_names=[""])


def test_the_extra_link_is_the_apps_ui(
    airflow: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_AL_LOG_DIR", str(tmp_path / "logs"))
    dag = airflow.test_dag("operator_dags.py", "al_templated_cfg")
    dagrun = airflow.run(dag)
    assert airflow.states(dagrun) == {"templated": "success"}
    xcoms = airflow.xcoms(dagrun, "templated")
    assert xcoms["ui_url"].startswith("file://")
    assert airflow.app_link(dag, dagrun, "templated") == xcoms["ui_url"]
