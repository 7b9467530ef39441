"""The lifecycle scenario matrix (tests/integrations/lifecycle) through Dagster: each scenario
as an anylaunch op in a real (in-process) run.

The outcome kind is the run's success, or the ``reason`` in the step failure's metadata; the
handle is the one the step published in its run tag; warnings are the run's WARNING events.
"""

import logging
from pathlib import Path
from typing import Any, Dict, List, Set

import dagster as dg
import pytest

from anylaunch.specs.serialize import appdef_from_dict
from dagster_anylaunch import AnylaunchResource, build_anylaunch_op
from tests.integrations.lifecycle.matrix import SCENARIOS, Outcome, check, prepare, scenario_run
from tests.integrations.lifecycle.matrix import faulty_local_plugin as faulty_local_plugin
from tests.integrations.lifecycle.scenarios import CANCEL_WAIT_S, POLL_INTERVAL_S, Kind
from tests.schedulers.slurm.cluster import slurm_cluster as slurm_cluster  # a fixture

#: The step failure's ``reason`` -> the kind of outcome (the table's Dagster column).
REASONS: Dict[str, Kind] = {
    "failed": "failed",
    "startup_timeout": "timeout",
    "run_timeout": "timeout",
    "lost": "lost",
}


def published_handles(instance: dg.DagsterInstance, scheduler: str) -> Set[str]:
    """The app handles on ``scheduler`` that runs of ``instance`` carry in their tags."""
    return {
        value
        for run in instance.get_runs()
        for value in run.tags.values()
        if value.startswith(f"{scheduler}://")
    }


def warnings(instance: dg.DagsterInstance, run_id: str) -> List[str]:
    return [
        e.user_message
        for e in instance.all_logs(run_id)
        if isinstance(e.level, int) and e.level >= logging.WARNING
    ]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_dagster(
    name: str,
    faulty_local_plugin: None,
    instance: dg.DagsterInstance,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    scenario = SCENARIOS[name]
    faults = prepare(scenario, request, tmp_path, monkeypatch)
    resource = AnylaunchResource(
        scheduler=scenario.scheduler,
        cfg=dict(scenario.cfg),
        poll_interval_s=POLL_INTERVAL_S,
        startup_timeout_s=scenario.startup_timeout,
        run_timeout_s=scenario.run_timeout,
        cancel_timeout_s=CANCEL_WAIT_S,
    )
    op_def = build_anylaunch_op("matrix", appdef_from_dict(scenario.app()))

    @dg.job(resource_defs={"anylaunch": resource})
    def matrix_job() -> None:
        op_def()

    published = lambda: published_handles(instance, scenario.scheduler)  # noqa: E731
    with scenario_run(scenario, faults, published) as run:
        result = matrix_job.execute_in_process(instance=instance, raise_on_error=False)
        logged = warnings(instance, result.run_id)
        if result.success:
            outcome = Outcome("success", "", logged)
        else:
            failure: Any = result.failure_data_for_node("matrix")
            assert failure is not None and failure.user_failure_data is not None, failure
            data = failure.user_failure_data
            reason = data.metadata["reason"].value
            assert reason in REASONS, f"step failed with reason {reason!r}: {data.description}"
            outcome = Outcome(REASONS[reason], data.description or "", logged)
        check(run, outcome)
