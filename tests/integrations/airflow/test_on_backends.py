"""AnylaunchOperator on every real backend: ``dag.test()`` runs a small app on local_docker,
slurm, aws_batch (moto) and kubernetes, waiting in the task and in the triggerer; the app
succeeds and its line reaches the task log (tests/integrations/backend_targets.py)."""

import json
from typing import Any

import pytest

from tests.integrations.backend_targets import (  # noqa: F401 (fixtures the backends need)
    Target,
    backend_fixture,
    batch_docker,
    batch_queue,
    busybox_image,
    docker_client,
    kube_client,
    kube_namespace,
    kubelet,
    log_line,
    moto_aws,
    moto_server,
    slurm_cluster,
)


@pytest.mark.parametrize("mode", ["sync", "deferred"])
def test_operator_runs_an_app_on_the_backend(
    backend: Target,
    mode: str,
    airflow: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    extra = {"scheduler": backend.scheduler, "cfg": backend.cfg, "session": backend.session}
    monkeypatch.setenv(
        "AIRFLOW_CONN_ANYLAUNCH_BACKEND", json.dumps({"conn_type": "anylaunch", "extra": extra})
    )
    dag_id = f"al_on_{backend.scheduler}" + ("_deferred" if mode == "deferred" else "")
    dagrun = airflow.run(airflow.test_dag("backend_dags.py", dag_id))
    out = capfd.readouterr().out

    assert airflow.states(dagrun) == {"hello": "success"}, out
    result = airflow.xcoms(dagrun, "hello")["return_value"]
    handle = result["app_handle"]
    assert result["state"] == "SUCCEEDED", result
    backend.assert_launched_here(handle)
    # streamed once, by whoever waited: the task itself, or the trigger it deferred to
    (logged,) = [line for line in out.splitlines() if log_line(handle) in line]
    waiter = "AnylaunchAppTrigger" if mode == "deferred" else "AnylaunchOperator"
    assert waiter in logged, logged
