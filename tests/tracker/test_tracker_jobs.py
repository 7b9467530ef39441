"""Real local_cwd jobs track through ``AppRun.run_from_env()`` with the trackers their launcher
configured, and ``anylaunch tracker list`` (a separate process) reads it back."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from anylaunch.runner import get_runner
from anylaunch.specs import AppDef, AppState, Resource, Role, macros
from anylaunch.tracker.api import ENV_ANYLAUNCH_JOB_ID, ENV_ANYLAUNCH_PARENT_RUN_ID
from tests.cli.conftest import Cli

JOB = """
import sys
from anylaunch.tracker import AppRun

run = AppRun.run_from_env()
rank = sys.argv[1]
run.add_metadata(lr=0.1, **{"replica_" + rank: True})
if rank == "0":
    run.add_artifact("model", "/tmp/x/model.pt", {"format": "torchscript"})
print("tracked as", run.job_id())
"""


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process launches: its own state dir, no config or tracker of the caller."""
    for name in ("ANYLAUNCH_TRACKERS", ENV_ANYLAUNCH_JOB_ID, ENV_ANYLAUNCH_PARENT_RUN_ID):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANYLAUNCHCONFIG", "")
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "launcher-state"))


def _train(replicas: int = 2) -> AppDef:
    role = Role(
        "trainer",
        image=".",
        entrypoint=sys.executable,
        args=["-c", JOB, macros.replica_id],
        num_replicas=replicas,
        resource=Resource(cpu=1, gpu=0, memMB=128),
    )
    return AppDef("train", [role])


def _launch(app: AppDef, parent_run_id: str | None = None) -> str:
    with get_runner("team") as runner:
        handle = runner.run(app, "local_cwd", parent_run_id=parent_run_id)
        status = runner.wait(handle, wait_interval=0.2, timeout=120)
    assert status is not None and status.state == AppState.SUCCEEDED, status
    return handle


def _reader(tmp_path: Path) -> Cli:
    """The CLI in its own process, cwd and HOME: it finds the tracker as configured only."""
    (tmp_path / "reader").mkdir()
    return Cli(tmp_path / "reader")


def _ok(result: object) -> str:
    assert result.returncode == 0, result.stderr  # type: ignore[attr-defined]
    out: str = result.stdout  # type: ignore[attr-defined]
    return out


def test_a_job_tracks_through_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "team.anylaunchconfig"
    config.write_text(
        f"[anylaunch:tracker]\nfs = fsspec\n\n[tracker:fs]\nconfig = {tmp_path / 'tracking'}\n"
    )
    monkeypatch.setenv("ANYLAUNCHCONFIG", str(config))
    handle = _launch(_train(), parent_run_id="experiment-7")
    cli = _reader(tmp_path)
    env = {"ANYLAUNCHCONFIG": str(config)}

    assert json.loads(_ok(cli("tracker", "list", "metadata", "--json", handle, env=env))) == {
        "lr": 0.1,
        "replica_0": True,
        "replica_1": True,
    }
    table = _ok(cli("tracker", "list", "metadata", handle, env=env)).splitlines()
    assert table[0].split() == ["KEY", "VALUE"] and ["lr", "0.1"] in [r.split() for r in table]
    artifacts = _ok(cli("tracker", "list", "artifacts", handle, env=env))
    assert "model" in artifacts and "/tmp/x/model.pt" in artifacts
    assert json.loads(
        _ok(cli("tracker", "list", "artifacts", "--json", "--artifact", "model", handle, env=env))
    ) == [{"name": "model", "path": "/tmp/x/model.pt", "metadata": {"format": "torchscript"}}]
    assert _ok(cli("tracker", "list", "jobs", env=env)).split() == ["RUN", "ID", handle]
    by_parent = cli("tracker", "list", "jobs", "--json", "--parent-run-id", "experiment-7", env=env)
    assert json.loads(_ok(by_parent)) == [{"run_id": handle}]
    other = cli("tracker", "list", "jobs", "--json", "--parent-run-id", "experiment-8", env=env)
    assert json.loads(_ok(other)) == []

    # clear errors: an unknown run, an unknown artifact, no tracker at all
    unknown = cli("tracker", "list", "metadata", handle + "x", env=env)
    assert unknown.returncode == 1 and "the tracker has no run" in unknown.stderr
    missing = cli("tracker", "list", "artifacts", "--artifact", "modle", handle, env=env)
    assert missing.returncode == 1 and "Did you mean 'model'?" in missing.stderr
    none = cli("tracker", "list", "jobs")
    assert none.returncode == 1 and "no tracker is configured" in none.stderr


PLUGIN = """
from anylaunch.plugins import register
from anylaunch.tracker.backend.fsspec import FsspecTracker


class Stamped(FsspecTracker):
    def add_metadata(self, run_id, **kwargs):
        super().add_metadata(run_id, tracked_by="stamped", **kwargs)


@register.tracker()
def stamped(config):
    return Stamped(config)
"""


def test_a_plugin_tracker_from_the_launchers_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a real anylaunch_plugins namespace package, on the path of the job and of the reader
    plugin = tmp_path / "plugin" / "anylaunch_plugins" / "tracker"
    plugin.mkdir(parents=True)
    (plugin / "stamped.py").write_text(PLUGIN)
    bare_path = os.environ.get("PYTHONPATH", "")
    path = f"{tmp_path / 'plugin'}:{bare_path}"
    tracking = {"ANYLAUNCH_TRACKERS": "stamped", "ANYLAUNCH_TRACKER_STAMPED_CONFIG": str(tmp_path)}
    monkeypatch.setenv("PYTHONPATH", path)
    for name, value in tracking.items():
        monkeypatch.setenv(name, value)
    handle = _launch(_train(replicas=1))

    cli = _reader(tmp_path)
    env = {**tracking, "PYTHONPATH": path}
    metadata = json.loads(_ok(cli("tracker", "list", "metadata", "--json", handle, env=env)))
    assert metadata == {"tracked_by": "stamped", "lr": 0.1, "replica_0": True}
    # without the plugin installed, the reader says which tracker it cannot build
    bare = cli("tracker", "list", "jobs", env={**tracking, "PYTHONPATH": bare_path})
    assert bare.returncode == 1 and "ANYLAUNCH_TRACKERS='stamped'" in bare.stderr
