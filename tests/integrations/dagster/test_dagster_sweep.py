"""A sweep (one array app) on real in-process Dagster with real local_cwd apps: an asset that
is a sweep materializes once with per-index metadata, every index's lines reach the step's
log, and an op fails by min_success_ratio with the failed index named."""

import dagster as dg

from dagster_anylaunch import AnylaunchResource, build_anylaunch_asset, build_anylaunch_op
from tests.integrations.sweep_apps import FAILING_INDEX, SHARDS, failing_sweep

FAST = AnylaunchResource(poll_interval_s=0.2)


def test_a_sweep_asset_materializes_once_with_per_index_metadata(instance, user_logs) -> None:
    asset_def = build_anylaunch_asset("shards", failing_sweep("shards", min_success_ratio=0.8))
    result = dg.materialize([asset_def], resources={"anylaunch": FAST}, instance=instance)

    assert result.success
    (materialization,) = result.asset_materializations_for_node("shards")
    meta = materialization.metadata
    assert meta["final_state"].value == "SUCCEEDED"
    assert meta["array_size"].value == len(SHARDS)
    assert meta["array_succeeded"].value == len(SHARDS) - 1
    assert meta["array_counts"].value == {"SUCCEEDED": 4, "FAILED": 1}
    assert meta["failed_indices"].value == str(FAILING_INDEX)
    rows = [record.data for record in meta["indices"].value.records]
    assert rows == [
        {
            "index": i,
            "state": "FAILED" if i == FAILING_INDEX else "SUCCEEDED",
            "exit_code": 1 if i == FAILING_INDEX else 0,
            "shard": shard,
        }
        for i, shard in enumerate(SHARDS)
    ]
    assert "| 3 | FAILED | 1 | d |" in meta["indices_markdown"].value
    logs = "\n".join(user_logs(instance, result.run_id))
    for i, shard in enumerate(SHARDS):
        assert f"w/{i} shard={shard} index={i}" in logs, logs
    assert "4/5 succeeded (4 required); failed indices: 3 (exit 1)" in logs


def test_a_sweep_op_below_its_ratio_fails_naming_the_failed_index(instance) -> None:
    op_def = build_anylaunch_op("strict", failing_sweep("strict", min_success_ratio=1.0))

    @dg.job(resource_defs={"anylaunch": FAST})
    def strict_job() -> None:
        op_def()

    result = strict_job.execute_in_process(instance=instance, raise_on_error=False)

    assert not result.success
    failure = result.failure_data_for_node("strict")
    assert failure is not None and failure.user_failure_data is not None
    description = failure.user_failure_data.description or ""
    assert "ended FAILED" in description and "failed indices: 3 (exit 1)" in description
    meta = failure.user_failure_data.metadata
    assert meta["final_state"].value == "FAILED"
    assert meta["failed_indices"].value == str(FAILING_INDEX)
    assert meta["array_counts"].value == {"SUCCEEDED": 4, "FAILED": 1}
