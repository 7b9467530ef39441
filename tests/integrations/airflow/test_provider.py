"""The provider registration, the anylaunch connection/hook, and checks at DAG parse time."""

import json
import os
import subprocess
import sys
from datetime import datetime
from typing import Any

import pytest

from anylaunch.specs import AppDef, Role
from anylaunch.specs.errors import InvalidSpecError, UnknownSchedulerException

APP = AppDef(name="x", roles=[Role(name="r", image=".", entrypoint="echo", args=["hi"])])


def test_airflow_providers_list_shows_anylaunch_with_its_parts() -> None:
    # only the JSON on stdout: Airflow 3.0's CLI also prints INFO records there (e.g.
    # alembic's "setup plugin" lines) before it
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING"}
    cli = [sys.executable, "-m", "airflow", "providers"]
    listed = subprocess.run(
        [*cli, "list", "-o", "json"], env=env, capture_output=True, text=True, timeout=300
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    providers = {p["package_name"]: p for p in json.loads(listed.stdout)}
    assert "anylaunch" in providers, sorted(providers)
    triggers = subprocess.run(
        [*cli, "triggers", "-o", "json"], env=env, capture_output=True, text=True, timeout=300
    )
    assert {
        "package_name": "anylaunch",
        "class": "airflow_anylaunch.triggers",
        "integration_name": "anylaunch",
    } in json.loads(triggers.stdout), triggers.stderr[-2000:]


def test_providers_manager_knows_the_link_hook_and_connection_type(afc: Any) -> None:
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    assert "anylaunch" in manager.providers
    assert "airflow_anylaunch.links.AnylaunchAppLink" in manager.extra_links_class_names
    hook = afc.task_runtime_hooks()["anylaunch"]
    assert hook is not None and hook.hook_class_name == "airflow_anylaunch.hooks.AnylaunchHook"
    assert hook.connection_type == "anylaunch"
    assert any(t.trigger_class_name == "airflow_anylaunch.triggers" for t in manager.trigger)


def test_hook_reads_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_anylaunch.hooks import AnylaunchHook

    extra = {"scheduler": "local_cwd", "cfg": {"log_dir": "/data/logs"}, "session": "team-a"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_AL_HOOK", json.dumps({"conn_type": "anylaunch", "extra": extra})
    )
    hook = AnylaunchHook("al_hook")
    settings = hook.get_settings()
    assert (settings.scheduler, dict(settings.cfg), settings.session) == (
        "local_cwd",
        {"log_dir": "/data/logs"},
        "team-a",
    )
    with hook.get_conn() as runner:
        assert runner.session_name == "team-a"
        assert settings.cfg_for(runner, "local_cwd") == {"log_dir": "/data/logs"}
        assert settings.cfg_for(runner, "slurm") == {}  # another scheduler's options do not apply
    assert hook.test_connection() == (True, "scheduler local_cwd accepts the cfg")


def test_hook_rejects_bad_connections(monkeypatch: pytest.MonkeyPatch, afc: Any) -> None:
    from airflow_anylaunch.hooks import AnylaunchHook

    monkeypatch.setenv("AIRFLOW_CONN_AL_HTTP", json.dumps({"conn_type": "http", "host": "x"}))
    with pytest.raises(InvalidSpecError, match=r"connection 'al_http' conn_type='http' is invalid"):
        AnylaunchHook("al_http").get_settings()
    monkeypatch.setenv(
        "AIRFLOW_CONN_AL_BADCFG",
        json.dumps(
            {"conn_type": "anylaunch", "extra": {"scheduler": "local_cwd", "cfg": "log_dirr=/x"}}
        ),
    )
    ok, message = AnylaunchHook("al_badcfg").test_connection()
    assert not ok and "log_dirr" in message and "Did you mean 'log_dir'?" in message
    with pytest.raises(afc.AirflowNotFoundException):
        AnylaunchHook("al_missing").get_settings()
    # the default connection is optional
    assert AnylaunchHook().get_settings().scheduler is None


def dag() -> Any:
    try:
        from airflow.sdk import DAG
    except ImportError:  # Airflow 2
        from airflow import DAG  # type: ignore[attr-defined,no-redef,unused-ignore]

    return DAG("al_parse_checks", schedule=None, start_date=datetime(2024, 1, 1))


def test_bad_operator_arguments_fail_when_the_dag_is_parsed() -> None:
    from airflow_anylaunch.operators import AnylaunchOperator

    with dag():
        with pytest.raises(
            UnknownSchedulerException,
            match=r"unknown scheduler 'kubernetez'\. Did you mean 'kubernetes'\?",
        ):
            AnylaunchOperator(task_id="a", app=APP, scheduler="kubernetez")
        with pytest.raises(InvalidSpecError, match=r"give exactly one of them"):
            AnylaunchOperator(task_id="b", app=APP, component="utils.echo")
        with pytest.raises(InvalidSpecError, match=r"give exactly one of them"):
            AnylaunchOperator(task_id="c")
        with pytest.raises(InvalidSpecError, match=r"^cfg='log_dir=/x' is invalid: must be a dict"):
            AnylaunchOperator(task_id="d", app=APP, scheduler="local_cwd", cfg="log_dir=/x")  # type: ignore[arg-type]
        with pytest.raises(InvalidSpecError, match=r"on_kill_action='stop' is invalid"):
            AnylaunchOperator(task_id="e", app=APP, on_kill_action="stop")
        with pytest.raises(InvalidSpecError, match=r"poll_interval=0 is invalid"):
            AnylaunchOperator(task_id="f", app=APP, poll_interval=0)
        with pytest.raises(InvalidSpecError, match=r"component_args=.* is invalid: must be a"):
            AnylaunchOperator(task_id="g", component="utils.echo", component_args="--msg hi")  # type: ignore[arg-type]
        with pytest.raises(InvalidSpecError, match=r"env\['N'\]=1 is invalid: must be a str"):
            AnylaunchOperator(task_id="h", app=APP, env={"N": 1})  # type: ignore[dict-item]
        with pytest.raises(InvalidSpecError, match=r"app=.* is invalid: must be an AppDef"):
            AnylaunchOperator(task_id="i", app="utils.echo")  # type: ignore[arg-type]
        # templated values are checked once rendered, at execute time
        AnylaunchOperator(task_id="j", app=APP, scheduler="{{ var.value.scheduler }}")


def test_bad_sensor_handle_fails_when_the_dag_is_parsed() -> None:
    from airflow_anylaunch.sensors import AnylaunchAppSensor

    with dag():
        with pytest.raises(InvalidSpecError, match=r"app_handle='local_cwd:/x' is invalid"):
            AnylaunchAppSensor(task_id="s", app_handle="local_cwd:/x")
        AnylaunchAppSensor(
            task_id="t", app_handle="{{ ti.xcom_pull(task_ids='x', key='app_handle') }}"
        )


def test_dry_run_prints_the_native_request_offline(
    capsys: pytest.CaptureFixture[str], state_dir: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_anylaunch.operators import AnylaunchOperator

    with dag():
        op = AnylaunchOperator(
            task_id="dry",
            component="utils.echo",
            component_args={"msg": "hello", "num_replicas": 2},
            scheduler="local_cwd",
            env={"API_TOKEN": "s3cr3t"},
            app_name="dry-app",
        )
    op.dry_run()
    printed = capsys.readouterr().out
    assert "local_cwd app dry-app-" in printed
    assert "[0] echo hello" in printed and "[1] echo hello" in printed
    assert "API_TOKEN=***" in printed and "s3cr3t" not in printed  # secrets masked
    info = op.dryrun_request()  # programmatic
    assert [r.cmd for r in info.request.roles[0].replicas] == [["echo", "hello"], ["echo", "hello"]]
    assert not state_dir.exists() or not any(state_dir.iterdir())  # nothing was launched


def test_deferrable_defaults_to_the_operators_default_deferrable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow_anylaunch.operators import AnylaunchOperator
    from airflow_anylaunch.sensors import AnylaunchAppSensor

    handle = "local_cwd://anylaunch/x-1"
    for configured in (True, False):
        monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", str(configured))
        with dag():
            op = AnylaunchOperator(task_id="op", app=APP, scheduler="local_cwd")
            sensor = AnylaunchAppSensor(task_id="sensor", app_handle=handle)
            explicit = AnylaunchOperator(task_id="explicit", app=APP, deferrable=not configured)
        assert (op.deferrable, sensor.deferrable, explicit.deferrable) == (
            configured,
            configured,
            not configured,
        )


def test_the_connection_form_has_the_anylaunch_fields() -> None:
    """Airflow 3.3 builds the form from the provider's ``conn-fields``, older Airflow from the
    hook's form widgets: the same three fields either way."""
    from airflow.providers_manager import ProvidersManager

    widgets = ProvidersManager().connection_form_widgets
    names = {k for k, v in widgets.items() if str(v.hook_class_name).endswith("AnylaunchHook")}
    if not names and not widgets:
        pytest.skip("this Airflow has no connection form (its Flask UI is not installed)")
    assert names == {f"extra__anylaunch__{field}" for field in ("scheduler", "cfg", "session")}
