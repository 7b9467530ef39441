"""Placement through the Prefect blocks, tasks and flow, on real Prefect with real local_cwd
apps: a target whose capacity says no is skipped (the result and the placement artifact say
so), an infrastructure loss is relaunched by the task that waits (it attaches to the placed
app launched by another flow run and drives it), an application failure is never relaunched,
and bad targets are refused naming the field before anything is launched."""

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest
from prefect import flow

from anylaunch.runner.placement import Placement, Target
from anylaunch.specs.errors import InvalidSpecError
from prefect_anylaunch import (
    AnylaunchAppFailedError,
    AnylaunchJob,
    AnylaunchSchedulerSettings,
    AnylaunchTarget,
    launch_app,
    run_app,
    wait_for_app,
)
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


def _artifact(pf: Any, flow_run_id: Any, key: str) -> List[str]:
    """The texts of every version of one artifact of the flow run, oldest first."""
    found = [a for a in pf.run_artifacts(flow_run_id) if a.key == key]
    return [a.data for a in sorted(found, key=lambda a: a.created)]


def _outcomes(result: Dict[str, Any]) -> List[Any]:
    return [(e["attempt"], e["scheduler"], e["outcome"]) for e in result["placement"]["entries"]]


@pytest.mark.usefixtures("full_local_plugin")
def test_a_full_target_is_skipped_and_the_result_and_artifact_say_so(pf, tmp_path: Path) -> None:
    job = AnylaunchJob(
        app=pf.py_app("placed", "print('placed ok', flush=True)"),
        targets=[FULL, {"scheduler": "local_cwd", "startup_timeout": 60}],
        checkpoint_root=str(tmp_path / "ckpt"),
        poll_interval_s=0.2,
    )
    job.save("placed-job")  # the targets survive a block document
    assert AnylaunchJob.load("placed-job").placement() == job.placement()

    state = run_app("placed-job", return_state=True)

    assert state.is_completed(), state.message
    result = state.result()
    assert result["app_handle"].startswith("placement://") and result["state"] == "SUCCEEDED"
    assert result["attempt"] == 0
    assert _outcomes(result) == [(0, FULL, "skipped"), (0, "local_cwd", "ended")]
    assert FULL_REASON in result["placement"]["entries"][0]["reason"]
    flow_run_id = state.state_details.flow_run_id
    logs = pf.run_logs(flow_run_id)
    assert any("w/0 placed ok" in m for m in logs), logs
    assert any(f"attempt 0 on {FULL}: skipped" in m for m in logs), logs  # said by the session
    request = _artifact(pf, flow_run_id, "anylaunch-placed-request")
    assert f"| 0 | `{FULL}` |" in request[-1] and "| 60 s |" in request[-1]
    history = _artifact(pf, flow_run_id, "anylaunch-placed-placement")
    assert len(history) == 2  # at launch, and at the end
    assert f"attempt 0 on {FULL}: skipped (no: {FULL_REASON})" in history[-1]
    assert "attempt 0 on local_cwd (local_cwd://" in history[-1] and "): ended" in history[-1]
    assert len(pf.launched_apps()) == 1


