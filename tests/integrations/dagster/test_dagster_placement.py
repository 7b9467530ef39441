"""Placement through the Dagster resource, op config and factories, on real Dagster runs with
real local_cwd apps: a target whose capacity says no is skipped (the output metadata says so),
an infrastructure loss is relaunched by the step that launched the app and, after a run worker
crash, by the re-execution that reattaches to it (and drives it), an application failure is
never relaunched, and bad targets are refused naming the field before anything is launched."""

import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any, Dict, List

import dagster as dg
import pytest
from dagster._core.definitions.reconstruct import ReconstructableJob

from anylaunch.specs import AppDef, Role
from anylaunch.specs.errors import InvalidSpecError
from dagster_anylaunch import AnylaunchOpConfig, AnylaunchResource, build_anylaunch_op
from dagster_anylaunch._lifecycle import run_tag_key
from tests.integrations.placement_plugin import (
    EXITS_3,
    FULL,
    FULL_REASON,
    RESUMABLE,
    checkpoint_written,
    full_local_plugin,
    kill_running_supervisor,
    wait_until,
)

__all__ = ["full_local_plugin"]  # a fixture, imported for the tests below

HERE = Path(__file__).resolve().parent


def python_app(name: str, code: str) -> AppDef:
    return AppDef(name, [Role("main", image=".", entrypoint=sys.executable, args=["-c", code])])


def one_op_job(op_def: dg.OpDefinition, resource: AnylaunchResource) -> dg.JobDefinition:
    @dg.job(name=f"{op_def.name}_job", resource_defs={"anylaunch": resource})
    def _job() -> None:
        op_def()

    return _job


def output_metadata(result: dg.ExecuteInProcessResult, step: str) -> Dict[str, Any]:
    (output,) = [e for e in result.events_for_node(step) if e.is_successful_output]
    return output.step_output_data.metadata


def outcomes(placement: Dict[str, Any]) -> List[Any]:
    return [(e["attempt"], e["scheduler"], e["outcome"]) for e in placement["entries"]]


@pytest.fixture
def ckpt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ckpt"
    monkeypatch.setenv("ANYLAUNCH_CHECKPOINT_ROOT", str(root))
    return root


@pytest.mark.usefixtures("full_local_plugin", "ckpt")
def test_a_full_target_is_skipped_and_the_metadata_says_so(
    instance: dg.DagsterInstance, user_logs, launched_apps
) -> None:
    op_def = build_anylaunch_op("placed", python_app("placed", "print('placed ok')"))
    resource = AnylaunchResource(poll_interval_s=0.2)
    run_config = {
        "ops": {
            "placed": {
                "config": {
                    "targets": [
                        {"scheduler": FULL},
                        {"scheduler": "local_cwd", "startup_timeout": 60},
                    ]
                }
            }
        }
    }

    result = one_op_job(op_def, resource).execute_in_process(
        run_config=run_config, instance=instance
    )

    assert result.success
    meta = output_metadata(result, "placed")
    assert meta["handle"].value.startswith("placement://")
    assert meta["anylaunch/attempt"].value == 0
    placement = meta["anylaunch/placement"].data
    assert outcomes(placement) == [(0, FULL, "skipped"), (0, "local_cwd", "ended")]
    assert FULL_REASON in placement["entries"][0]["reason"]
    logs = user_logs(instance, result.run_id)
    assert any(f"attempt 0 on {FULL}: skipped" in m for m in logs), logs
    assert any("[1] local_cwd cfg: (defaults); startup timeout 60 s" in m for m in logs), logs
    assert any("main/0 placed ok" in m for m in logs), logs
    assert len(launched_apps()) == 1


@pytest.mark.usefixtures("ckpt")
def test_an_infrastructure_loss_is_relaunched_by_the_step(ckpt: Path, launched_apps) -> None:
    op_def = build_anylaunch_op("resumable", python_app("resumable", RESUMABLE))
    resource = AnylaunchResource(targets=["local_cwd"], max_infra_retries=1, poll_interval_s=0.2)
    lost: List[str] = []

    def lose_the_machine() -> None:
        wait_until("attempt 0's checkpoint", lambda: checkpoint_written(ckpt))
        lost.append(kill_running_supervisor())

    killer = threading.Thread(target=lose_the_machine, daemon=True)
    killer.start()
    try:
        result = one_op_job(op_def, resource).execute_in_process()
    finally:
        killer.join(timeout=120)

    assert result.success
    meta = output_metadata(result, "resumable")
    assert meta["final_state"].value == "SUCCEEDED"
    assert meta["anylaunch/attempt"].value == 1
    placement = meta["anylaunch/placement"].data
    assert outcomes(placement) == [(0, "local_cwd", "relaunched"), (1, "local_cwd", "ended")]
    assert placement["entries"][0]["handle"] == lost[0]
    assert "supervisor died" in placement["entries"][0]["reason"]
    assert len(launched_apps()) == 2


