"""Shared by the engines' tracker and archive tests: a job that tracks (``add_metadata``,
``add_artifact``) with the fsspec tracker the launching process configures by env, and an
app that ended, was archived, then forgotten by its backend (its local_cwd state deleted)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from anylaunch.runner import get_runner
from anylaunch.specs import AppDef, AppState, Role

#: What the job tracks (the engines must show exactly this).
TRACKS = """
from anylaunch.tracker import AppRun

run = AppRun.run_from_env()
run.add_metadata(lr=0.1)
run.add_artifact("model", "/tmp/x")
print("tracked as", run.job_id(), flush=True)
"""


def tracking_app() -> AppDef:
    """A one-role local_cwd app whose job tracks ``lr=0.1`` and the artifact ``model``."""
    role = Role("trainer", image=".", entrypoint=sys.executable, args=["-c", TRACKS])
    return AppDef("tracks", [role])


def configure(monkeypatch: Any, tmp_path: Path) -> tuple[Path, Path]:
    """This process launches with the fsspec tracker and an archive, both by env (no config
    file): returns (tracking root, archive root)."""
    tracking, archive = tmp_path / "tracking", tmp_path / "archive"
    tracking.mkdir()
    monkeypatch.setenv("ANYLAUNCHCONFIG", "")
    monkeypatch.setenv("ANYLAUNCH_TRACKERS", "fsspec")
    monkeypatch.setenv("ANYLAUNCH_TRACKER_FSSPEC_CONFIG", str(tracking))
    monkeypatch.setenv("ANYLAUNCH_ARCHIVE_URL", str(archive))
    for name in ("ANYLAUNCH_JOB_ID", "ANYLAUNCH_PARENT_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    return tracking, archive


def check_tracked(found: Any, handle: str) -> None:
    """``found`` (an engine's copy of ``tracked(handle)``) is what the job tracked."""
    assert isinstance(found, dict), found
    assert found["run_id"] == handle, found
    assert found["metadata"] == {"lr": 0.1}, found
    assert found["artifacts"] == {"model": {"path": "/tmp/x", "metadata": {}}}, found


def archived_app(state_dir: Path, succeed: bool) -> str:
    """Runs an app to its end with a plain runner (seeing the end archives it), then deletes
    the local_cwd state dir ``state_dir``: only the archive knows the app. Its stdout says
    ``archived line``; a failing one exits 3."""
    script = "print('archived line', flush=True)" + ("" if succeed else "; raise SystemExit(3)")
    role = Role("job", image=".", entrypoint=sys.executable, args=["-c", script])
    with get_runner() as runner:
        handle = runner.run(AppDef("archived", [role]), "local_cwd")
        status = runner.wait(handle, wait_interval=0.2, timeout=120)
    expected = AppState.SUCCEEDED if succeed else AppState.FAILED
    assert status is not None and status.state == expected, status
    shutil.rmtree(state_dir)
    with get_runner() as runner:  # the backend forgot it; the archive answers
        after = runner.status(handle)
    assert after is not None and "from the archive" in after.msg, after
    return handle


def unreadable(config: str | None) -> Any:
    """A tracker factory (``tests.integrations.tracked_apps:unreadable``): the fsspec tracker
    at ``config``, whose reads fail (a store that refuses the reader, e.g. its credentials)."""
    from anylaunch.tracker.backend.fsspec import FsspecTracker

    class Unreadable(FsspecTracker):
        def metadata(self, run_id: str) -> Any:
            raise PermissionError(f"no read access to {run_id}")

    return Unreadable(config)
