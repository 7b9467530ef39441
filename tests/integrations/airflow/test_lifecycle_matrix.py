"""The lifecycle scenario matrix (tests/integrations/lifecycle) through Airflow, in both wait
modes: polling in the task (sync) and deferred to the trigger, each run with ``dag.test()``.

The outcome kind is the task's state and the anylaunch exception it failed with (read from
the task log); the handle is the one the task pushed to XCom.
"""

from pathlib import Path
from typing import Any

import pytest

from tests.integrations.lifecycle.matrix import SCENARIOS, Outcome, check, prepare, scenario_run
from tests.integrations.lifecycle.matrix import faulty_local_plugin as faulty_local_plugin
from tests.integrations.lifecycle.scenarios import Kind
from tests.schedulers.slurm.cluster import slurm_cluster as slurm_cluster  # a fixture

#: The XCom key of the app handle (airflow_anylaunch._common.XCOM_APP_HANDLE).
XCOM_APP_HANDLE = "app_handle"
# the most specific first: the timeout and lost errors are AnylaunchAppErrors too
_EXCEPTIONS: tuple[tuple[str, Kind], ...] = (
    ("AnylaunchAppTimeout", "timeout"),
    ("AnylaunchAppLost", "lost"),
    ("AnylaunchAppError", "failed"),
)


def published_handles(dag_id: str) -> set[str]:
    """The app handles the DAG's tasks pushed to XCom (read while the DAG runs, too)."""
    from airflow.utils.session import create_session

    try:
        from airflow.models.xcom import XComModel
    except ImportError:  # Airflow 2: one XCom class, rows and API
        from airflow.models.xcom import XCom as XComModel  # type: ignore[no-redef,unused-ignore]
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(XComModel).where(XComModel.dag_id == dag_id, XComModel.key == XCOM_APP_HANDLE)
        ).all()
        return {str(_value(XComModel, row)) for row in rows}


def _value(model: Any, row: Any) -> Any:
    from airflow_anylaunch._compat import AIRFLOW_V_3_0_PLUS

    if AIRFLOW_V_3_0_PLUS or isinstance(row.value, (bytes, bytearray)):
        return model.deserialize_value(row)
    return row.value  # Airflow 2's JSON column holds the value itself


def outcome(state: str, log: str) -> Outcome:
    """The task's outcome: its state, the exception in its log, and its warning records."""
    # Airflow 3's records say "[warning", Airflow 2's " WARNING - "
    warnings = [
        line for line in log.splitlines() if "[warning" in line.lower() or " WARNING - " in line
    ]
    if state == "success":
        return Outcome("success", "", warnings)
    assert state == "failed", f"task state {state}:\n{log[-3000:]}"
    for name, kind in _EXCEPTIONS:
        marker = f"{name}: "
        if marker in log:
            return Outcome(kind, log[log.index(marker) :], warnings)
    raise AssertionError(f"the task failed without an anylaunch error:\n{log[-3000:]}")


@pytest.mark.parametrize("mode", ["sync", "deferred"])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_airflow(
    name: str,
    mode: str,
    faulty_local_plugin: None,
    airflow: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    scenario = SCENARIOS[name]
    faults = prepare(scenario, request, tmp_path, monkeypatch)
    dag_id = f"al_matrix_{name}_{mode}"
    dag = airflow.test_dag("matrix_dags.py", dag_id)
    with scenario_run(scenario, faults, lambda: published_handles(dag_id)) as run:
        dagrun = airflow.run(dag)
        log = capfd.readouterr().out
        check(run, outcome(airflow.states(dagrun)["matrix"], log))
