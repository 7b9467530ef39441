"""Scheduler.submit and Scheduler.cancel as TorchX documents them, on real local processes.

``local_cwd`` has no workspace support. The workspace build path runs on a scheduler that is
``local_cwd`` plus the shared-filesystem workspace (:class:`DirWorkspaceMixin`), the way a
plugin combines a backend with a workspace.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from anylaunch.schedulers.api import CANCEL_REQUESTED, Scheduler
from anylaunch.schedulers.local import state as ls
from anylaunch.schedulers.local_scheduler import LocalScheduler, create_scheduler
from anylaunch.specs import AppDef, AppDryRunInfo, AppState, CfgVal, Workspace
from anylaunch.specs.errors import InvalidRunConfigException, InvalidSpecError
from anylaunch.workspace.dir_workspace import DirWorkspaceMixin
from tests.schedulers.local_helpers import CFG, py_role, wait_done, wait_running

READ_DATA = "print(open('data.txt').read().strip())"
SLEEP = "import time; time.sleep(300)"


class LocalDirWorkspaceScheduler(DirWorkspaceMixin, LocalScheduler):
    """local_cwd with workspace support: the workspace becomes the role's directory."""

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        # local_cwd's own options only: job_dir was for the workspace build
        workspace_keys = {name for name, _ in self.workspace_opts()}
        local = {k: v for k, v in cfg.items() if k not in workspace_keys}
        return super()._submit_dryrun(app, local)


class NeverExistsScheduler(LocalScheduler):
    """A backend whose ``exists`` answers from somewhere else than ``describe``."""

    def exists(self, app_id: str) -> bool:
        return False


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "state"
    monkeypatch.setenv(ls.STATE_DIR_ENV, str(root))
    return root


def _cleanup(sched: LocalScheduler) -> None:
    for app in sched.list():
        if not app.state.is_terminal():
            sched.cancel(app.app_id)
            wait_done(sched, app.app_id)


@pytest.fixture
def sched() -> Iterator[LocalScheduler]:
    scheduler = create_scheduler("parity")
    yield scheduler
    _cleanup(scheduler)


@pytest.fixture
def ws_sched() -> Iterator[LocalDirWorkspaceScheduler]:
    scheduler = LocalDirWorkspaceScheduler("parity-ws")
    yield scheduler
    _cleanup(scheduler)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / "data.txt").write_text("from the workspace\n")
    return path


def _logs(sched: LocalScheduler, app_id: str) -> list[str]:
    return list(sched.log_iter(app_id, "w"))


# --- submit: workspace -----------------------------------------------------------------------


@pytest.mark.parametrize("as_str", [True, False])
def test_workspace_on_a_scheduler_without_workspaces_is_a_value_error(
    sched: LocalScheduler, project: Path, as_str: bool
) -> None:
    assert not isinstance(sched, DirWorkspaceMixin)
    app = AppDef("ws", roles=[py_role("w", READ_DATA)])
    workspace: str | Workspace = str(project) if as_str else Workspace({str(project): ""})
    with pytest.raises(ValueError, match="does not support workspaces") as err:
        sched.submit(app, dict(CFG), workspace=workspace)
    assert isinstance(err.value, InvalidSpecError) and err.value.field == "workspace"
    assert sched.list() == []  # nothing was submitted
    assert (app.roles[0].image, app.roles[0].workspace) == (".", None)


@pytest.mark.parametrize("workspace", [None, "", "  "])
def test_no_workspace_submits_as_is(sched: LocalScheduler, workspace: str | None) -> None:
    app_id = sched.submit(
        AppDef("plain", roles=[py_role("w", "print('ran')")]), dict(CFG), workspace
    )
    assert wait_done(sched, app_id).state == AppState.SUCCEEDED
    assert _logs(sched, app_id) == ["ran\n"]


def test_workspace_is_built_into_the_first_role_and_the_job_runs_in_it(
    ws_sched: LocalDirWorkspaceScheduler, project: Path
) -> None:
    app = AppDef("ws", roles=[py_role("w", READ_DATA)])
    app_id = ws_sched.submit(app, dict(CFG), workspace=str(project))
    assert wait_done(ws_sched, app_id).state == AppState.SUCCEEDED
    assert _logs(ws_sched, app_id) == ["from the workspace\n"]
    # as TorchX documents, submit updates the caller's roles in place
    assert app.roles[0].workspace == Workspace({str(project): ""})
    assert app.roles[0].image == str(project)


