"""The example DAGs in examples/airflow/dags run as they are, on real Airflow and local_cwd."""

from typing import Any, Callable, List

import pytest


def test_sync_example_streams_every_replica_into_the_task_log(
    airflow: Any, apps: Callable[[], List[Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    dag = airflow.example_dag("anylaunch_sync.py", "anylaunch_sync")
    dagrun = airflow.run(dag)
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"hello": "success"}
    for replica in (0, 1):
        for step in range(3):
            assert (
                f"greeter/{replica} hello from replica {replica} of run {dagrun.run_id}, step {step}"
                in out
            )
    (app,) = apps()
    xcoms = airflow.xcoms(dagrun, "hello")
    assert xcoms["app_handle"] == app.app_handle
    assert xcoms["return_value"]["state"] == "SUCCEEDED"
    assert xcoms["return_value"]["app_handle"] == app.app_handle
    assert xcoms["ui_url"].startswith("file://")
    # the extra link points at the app's UI
    assert airflow.app_link(dag, dagrun, "hello") == xcoms["ui_url"]


def test_deferrable_example_streams_from_the_trigger(
    airflow: Any, apps: Callable[[], List[Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    dagrun = airflow.run(airflow.example_dag("anylaunch_deferrable.py", "anylaunch_deferrable"))
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"count": "success"}
    assert "deferring: the triggerer waits for anylaunch app" in out
    for i in (1, 2, 3):
        assert f"python/0 counting {i} for anylaunch_deferrable" in out
    (app,) = apps()
    assert airflow.xcoms(dagrun, "count")["return_value"]["app_handle"] == app.app_handle


def test_launch_and_sense_example(
    airflow: Any, apps: Callable[[], List[Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    dag = airflow.example_dag("anylaunch_launch_and_sense.py", "anylaunch_launch_and_sense")
    dagrun = airflow.run(dag)
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"launch": "success", "wait": "success", "report": "success"}
    (app,) = apps()
    assert f"app {app.app_handle} ended SUCCEEDED" in out
    assert airflow.xcoms(dagrun, "report")["return_value"] == "SUCCEEDED"


def test_sweep_example_is_one_task_for_five_indices(
    airflow: Any, apps: Callable[[], List[Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    dagrun = airflow.run(airflow.example_dag("anylaunch_sweep.py", "anylaunch_sweep"))
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"sweep": "success", "report": "success"}
    assert len(apps()) == 1  # one array app for the five learning rates
    for i, lr in enumerate(("0.1", "0.03", "0.01", "0.003", "0.3")):
        assert f"trainer/{i} training with lr={lr}" in out
    outcomes = airflow.xcoms(dagrun, "sweep")["array"]
    assert outcomes["counts"] == {"SUCCEEDED": 4, "FAILED": 1}
    assert airflow.xcoms(dagrun, "report")["return_value"] == [4]
