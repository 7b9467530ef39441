"""The lifecycle scenario matrix (tests/integrations/lifecycle) through Dagster: each scenario
as an anylaunch op in a real (in-process) run; the outcome kind is the step's failure reason."""

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from anylaunch.specs.serialize import appdef_from_dict
from dagster_anylaunch import AnylaunchResource, build_anylaunch_op
from tests.integrations.lifecycle.matrix import (
    SCENARIOS,
    app_dict,
    check,
    prepare,
    scenario_run,
)
from tests.schedulers.slurm.cluster import slurm_cluster as slurm_cluster  # a fixture

_KINDS = {
    "failed": "failed",
    "startup_timeout": "timeout",
    "run_timeout": "timeout",
    "lost": "lost",
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_dagster(
    name: str,
    instance: dg.DagsterInstance,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    scenario = prepare(name, request, tmp_path, monkeypatch)
    resource = AnylaunchResource(
        scheduler=scenario.scheduler,
        cfg=dict(scenario.cfg),
        poll_interval_s=0.3,
        startup_timeout_s=scenario.startup_timeout,
        run_timeout_s=scenario.run_timeout,
    )
    op_def = build_anylaunch_op("matrix", appdef_from_dict(app_dict(scenario)))

    @dg.job(resource_defs={"anylaunch": resource})
    def matrix_job() -> None:
        op_def()

    with scenario_run(scenario) as run:
        result = matrix_job.execute_in_process(instance=instance, raise_on_error=False)
    kind = "success"
    if not result.success:
        failure: Any = result.failure_data_for_node("matrix")
        assert failure is not None and failure.user_failure_data is not None, failure
        kind = _KINDS[failure.user_failure_data.metadata["reason"].value]
    check(run, kind)
