"""A sweep (one array app) run by the run_app flow on real Prefect with real local_cwd apps:
per-index results, an indices table artifact, every index's lines in the run log, and the
flow failing by min_success_ratio with the failed index named."""

import json

from anylaunch.specs.api import AppState
from prefect_anylaunch import AnylaunchAppFailedError, AnylaunchJob, get_app_logs, run_app
from tests.integrations.sweep_apps import FAILING_INDEX, SHARDS, expected_indices, failing_sweep


def test_sweep_succeeds_by_ratio_with_per_index_results_and_a_table(pf) -> None:
    app = failing_sweep("shards", min_success_ratio=0.8)
    state = run_app(AnylaunchJob(app=app, poll_interval_s=0.5), return_state=True)

    assert state.is_completed(), state.message
    result = state.result()
    assert result["state"] == "SUCCEEDED", result
    assert result["indices"] == expected_indices()
    assert result["failed_indices"] == str(FAILING_INDEX)
    assert result["array"]["counts"] == {"SUCCEEDED": 4, "FAILED": 1}
    assert pf.app_status(result["app_handle"]).state == AppState.SUCCEEDED
    flow_run_id = state.state_details.flow_run_id
    artifacts = {a.key: a for a in pf.run_artifacts(flow_run_id)}
    table = artifacts["anylaunch-shards-indices"]
    rows = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert [(r["index"], r["state"], r["exit_code"], r["shard"]) for r in rows] == [
        (i, "FAILED" if i == FAILING_INDEX else "SUCCEEDED", 1 if i == FAILING_INDEX else 0, s)
        for i, s in enumerate(SHARDS)
    ]
    assert "failed indices: 3 (exit 1)" in table.description
    logs = "\n".join(pf.run_logs(flow_run_id))
    for i, shard in enumerate(SHARDS):
        assert f"w/{i} shard={shard} index={i}" in logs, logs
    assert "4/5 succeeded (4 required); failed indices: 3 (exit 1)" in logs
    # one index's log, addressed as its role's replica
    assert get_app_logs.fn(result["app_handle"], "w", k=3) == {"w/3": ["shard=d index=3"]}


def test_sweep_below_its_ratio_fails_the_flow_naming_the_failed_index(pf) -> None:
    app = failing_sweep("strict", min_success_ratio=1.0)
    state = run_app(AnylaunchJob(app=app, poll_interval_s=0.5), return_state=True)

    assert state.is_failed()
    error = state.result(raise_on_failure=False)
    assert type(error) is AnylaunchAppFailedError, error
    assert "ended FAILED" in str(error) and "failed indices: 3 (exit 1)" in str(error), error
    assert error.status is not None and error.status.array is not None
    assert error.status.array.failed() == [FAILING_INDEX]
    assert pf.app_status(error.app_handle).state == AppState.FAILED
    artifacts = {a.key: a for a in pf.run_artifacts(state.state_details.flow_run_id)}
    assert "4/5 succeeded (5 required)" in artifacts["anylaunch-strict-indices"].description