def test_an_infrastructure_loss_is_relaunched_by_the_task_that_waits(pf, tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    job = AnylaunchJob(
        app=pf.py_app("resumable", RESUMABLE),
        targets=["local_cwd"],
        max_infra_retries=1,
        checkpoint_root=str(root),
        poll_interval_s=0.2,
    )

    @flow
    def launch_only(job: AnylaunchJob) -> str:
        return launch_app(job)

    @flow
    def wait_only(handle: str, job: AnylaunchJob) -> Dict[str, Any]:
        return wait_for_app(handle, job)

    handle = launch_only(job)  # the process that launched it no longer drives it
    wait_until("attempt 0's checkpoint", lambda: checkpoint_written(root))
    lost = kill_running_supervisor()

    state = wait_only(handle, job, return_state=True)

    assert state.is_completed(), state.message
    result = state.result()
    assert result["app_handle"] == handle and result["state"] == "SUCCEEDED"
    assert result["attempt"] == 1
    assert _outcomes(result) == [(0, "local_cwd", "relaunched"), (1, "local_cwd", "ended")]
    first = result["placement"]["entries"][0]
    assert first["handle"] == lost and "supervisor died" in first["reason"]
    logs = pf.run_logs(state.state_details.flow_run_id)
    assert any("w/0 attempt 1 resumes from attempt 0" in m for m in logs), logs
    assert any("attempt 0 on local_cwd" in m and "relaunched" in m for m in logs), logs
    assert len(pf.launched_apps()) == 2


def test_an_application_failure_is_not_relaunched(pf, tmp_path: Path) -> None:
    job = AnylaunchJob(
        app=pf.py_app("exits3", EXITS_3),
        targets=["local_cwd", "local_cwd"],
        max_infra_retries=2,
        checkpoint_root=str(tmp_path / "ckpt"),
        poll_interval_s=0.2,
    )

    state = run_app(job, return_state=True)

    assert state.is_failed()
    error = state.result(raise_on_failure=False)
    assert isinstance(error, AnylaunchAppFailedError), error
    assert error.status is not None and error.status.placement is not None
    assert error.status.placement.attempt == 0
    assert [e.outcome for e in error.status.placement.entries] == ["ended"]
    assert len(pf.launched_apps()) == 1
    history = _artifact(pf, state.state_details.flow_run_id, "anylaunch-exits3-placement")
    assert "attempt 0 on local_cwd (local_cwd://" in history[-1]


def test_a_target_on_the_settings_scheduler_gets_its_run_options() -> None:
    settings = AnylaunchSchedulerSettings(scheduler="local_cwd", secret_cfg={"log_dir": "/s"})
    job = AnylaunchJob(
        component="utils.echo",
        settings=settings,
        targets=[
            AnylaunchTarget(scheduler="slurm", cfg={"partition": "debug"}),
            Target("local_cwd", {"cancel_grace_s": 1.0}),
        ],
    )
    placement = job.placement()
    assert placement is not None
    assert [(t.scheduler, dict(t.cfg or {})) for t in placement.resolved_targets] == [
        ("slurm", {"partition": "debug"}),
        ("local_cwd", {"log_dir": "/s", "cancel_grace_s": 1.0}),
    ]
    # the stored form: plain data, the settings' secret run options not in it
    stored = json.dumps(job.model_dump(mode="json")["targets"])
    assert "/s" not in stored and "partition" in stored


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"targets": "local_cwd"}, "AnylaunchJob.targets"),
        ({"targets": []}, "AnylaunchJob.targets"),
        ({"targets": [5]}, "AnylaunchJob.targets[0]"),
        ({"targets": ["local_cwd", "local_cwdd"]}, "AnylaunchJob.targets[1].scheduler"),
        ({"targets": [{"schedulr": "local_cwd"}]}, "AnylaunchJob.targets[0].schedulr"),
        ({"targets": [{"cfg": {}}]}, "AnylaunchJob.targets[0].scheduler"),
        (
            {"targets": [{"scheduler": "local_cwd", "startup_timeout": -1}]},
            "AnylaunchJob.targets[0].startup_timeout",
        ),
        (
            {"targets": [{"scheduler": "local_cwd", "cfg": ["a=b"]}]},
            "AnylaunchJob.targets[0].cfg",
        ),
        ({"targets": ["local_cwd"], "scheduler": "local_cwd"}, "AnylaunchJob.scheduler"),
        ({"targets": ["local_cwd"], "cfg": {"log_dir": "/x"}}, "AnylaunchJob.cfg"),
        ({"targets": ["local_cwd"], "max_infra_retries": 101}, "AnylaunchJob.max_infra_retries"),
        ({"targets": ["local_cwd"], "max_infra_retries": True}, "AnylaunchJob.max_infra_retries"),
        ({"targets": ["local_cwd"], "checkpoint_root": " "}, "AnylaunchJob.checkpoint_root"),
        ({"max_infra_retries": 2}, "AnylaunchJob.max_infra_retries"),
        ({"checkpoint_root": "/ckpt"}, "AnylaunchJob.checkpoint_root"),
    ],
)
def test_bad_targets_are_refused_naming_the_field(fields: Dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidSpecError) as caught:
        AnylaunchJob(component="utils.echo", **fields)
    assert caught.value.field == field, caught.value


def test_a_core_placement_is_taken_as_it_is() -> None:
    placement = Placement([Target("local_cwd", startup_timeout=5)], max_infra_retries=3)
    job = AnylaunchJob(
        component="utils.echo",
        targets=list(placement.targets),
        max_infra_retries=placement.max_infra_retries,
    )
    placed = job.placement()
    assert placed is not None and placed.max_infra_retries == 3
    assert [(t.scheduler, t.cfg, t.startup_timeout) for t in placed.resolved_targets] == [
        ("local_cwd", {}, 5)
    ]
