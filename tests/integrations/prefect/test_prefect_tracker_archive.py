"""What a job tracked and its archived record show in Prefect (the result's ``tracker`` and
``archive_url``, a markdown artifact); ``wait_for_app`` on an app whose backend forgot it
reads its outcome and every line from the archive instead of failing it as lost."""

import os
from pathlib import Path
from typing import Any, Dict

import pytest
from prefect import flow

from anylaunch.runner.archive import Archive
from prefect_anylaunch import AnylaunchAppFailedError, AnylaunchJob, run_app, wait_for_app
from tests.integrations.tracked_apps import archived_app, check_tracked, configure, tracking_app


def test_what_the_job_tracked_is_in_the_result_and_an_artifact(
    pf: Any, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, archive = configure(monkeypatch, isolated)
    state = run_app(AnylaunchJob(app=tracking_app(), poll_interval_s=0.5), return_state=True)
    assert state.is_completed(), state.message
    result = state.result()
    handle = result["app_handle"]
    check_tracked(result["tracker"], handle)
    assert result["archive_url"] == Archive(str(archive)).location(handle)
    assert Archive(str(archive)).has(handle)  # the link names a complete record
    artifacts = {a.key: a for a in pf.run_artifacts(state.state_details.flow_run_id)}
    text = artifacts["anylaunch-tracks-tracker"].data
    assert "| lr | 0.1 |" in text and "| model | /tmp/x | {} |" in text, text
    assert result["archive_url"] in text, text


@flow
def waits(handle: str) -> Dict[str, Any]:
    return wait_for_app(handle, AnylaunchJob(poll_interval_s=0.5))


@pytest.mark.parametrize("succeed", [True, False], ids=["succeeded", "failed"])
def test_wait_reads_an_archived_outcome_and_its_lines(
    pf: Any, isolated: Path, monkeypatch: pytest.MonkeyPatch, succeed: bool
) -> None:
    configure(monkeypatch, isolated)
    handle = archived_app(isolated / "local_cwd_state", succeed)
    state = waits(handle, return_state=True)
    logs = "\n".join(pf.run_logs(state.state_details.flow_run_id))
    assert "archived line" in logs, logs  # the lines came from the archive
    if succeed:
        assert state.is_completed(), state.message
        result = state.result()
        assert result["state"] == "SUCCEEDED" and "from the archive" in result["msg"], result
        assert result["archive_url"].endswith(handle.split("://", 1)[1]), result
    else:  # failed as the app did, not as lost
        assert state.is_failed()
        error = state.result(raise_on_failure=False)
        assert type(error) is AnylaunchAppFailedError, error
        assert "exit code 3" in str(error) and "from the archive" in str(error), error


def test_a_tracker_that_cannot_be_read_is_a_warning_not_a_failed_task(
    pf: Any, isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tracking, _ = configure(monkeypatch, isolated)
    factory = "tests.integrations.tracked_apps:unreadable"
    monkeypatch.setenv("ANYLAUNCH_TRACKERS", factory)
    # the job builds its tracker from tests/ too, however the suite itself was launched
    root = str(Path(__file__).resolve().parents[3])
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    )
    monkeypatch.setenv(
        "ANYLAUNCH_TRACKER_TESTS_INTEGRATIONS_TRACKED_APPS_UNREADABLE_CONFIG", str(tracking)
    )
    state = run_app(AnylaunchJob(app=tracking_app(), poll_interval_s=0.5), return_state=True)
    assert state.is_completed(), state.message
    result = state.result()
    assert "tracker" not in result and "archive_url" in result, result
    assert any(tracking.iterdir()), "the job tracked (it writes; only reading fails)"
    assert "could not read what run" in caplog.text and "no read access" in caplog.text
