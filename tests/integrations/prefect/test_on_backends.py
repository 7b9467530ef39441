"""The run_app flow on every real backend: an AnylaunchJob block launches a small app on
local_docker, slurm, aws_batch (moto) and kubernetes, which succeeds and whose line reaches
the Prefect run log through the API (tests/integrations/backend_targets.py)."""

from typing import Any

from anylaunch.specs.api import AppState
from prefect_anylaunch import AnylaunchJob, run_app
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


def test_run_app_runs_an_app_on_the_backend(backend: Target, pf: Any) -> None:
    job = AnylaunchJob(
        app=backend.app_dict(),
        scheduler=backend.scheduler,
        cfg=backend.cfg,
        session_name=backend.session,
        poll_interval_s=0.5,
        run_timeout_s=120,
    )
    state = run_app(job, return_state=True)

    assert state.is_completed(), state.message
    result = state.result()
    assert result["state"] == "SUCCEEDED", result
    handle = result["app_handle"]
    backend.assert_launched_here(handle)
    assert pf.app_status(handle).state == AppState.SUCCEEDED
    logs = pf.run_logs(state.state_details.flow_run_id)
    assert log_line(handle) in logs, logs