def test_every_role_with_a_workspace_is_built(
    ws_sched: LocalDirWorkspaceScheduler, project: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "data.txt").write_text("from the other workspace\n")
    second = py_role("v", READ_DATA, workspace=Workspace({str(other): ""}))
    app = AppDef("two", roles=[py_role("w", READ_DATA), second])
    app_id = ws_sched.submit(app, dict(CFG), workspace=str(project))
    assert wait_done(ws_sched, app_id).state == AppState.SUCCEEDED
    assert [role.image for role in app.roles] == [str(project), str(other)]
    assert _logs(ws_sched, app_id) == ["from the workspace\n"]
    assert list(ws_sched.log_iter(app_id, "v")) == ["from the other workspace\n"]


def test_a_mapped_workspace_is_copied_with_the_workspace_options(
    ws_sched: LocalDirWorkspaceScheduler, project: Path, tmp_path: Path
) -> None:
    app = AppDef("mapped", roles=[py_role("w", "print(open('code/data.txt').read().strip())")])
    job_dir = tmp_path / "job"
    app_id = ws_sched.submit(app, {**CFG, "job_dir": str(job_dir)}, workspace=f"{project}:code")
    assert wait_done(ws_sched, app_id).state == AppState.SUCCEEDED
    assert (job_dir / "code" / "data.txt").read_text() == "from the workspace\n"
    assert app.roles[0].image == str(job_dir)
    assert _logs(ws_sched, app_id) == ["from the workspace\n"]


def test_cfg_is_resolved_before_anything_is_built(
    ws_sched: LocalDirWorkspaceScheduler, project: Path, tmp_path: Path
) -> None:
    app = AppDef("ws", roles=[py_role("w", READ_DATA)])
    job_dir = tmp_path / "job"
    with pytest.raises(InvalidRunConfigException):
        ws_sched.submit(
            app,
            {"job_dir": str(job_dir), "cancel_grace": 1.0},  # misspelt option
            workspace=Workspace({str(project): "code"}),
        )
    assert not job_dir.exists()
    assert app.roles[0].image == "."
    assert ws_sched.list() == []


def test_a_workspace_of_a_wrong_type_is_rejected(ws_sched: LocalDirWorkspaceScheduler) -> None:
    app = AppDef("ws", roles=[py_role("w", READ_DATA)])
    with pytest.raises(InvalidSpecError, match="workspace"):
        ws_sched.submit(app, dict(CFG), workspace=42)  # type: ignore[arg-type]
    assert ws_sched.list() == []


# --- cancel ----------------------------------------------------------------------------------


def test_cancel_of_a_running_app_is_durable(sched: LocalScheduler) -> None:
    app_id = sched.submit(AppDef("long", roles=[py_role("w", SLEEP)]), dict(CFG))
    wait_running(sched, app_id)
    assert not sched.cancel_requested(app_id)
    sched.cancel(app_id)
    assert sched.cancel_requested(app_id)  # recorded at once, while the app may still stop
    final = wait_done(sched, app_id)
    assert final.state == AppState.CANCELLED
    assert final.metadata.get(CANCEL_REQUESTED) == "true"
    sched.cancel(app_id)  # idempotent
    assert sched.describe(app_id).state == AppState.CANCELLED  # type: ignore[union-attr]


def test_cancel_of_an_unknown_or_finished_app_is_a_no_op(sched: LocalScheduler) -> None:
    assert not sched.exists("nope-12345678")
    sched.cancel("nope-12345678")
    app_id = sched.submit(AppDef("short", roles=[py_role("w", "pass")]), dict(CFG))
    assert wait_done(sched, app_id).state == AppState.SUCCEEDED
    sched.cancel(app_id)
    # a finished app never gets a cancel request recorded against it
    assert not sched.cancel_requested(app_id)
    assert sched.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]


def test_cancel_asks_exists_first(sched: LocalScheduler) -> None:
    app_id = sched.submit(AppDef("long", roles=[py_role("w", SLEEP)]), dict(CFG))
    wait_running(sched, app_id)
    blind = NeverExistsScheduler("parity")
    assert type(blind).exists is not Scheduler.exists
    blind.cancel(app_id)  # exists() says no: nothing to cancel
    assert not sched.cancel_requested(app_id)
    assert sched.describe(app_id).state == AppState.RUNNING  # type: ignore[union-attr]
    sched.cancel(app_id)
    assert wait_done(sched, app_id).state == AppState.CANCELLED