@pytest.mark.usefixtures("ckpt")
def test_an_application_failure_is_not_relaunched(launched_apps) -> None:
    op_def = build_anylaunch_op(
        "exits3", python_app("exits3", EXITS_3), targets=["local_cwd", "local_cwd"]
    )
    resource = AnylaunchResource(poll_interval_s=0.2, max_infra_retries=0)
    run_config = {"ops": {"exits3": {"config": {"max_infra_retries": 2}}}}

    result = one_op_job(op_def, resource).execute_in_process(
        run_config=run_config, raise_on_error=False
    )

    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    meta = failure.step_failure_data.user_failure_data.metadata
    assert meta["exit_code"].value == 3
    assert meta["anylaunch/attempt"].value == 0
    assert [e["outcome"] for e in meta["anylaunch/placement"].data["entries"]] == ["ended"]
    assert len(launched_apps()) == 1


def test_reexecution_after_a_worker_crash_drives_the_placed_app_it_reattaches_to(
    ckpt: Path,
    instance_dir: Path,
    persistent_instance: dg.DagsterInstance,
    launched_apps,
    user_logs,
    wait_for,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the run worker and the steps Dagster starts import the jobs' shared helpers from tests/,
    # however the suite itself was launched
    root = str(HERE.parents[2])
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    )
    run_id = str(uuid.uuid4())
    worker = subprocess.Popen(
        [sys.executable, str(HERE / "run_worker.py"), str(instance_dir), "placed_job", run_id],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    try:
        wait_for("attempt 0's checkpoint", lambda: checkpoint_written(ckpt), timeout=120)
    finally:
        worker.send_signal(signal.SIGKILL)  # the run worker dies: nothing drives the app
        worker.wait(timeout=30)
    crashed = persistent_instance.get_run_by_id(run_id)
    assert crashed is not None
    handle = crashed.tags[run_tag_key("placed_step")]
    assert handle.startswith("placement://")
    lost = kill_running_supervisor()  # and then the platform loses attempt 0
    persistent_instance.report_run_failed(crashed)  # what run monitoring does

    with dg.execute_job(
        ReconstructableJob.for_file(str(HERE / "dagster_jobs.py"), "placed_job"),
        persistent_instance,
        reexecution_options=dg.ReexecutionOptions.from_failure(run_id, persistent_instance),
        tags={"dagster/is_resume_retry": "true"},
    ) as result:
        assert result.success
        assert result.output_for_node("placed_step") == 1  # the attempt it ended with
        logs = user_logs(persistent_instance, result.run_id)

    assert any(f"reattaching to app {handle}" in m for m in logs), logs
    assert any(f"attempt 0 on local_cwd ({lost}): relaunched" in m for m in logs), logs
    assert any("main/0 attempt 1 resumes from attempt 0" in m for m in logs), logs
    assert len(launched_apps()) == 2  # attempt 0 and the relaunch: no duplicate


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: AnylaunchResource(targets="local_cwd"), "AnylaunchResource.targets"),
        (lambda: AnylaunchResource(targets=[]), "AnylaunchResource.targets"),
        (
            lambda: AnylaunchResource(targets=["local_cwd", "nope"]),
            "AnylaunchResource.targets[1].scheduler",
        ),
        (
            lambda: AnylaunchResource(targets=[{"scheduler": "local_cwd", "startup_timout": 1}]),
            "AnylaunchResource.targets[0].startup_timout",
        ),
        (
            lambda: AnylaunchResource(targets=["local_cwd"], scheduler="local_cwd"),
            "AnylaunchResource.scheduler",
        ),
        (
            lambda: AnylaunchResource(targets=["local_cwd"], cfg={"log_dir": "/x"}),
            "AnylaunchResource.cfg",
        ),
        (
            lambda: AnylaunchResource(targets=["local_cwd"], max_infra_retries=-1),
            "AnylaunchResource.max_infra_retries",
        ),
        (lambda: AnylaunchResource(max_infra_retries=1), "AnylaunchResource.max_infra_retries"),
        (
            lambda: AnylaunchResource(targets=["local_cwd"], checkpoint_root=""),
            "AnylaunchResource.checkpoint_root",
        ),
        (
            lambda: build_anylaunch_op("o", component="utils.echo", targets=[{"cfg": {}}]),
            "targets[0].scheduler",
        ),
        (
            lambda: build_anylaunch_op(
                "o", component="utils.echo", targets=["local_cwd"], scheduler="local_cwd"
            ),
            "scheduler",
        ),
    ],
)
def test_bad_targets_are_refused_naming_the_field(make: Any, field: str) -> None:
    with pytest.raises(Exception) as caught:
        make()
    error = caught.value
    while not isinstance(error, InvalidSpecError) and error.__cause__ is not None:
        error = error.__cause__
    if not isinstance(error, InvalidSpecError):  # pydantic's wrapper says ours
        assert f"{field}=" in str(caught.value), caught.value
    else:
        assert error.field == field, error


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"targets": [{"scheduler": "nope"}]}, "AnylaunchOpConfig.targets[0].scheduler"),
        (
            {"targets": [{"scheduler": "local_cwd"}], "scheduler": "local_cwd"},
            "AnylaunchOpConfig.scheduler",
        ),
        ({"targets": [{"scheduler": "local_cwd"}], "cfg": {"a": 1}}, "AnylaunchOpConfig.cfg"),
        ({"max_infra_retries": 1}, "AnylaunchOpConfig.max_infra_retries"),
        (
            {"targets": [{"scheduler": "local_cwd"}], "max_infra_retries": 1000},
            "AnylaunchOpConfig.max_infra_retries",
        ),
    ],
)
def test_bad_targets_in_op_config_fail_the_step_without_retries(
    config: Dict[str, Any], field: str, launched_apps
) -> None:
    op_def = build_anylaunch_op(
        "bad", python_app("bad", "pass"), retry_policy=dg.RetryPolicy(max_retries=2)
    )
    dg.validate_run_config(
        one_op_job(op_def, AnylaunchResource()), {"ops": {"bad": {"config": config}}}
    )
    AnylaunchOpConfig(**config)  # the schema takes it: the launch refuses it

    result = one_op_job(op_def, AnylaunchResource()).execute_in_process(
        run_config={"ops": {"bad": {"config": config}}}, raise_on_error=False
    )

    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]  # no retry
    assert field in failure.step_failure_data.error.message
    assert launched_apps() == []


