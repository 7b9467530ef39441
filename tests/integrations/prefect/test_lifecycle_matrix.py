"""The lifecycle scenario matrix (tests/integrations/lifecycle) through Prefect: each scenario
as the ``run_app`` flow on the session's Prefect API server.

The outcome kind is the flow run's final state and the exception it failed with; the handle
is the one the flow run published in its labels; warnings are the run's WARNING records as the
API stores them.
"""

import logging
from pathlib import Path
from typing import Set, Tuple, Type
from uuid import UUID

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId, LogFilterLevel
from prefect.client.schemas.sorting import FlowRunSort
from prefect.logging.handlers import APILogWorker

from prefect_anylaunch import (
    AnylaunchAppFailedError,
    AnylaunchAppLostError,
    AnylaunchAppTimeoutError,
    AnylaunchJob,
    run_app,
)
from tests.integrations.lifecycle.matrix import SCENARIOS, Outcome, check, prepare, scenario_run
from tests.integrations.lifecycle.matrix import faulty_local_plugin as faulty_local_plugin
from tests.integrations.lifecycle.scenarios import CANCEL_WAIT_S, POLL_INTERVAL_S, Kind, Scenario
from tests.schedulers.slurm.cluster import slurm_cluster as slurm_cluster  # a fixture

# the most specific first: the lost error is a failed error too
_ERRORS: Tuple[Tuple[Type[BaseException], Kind], ...] = (
    (AnylaunchAppLostError, "lost"),
    (AnylaunchAppTimeoutError, "timeout"),
    (AnylaunchAppFailedError, "failed"),
)


def published_handles(scenario: Scenario) -> Set[str]:
    """The app handles on the scenario's scheduler that flow runs published in their labels
    (the newest runs first)."""
    prefix = f"{scenario.scheduler}://"
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(limit=50, sort=FlowRunSort.EXPECTED_START_TIME_DESC)
    return {
        value
        for run in runs
        for value in run.labels.values()
        if isinstance(value, str) and value.startswith(prefix)
    }


def warnings(flow_run_id: UUID) -> list[str]:
    APILogWorker.drain_all()
    with get_client(sync_client=True) as client:
        logs = client.read_logs(
            LogFilter(
                flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]),
                level=LogFilterLevel(ge_=logging.WARNING),
            )
        )
    return [log.message for log in logs]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_prefect(
    name: str,
    faulty_local_plugin: None,
    pf: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    scenario = SCENARIOS[name]
    faults = prepare(scenario, request, tmp_path, monkeypatch)
    job = AnylaunchJob(
        app=scenario.app(),
        scheduler=scenario.scheduler,
        cfg=dict(scenario.cfg),
        poll_interval_s=POLL_INTERVAL_S,
        startup_timeout_s=scenario.startup_timeout,
        run_timeout_s=scenario.run_timeout,
    )
    with scenario_run(scenario, faults, lambda: published_handles(scenario)) as run:
        state = run_app(job, cancel_wait_s=CANCEL_WAIT_S, return_state=True)
        flow_run_id = state.state_details.flow_run_id
        assert flow_run_id is not None
        if state.is_completed():
            outcome = Outcome("success", "", warnings(flow_run_id))
        else:
            assert state.is_failed(), state
            error = state.result(raise_on_failure=False)
            kind = next((k for cls, k in _ERRORS if isinstance(error, cls)), None)
            assert kind is not None, f"not an anylaunch outcome: {error!r}"
            outcome = Outcome(kind, str(error), warnings(flow_run_id))
        check(run, outcome)
