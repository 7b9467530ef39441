"""What a job tracked and its archived record show in Dagster (``anylaunch/tracker/<key>``,
``anylaunch/artifact/<name>`` and ``anylaunch/archive_url`` metadata); a step retry that finds
the app of its earlier attempt forgotten by the backend reads its outcome and every line from
the archive (reattaches to a success, relaunches after a failure) instead of losing it."""

import contextlib
import os
import shutil
import sys
from pathlib import Path

import dagster as dg
import pytest

from anylaunch.runner.archive import Archive
from anylaunch.specs import AppDef, Role
from dagster_anylaunch import AnylaunchResource, build_anylaunch_asset
from tests.integrations.tracked_apps import check_tracked, configure, tracking_app

FAST = AnylaunchResource(poll_interval_s=0.2)


def test_what_the_job_tracked_is_materialization_metadata(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, launched_apps
) -> None:
    _, archive = configure(monkeypatch, isolated)
    result = dg.materialize(
        [build_anylaunch_asset("tracks", tracking_app(), scheduler="local_cwd")],
        resources={"anylaunch": FAST},
    )
    assert result.success
    (app,) = launched_apps()
    (materialization,) = result.asset_materializations_for_node("tracks")
    meta = materialization.metadata
    assert meta["anylaunch/tracker/lr"].value == 0.1
    assert isinstance(meta["anylaunch/artifact/model"], dg.PathMetadataValue)
    assert meta["anylaunch/artifact/model"].value == "/tmp/x"
    assert meta["anylaunch/archive_url"].value == Archive(str(archive)).location(app.app_handle)
    assert Archive(str(archive)).has(app.app_handle)
    from anylaunch.tracker.results import tracked

    check_tracked(tracked(app.app_handle), app.app_handle)  # what the metadata shows, in full


def _forgetful_job(app: AppDef, marker: Path, state_dir: Path) -> dg.JobDefinition:
    """A job whose step runs ``app``; its first try then deletes the local_cwd state dir (the
    backend forgets the app) and fails, so the retry finds only the archive."""

    @dg.op(retry_policy=dg.RetryPolicy(max_retries=1))
    def forgets(context: dg.OpExecutionContext, anylaunch: AnylaunchResource) -> str:
        if not marker.exists():
            marker.touch()
            with contextlib.suppress(dg.Failure):  # a failed app: the retry must see it too
                anylaunch.run(context, app)
            shutil.rmtree(state_dir)
            raise dg.Failure("the worker lost the step after the app ended")
        run = anylaunch.run(context, app)
        context.add_output_metadata(run.metadata())
        return run.handle

    @dg.job(resource_defs={"anylaunch": FAST})
    def forgetful() -> None:
        forgets()

    return forgetful


def _logs(instance: dg.DagsterInstance, run_id: str) -> str:
    return "\n".join(
        e.user_message for e in instance.all_logs(run_id) if e.user_message is not None
    )


def test_a_retry_reattaches_to_an_archived_success_with_its_lines(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, instance: dg.DagsterInstance, launched_apps
) -> None:
    configure(monkeypatch, isolated)
    state = isolated / "local_cwd_state"
    job = _forgetful_job(tracking_app(), isolated / "marker", state)
    result = job.execute_in_process(instance=instance)
    assert result.success
    handle = result.output_for_node("forgets")
    logs = _logs(instance, result.run_id)
    assert f"reattaching to app {handle} (SUCCEEDED)" in logs, logs
    assert f"trainer/0 tracked as {handle}" in logs, logs  # its lines, from the archive
    assert launched_apps() == []  # the retry launched nothing (and the backend forgot it)
    (meta,) = [
        e.event_specific_data.metadata
        for e in result.all_events
        if e.event_type_value == "STEP_OUTPUT"
    ]
    assert meta["final_state"].value == "SUCCEEDED"
    assert meta["anylaunch/tracker/lr"].value == 0.1
    assert meta["anylaunch/archive_url"].value.endswith(handle.split("://", 1)[1])


def test_a_retry_after_an_archived_failure_relaunches_instead_of_losing_it(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, instance: dg.DagsterInstance
) -> None:
    configure(monkeypatch, isolated)
    script = "print('archived line', flush=True); raise SystemExit(3)"
    app = AppDef("fails", [Role("job", image=".", entrypoint=sys.executable, args=["-c", script])])
    job = _forgetful_job(app, isolated / "marker", isolated / "local_cwd_state")
    result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success  # the relaunched app fails as well
    logs = _logs(instance, result.run_id)
    # the earlier attempt's app is known FAILED (from the archive), not gone
    assert "of an earlier attempt ended FAILED: launching anew" in logs, logs
    assert "is gone" not in logs, logs
    failure = result.failure_data_for_node("forgets")
    assert failure is not None and failure.user_failure_data is not None
    meta = failure.user_failure_data.metadata
    assert meta["final_state"].value == "FAILED" and "anylaunch/archive_url" in meta
    assert os.path.isdir(meta["anylaunch/archive_url"].value)