PIPES_APP = """\
import os
from dagster_pipes import open_dagster_pipes

with open_dagster_pipes() as pipes:
    pipes.report_asset_materialization(
        metadata={"attempt": {"raw_value": int(os.environ["ANYLAUNCH_ATTEMPT"]), "type": "int"}}
    )
"""


@pytest.mark.usefixtures("full_local_plugin", "ckpt")
def test_a_pipes_session_runs_on_the_target_that_can_take_the_app(
    instance: dg.DagsterInstance, launched_apps
) -> None:
    from dagster_anylaunch import PipesAnylaunchClient

    @dg.asset
    def placed_table(
        context: dg.AssetExecutionContext, pipes_anylaunch: PipesAnylaunchClient
    ) -> dg.MaterializeResult:
        app = python_app("pipes-placed", PIPES_APP)
        invocation = pipes_anylaunch.run(context=context, app=app, targets=[FULL, "local_cwd"])
        return invocation.get_materialize_result()

    client = PipesAnylaunchClient(AnylaunchResource(poll_interval_s=0.2))
    result = dg.materialize(
        [placed_table], resources={"pipes_anylaunch": client}, instance=instance
    )

    assert result.success
    (materialization,) = result.asset_materializations_for_node("placed_table")
    meta = materialization.metadata
    assert meta["attempt"].value == 0  # what the app itself reported through Pipes
    assert meta["anylaunch/attempt"].value == 0
    assert outcomes(meta["anylaunch/placement"].data) == [
        (0, FULL, "skipped"),
        (0, "local_cwd", "ended"),
    ]
    assert len(launched_apps()) == 1
