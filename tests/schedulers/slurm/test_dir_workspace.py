"""DirWorkspaceMixin: workspaces copied into a new job directory (local paths and fsspec URLs)."""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path

import fsspec
import pytest

from anylaunch.schedulers.slurm_scheduler import create_scheduler
from anylaunch.specs import Resource, Role, Workspace
from anylaunch.specs.errors import InvalidRunConfigException, InvalidSpecError
from anylaunch.workspace.dir_workspace import copy_workspace, is_ignored


def make_project(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / "build").mkdir()
    (root / "build" / "out.bin").write_bytes(b"\x00\x01")
    (root / "pkg" / "mod.pyc").write_bytes(b"")
    (root / ".anylaunchignore").write_text("# not shipped\n*.pyc\nbuild/\n")
    return root


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def role() -> Role:
    return Role(name="w", image="", entrypoint="true", resource=Resource(1, 0, 10))


def test_projects_are_copied_into_a_new_job_dir(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    extra = tmp_path / "conf.yaml"
    extra.write_text("a: 1\n")
    job_dir = tmp_path / "jobs" / "run1"
    ws = Workspace({str(project): "", str(extra): "etc/conf.yaml"})

    assert copy_workspace(ws, str(job_dir)) == str(job_dir)
    assert files(job_dir) == {".anylaunchignore", "pkg/mod.py", "run.sh", "etc/conf.yaml"}
    assert os.stat(job_dir / "run.sh").st_mode & stat.S_IXUSR  # scripts stay executable
    assert (job_dir / "etc" / "conf.yaml").read_text() == "a: 1\n"


def test_fsspec_projects_are_copied(tmp_path: Path) -> None:
    root = f"memory://ws-{uuid.uuid4().hex}"
    fs = fsspec.filesystem("memory")
    fs.pipe(
        {
            f"{root}/src/a.py": b"print(1)\n",
            f"{root}/src/b.tmp": b"",
            f"{root}/.anylaunchignore": b"*.tmp\n",
        }
    )
    job_dir = tmp_path / "job"
    copy_workspace(Workspace({root: "code"}), str(job_dir))
    assert files(job_dir) == {"code/.anylaunchignore", "code/src/a.py"}
    assert (job_dir / "code" / "src" / "a.py").read_bytes() == b"print(1)\n"


def test_job_dir_must_not_exist(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    (tmp_path / "taken").mkdir()
    with pytest.raises(InvalidRunConfigException, match="job_dir"):
        copy_workspace(Workspace({str(project): ""}), str(tmp_path / "taken"))


def test_missing_project_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match=r"Workspace\.projects"):
        copy_workspace(Workspace({str(tmp_path / "nope"): ""}), str(tmp_path / "job"))


def test_mixin_points_the_role_at_the_job_dir(tmp_path: Path) -> None:
    sched = create_scheduler("test")
    project = make_project(tmp_path / "proj")
    r = role()
    sched.build_workspace_and_update_role(
        r, Workspace({str(project): ""}), {"job_dir": str(tmp_path / "job")}
    )
    assert r.image == str(tmp_path / "job")
    assert "pkg/mod.py" in files(tmp_path / "job")


def test_mixin_without_job_dir_runs_a_single_project_in_place(tmp_path: Path) -> None:
    sched = create_scheduler("test")
    project = make_project(tmp_path / "proj")
    r = role()
    sched.build_workspace_and_update_role(r, Workspace({str(project): ""}), {"job_dir": None})
    assert r.image == str(project)
    with pytest.raises(InvalidRunConfigException, match="job_dir"):
        sched.build_workspace_and_update_role(r, Workspace({str(project): "sub"}), {})


def test_ignore_patterns() -> None:
    patterns = ["*.pyc", "build/", "secret.txt", "docs/*.md"]
    assert is_ignored("a/b/c.pyc", patterns)
    assert is_ignored("build/x", patterns) and is_ignored("sub/build/x", patterns)
    assert not is_ignored("build", patterns)  # a file named build is kept
    assert is_ignored("deep/secret.txt", patterns)
    assert is_ignored("docs/a.md", patterns) and not is_ignored("a.md", patterns)
