"""The lifecycle scenario matrix (tests/integrations/lifecycle) through Airflow, in both wait
modes (sync, and deferred to the trigger): the outcome kind is the task's state and the
exception class it failed with."""

from pathlib import Path
from typing import Any

import pytest

from tests.integrations.lifecycle.matrix import (
    SCENARIOS,
    check,
    prepare,
    scenario_run,
)
from tests.schedulers.slurm.cluster import slurm_cluster as slurm_cluster  # a fixture


def _kind(state: str, out: str) -> str:
    if state == "success":
        return "success"
    assert state == "failed", state
    # the most specific exception first: the timeout and lost errors are app errors too
    for name, kind in (
        ("AnylaunchAppTimeout", "timeout"),
        ("AnylaunchAppLost", "lost"),
        ("AnylaunchAppError", "failed"),
    ):
        if f"{name}:" in out:
            return kind
    raise AssertionError(f"the task failed without an anylaunch error:\n{out[-3000:]}")


@pytest.mark.parametrize("mode", ["sync", "deferred"])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_airflow(
    name: str,
    mode: str,
    airflow: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    scenario = prepare(name, request, tmp_path, monkeypatch)
    dag = airflow.test_dag("matrix_dags.py", f"al_matrix_{name}_{mode}")
    with scenario_run(scenario) as run:
        dagrun = airflow.run(dag)
    out = capfd.readouterr().out
    check(run, _kind(airflow.states(dagrun)["matrix"], out))
