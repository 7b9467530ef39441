"""Array apps (sweeps) as one Airflow task, end to end on real Airflow and local_cwd: the
task's outcome follows min_success_ratio, XCom holds the per-index outcomes, the task log
shows each line with its index, the sensor watches an array, a retry reattaches to it."""

import json
from typing import Any, Callable, List

import pytest

from anylaunch.specs.array_status import ArrayStatus

LRS = ("0.1", "0.03", "0.01", "0.003", "0.001")


def _check_outcomes(outcomes: Any) -> None:
    """4/5 succeeded, index 3 failed with exit code 1."""
    assert outcomes["counts"] == {"SUCCEEDED": 4, "FAILED": 1}
    assert outcomes["indices"] == {"SUCCEEDED": "0-2,4", "FAILED": "3"}
    assert outcomes["exit_codes"]["3"] == 1  # (local_cwd records the zeros too)
    assert ArrayStatus.from_dict(outcomes).failed() == [3]


@pytest.mark.parametrize("mode", ["sync", "deferred"])
@pytest.mark.parametrize("ratio", ["08", "10"], ids=["ratio-0.8", "ratio-1.0"])
def test_a_sweep_is_one_task_that_fails_by_min_success_ratio(
    airflow: Any,
    apps: Callable[[], List[Any]],
    capfd: pytest.CaptureFixture[str],
    mode: str,
    ratio: str,
) -> None:
    dagrun = airflow.run(airflow.test_dag("array_dags.py", f"al_sweep_{ratio}_{mode}"))
    out = airflow.without_airflow_debug(capfd.readouterr().out)
    (app,) = apps()  # one app, one handle, for the 5 indices
    expected = "success" if ratio == "08" else "failed"
    assert airflow.states(dagrun) == {"sweep": expected}, out[-3000:]
    assert app.state.name == ("SUCCEEDED" if ratio == "08" else "FAILED")
    # every line of the task log carries its index: role/index
    role = "train" if mode == "sync" else "python"
    for i, lr in enumerate(LRS):
        arg = lr if mode == "sync" else "none"  # ${param.lr} in the sync app's args
        assert f"{role}/{i} index={i} arg={arg} env_lr={lr}" in out
    xcoms = airflow.xcoms(dagrun, "sweep")
    assert xcoms["app_handle"] == app.app_handle
    _check_outcomes(xcoms["array"])  # pushed whether the task succeeds or fails
    if ratio == "08":
        result = xcoms["return_value"]
        assert (result["state"], result["app_handle"]) == ("SUCCEEDED", app.app_handle)
        _check_outcomes(result["array"])
        # the per-index states are in "array": roles keep the failed indices' replicas only
        assert [r["id"] for r in result["roles"][0]["replicas"]] == [3]
    else:
        assert "return_value" not in xcoms
        # the failure names the failed index and its exit code
        assert "array: 4/5 succeeded (5 required); failed indices: 3 (exit 1)" in out


def test_the_sensor_watches_an_array_as_one_app(
    airflow: Any, apps: Callable[[], List[Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    dagrun = airflow.run(airflow.test_dag("array_dags.py", "al_sweep_sensed"))
    out = airflow.without_airflow_debug(capfd.readouterr().out)
    assert airflow.states(dagrun) == {"launch": "success", "wait": "success"}, out[-3000:]
    (app,) = apps()
    xcoms = airflow.xcoms(dagrun, "wait")
    _check_outcomes(xcoms["array"])
    assert (xcoms["return_value"]["state"], xcoms["return_value"]["app_handle"]) == (
        "SUCCEEDED",
        app.app_handle,
    )
    for i, lr in enumerate(LRS):  # stream_logs=True: the trigger reads every index
        assert f"train/{i} index={i} arg={lr} env_lr={lr}" in out


@pytest.mark.parametrize("dag_id", ["al_array_retry", "al_array_retry_deferred"])
def test_a_retry_reattaches_to_the_same_array(
    airflow: Any, apps: Callable[[], List[Any]], capfd: pytest.CaptureFixture[str], dag_id: str
) -> None:
    dagrun = airflow.run(airflow.test_dag("array_dags.py", dag_id))
    out = capfd.readouterr().out
    tis = airflow.tis(dagrun)
    assert (str(tis["job"].state), tis["job"].try_number) == ("success", 2), out[-3000:]
    assert "simulated worker crash while waiting for" in out
    assert "Reconnecting to existing job" in out
    (app,) = apps()  # no second array
    result = airflow.xcoms(dagrun, "job")["return_value"]
    assert (result["app_handle"], result["state"]) == (app.app_handle, "SUCCEEDED")
    assert result["array"]["counts"] == {"SUCCEEDED": 3}
    for i in range(3):
        assert f"job/{i} index {i} done after the crash" in out


def test_an_array_status_dict_stays_small_at_100000_indices() -> None:
    """What goes to XCom, an exception and a trigger event: bounded whatever the array."""
    from airflow_anylaunch._arrays import MAX_ARRAY_XCOM_CHARS, MAX_REPLICAS_KEPT
    from airflow_anylaunch._common import status_dict
    from anylaunch.specs.api import AppState, AppStatus, ReplicaStatus, RoleStatus

    n = 100_000
    states = {i: AppState.FAILED if i % 3 == 0 else AppState.SUCCEEDED for i in range(n)}
    array = ArrayStatus(n, states, {i: 1 + i % 7 for i, s in states.items() if s.name == "FAILED"})
    replicas = [ReplicaStatus(i, s, "w", "h") for i, s in states.items()]
    status = AppStatus(
        array.app_state(), msg=array.summary(), roles=[RoleStatus("w", replicas)], array=array
    )
    result = status_dict("local_cwd://s/big-1", status)
    assert len(json.dumps(result)) < MAX_ARRAY_XCOM_CHARS + 10_000
    assert result["state"] == "FAILED"
    assert result["array"]["counts"] == {"SUCCEEDED": 66_666, "FAILED": 33_334}
    assert result["array"]["truncated"] is True
    assert len(result["roles"][0]["replicas"]) == MAX_REPLICAS_KEPT
    assert "failed indices: 0 (exit 1), 3 (exit 4)" in result["msg"]


def test_the_operator_refuses_an_array_that_is_not_an_arrayspec() -> None:
    from airflow_anylaunch.operators import AnylaunchOperator
    from anylaunch.specs.errors import InvalidSpecError

    with pytest.raises(InvalidSpecError, match=r"array=.*must be an anylaunch.specs.ArraySpec"):
        AnylaunchOperator(
            task_id="t", component="utils.echo", array={"size": 3}, scheduler="local_cwd"
        )


def test_array_on_an_app_no_backend_can_run_as_an_array_fails_as_bad_input() -> None:
    import anylaunch.specs as specs
    from airflow_anylaunch.exceptions import AnylaunchInputError
    from airflow_anylaunch.operators import AnylaunchOperator

    two_roles = specs.AppDef(
        "two", [specs.Role(name, image=".", entrypoint="echo") for name in ("a", "b")]
    )
    op = AnylaunchOperator(
        task_id="t", app=two_roles, array=specs.ArraySpec(3), scheduler="local_cwd"
    )
    with pytest.raises(AnylaunchInputError, match="an array app has one role"):
        op.dryrun_request()
