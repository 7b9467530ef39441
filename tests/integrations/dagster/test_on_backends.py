"""The op on every real backend: an in-process Dagster run launches a small app on
local_docker, slurm, aws_batch (moto) and kubernetes, which succeeds and whose line reaches
the run's event log (tests/integrations/backend_targets.py)."""

from typing import Callable, List

import dagster as dg

from anylaunch.specs import AppState, AppStatus
from dagster_anylaunch import AnylaunchResource, build_anylaunch_op
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


def test_op_runs_an_app_on_the_backend(
    backend: Target,
    instance: dg.DagsterInstance,
    user_logs: Callable[[dg.DagsterInstance, str], List[str]],
) -> None:
    op_def = build_anylaunch_op(
        "hello", backend.app(), scheduler=backend.scheduler, cfg=backend.cfg
    )
    resource = AnylaunchResource(
        session_name=backend.session, poll_interval_s=0.5, run_timeout_s=120
    )

    @dg.job(name="hello_job", resource_defs={"anylaunch": resource})
    def hello_job() -> None:
        op_def()

    result = hello_job.execute_in_process(instance=instance, raise_on_error=False)

    logs = user_logs(instance, result.run_id)
    assert result.success, logs
    status = result.output_for_node("hello")
    assert isinstance(status, AppStatus) and status.state == AppState.SUCCEEDED, status
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    handle = output.step_output_data.metadata["handle"].value
    assert isinstance(handle, str), handle
    backend.assert_launched_here(handle)
    assert log_line(handle) in logs, logs
