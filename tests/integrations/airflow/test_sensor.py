"""AnylaunchAppSensor on real Airflow, watching apps launched by an upstream task."""

from typing import Any, Callable, List

import pytest


@pytest.mark.parametrize("mode", ["poke", "reschedule", "deferrable"])
def test_sensor_waits_for_an_app_launched_upstream(
    airflow: Any, apps: Callable[[], List[Any]], capfd: pytest.CaptureFixture[str], mode: str
) -> None:
    dagrun = airflow.run(airflow.test_dag("sensor_dags.py", f"al_sensor_{mode}"))
    out = capfd.readouterr().out
    tis = airflow.tis(dagrun)
    assert {t: str(ti.state) for t, ti in tis.items()} == {"launch": "success", "wait": "success"}
    (app,) = apps()
    assert app.state.name == "SUCCEEDED"
    launched = airflow.xcoms(dagrun, "launch")
    assert launched["app_handle"] == app.app_handle
    # wait_for_completion=False: launch returned while the app was still going
    assert launched["return_value"]["state"] in ("SUBMITTED", "PENDING", "RUNNING")
    result = airflow.xcoms(dagrun, "wait")["return_value"]
    assert (result["app_handle"], result["state"]) == (app.app_handle, "SUCCEEDED")
    # only reschedule mode gives the worker slot back between pokes (the app runs ~3 s)
    assert (airflow.reschedules(tis["wait"]) > 0) == (mode == "reschedule")
    if mode == "deferrable":
        assert "[DAG TEST] running trigger in line" in out or "waiting for anylaunch app" in out
        assert "job/0 finished the job" in out  # stream_logs=True


def test_sensor_fails_with_the_app_message_and_soft_fail_skips(
    airflow: Any, apps: Callable[[], List[Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    dagrun = airflow.run(airflow.test_dag("sensor_dags.py", "al_sensor_failed"))
    out = capfd.readouterr().out
    tis = airflow.tis(dagrun)
    assert {t: str(ti.state) for t, ti in tis.items()} == {
        "launch": "success",
        "poke": "failed",
        "deferred": "failed",
        "soft": "skipped",
    }
    assert tis["poke"].try_number == 1  # a failed app is final: no retry (retries=2)
    (app,) = apps()
    assert f"AnylaunchSensorError: anylaunch app {app.app_handle} ended FAILED" in out
    assert "the input is corrupt" in out


def test_sensor_on_an_unknown_or_malformed_handle_fails_clearly(
    airflow: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    dagrun = airflow.run(airflow.test_dag("sensor_dags.py", "al_sensor_unknown"))
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"unknown": "failed", "malformed": "failed"}
    # the core policy's verdict on an app its scheduler does not know: lost (vanished)
    assert (
        "AnylaunchSensorError: anylaunch app local_cwd://anylaunch/nosuchapp-1234 no longer "
        "exists: the scheduler has no record of it" in out
    )
    assert (
        "app_handle='not-a-handle' is invalid: not of the form {scheduler}://{session_name}/{app_id}"
        in out
    )


def test_sensor_failures_and_streamed_lines_never_show_a_secret(
    airflow: Any,
    apps: Callable[[], List[Any]],
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token, dsn = "tok-sensor-41d9e2", "dsn-sensor-8a7c13"
    monkeypatch.setenv("AL_TEST_TOKEN", token)  # secret by its name (API_TOKEN)
    monkeypatch.setenv("AL_TEST_DSN", dsn)  # secret because the sensors declare DSN
    dagrun = airflow.run(airflow.test_dag("sensor_dags.py", "al_sensor_secret"))
    out = airflow.without_airflow_debug(capfd.readouterr().out)
    assert airflow.states(dagrun) == {"launch": "success", "poke": "failed", "deferred": "failed"}
    (app,) = apps()
    assert app.state.name == "FAILED"
    # both sensors fail with the core failure summary, the stderr tail masked
    failures = [line for line in out.splitlines() if "AnylaunchSensorError: " in line]
    assert len(failures) >= 2, failures
    assert "last stderr:\n  failing with *** ***" in out
    assert token not in out and dsn not in out


def test_a_poke_masks_the_secrets_of_the_app_it_watches(state_dir: Any) -> None:
    """Straight from poke (no Airflow log masking in between): the exception's text and status
    hold the app's secret values masked, read from the app's own description."""
    import json
    import sys

    from airflow_anylaunch.exceptions import AnylaunchSensorError
    from airflow_anylaunch.sensors import AnylaunchAppSensor
    from anylaunch.runner import get_runner
    from anylaunch.specs import AppDef, Role

    token, dsn = "tok-poke-5c0b7d", "dsn-poke-e93a61"
    script = "import os, sys; sys.exit('failing with ' + os.environ['API_TOKEN'] + ' ' + os.environ['DSN'])"
    app = AppDef(
        "leaky",
        [
            Role(
                "job",
                image=".",
                entrypoint=sys.executable,
                args=["-c", script],
                env={"API_TOKEN": token, "DSN": dsn},
            )
        ],
    )
    with get_runner() as runner:
        handle = runner.run(app, "local_cwd")
        runner.wait(handle, wait_interval=0.2)
    sensor = AnylaunchAppSensor(task_id="s", app_handle=handle, secret_env_names=["DSN"])
    with pytest.raises(AnylaunchSensorError) as raised:
        sensor.poke({})  # type: ignore[arg-type]
    text = str(raised.value) + json.dumps(raised.value.status)
    assert "last stderr:\n  failing with *** ***" in str(raised.value)
    assert token not in text and dsn not in text
    assert raised.value.status is not None and raised.value.status["state"] == "FAILED"
