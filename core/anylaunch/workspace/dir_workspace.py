"""``DirWorkspaceMixin``: a workspace copied into a fresh job directory (shared filesystems).

Schedulers whose replicas see the submitting machine's filesystem (Slurm, LSF) need no image:
the workspace's projects are copied into ``job_dir`` (which must not exist yet, so no two jobs
share one) and the role runs from there. Projects may be local paths or fsspec URLs
(``memory://``, ``s3://``, ...). Files matching the patterns in a project's
``.anylaunchignore`` (one glob per line, ``#`` comments; a pattern ending in ``/`` names a
directory) are not copied.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from typing import Any

from anylaunch.specs.api import Role, Workspace
from anylaunch.specs.errors import InvalidRunConfigException, InvalidSpecError
from anylaunch.specs.runopts import CfgVal, runopts
from anylaunch.workspace.api import WorkspaceMixin

__all__ = ["IGNORE_FILE", "JOB_DIR_HELP", "DirWorkspaceMixin", "copy_workspace", "is_ignored"]

#: Per-project file listing what not to copy.
IGNORE_FILE = ".anylaunchignore"
JOB_DIR_HELP = (
    "Directory on the shared filesystem for the job: the workspace is copied into it (it must "
    "not exist yet) and the job runs and writes its logs there (default: the current directory)"
)


def is_ignored(relpath: str, patterns: list[str]) -> bool:
    """True if ``relpath`` (``/``-separated, relative to the project) matches a pattern.

    A pattern matches the whole relative path or any one of its components; ``dir/`` matches
    everything below a directory named ``dir``.

    >>> pats = ["*.pyc", "build/", "secrets.txt"]
    >>> [is_ignored(p, pats) for p in ["a/b.pyc", "build/x/y", "src/secrets.txt", "src/a.py"]]
    [True, True, True, False]
    """
    parts = relpath.split("/")
    for pattern in patterns:
        if pattern.endswith("/"):
            name = pattern.rstrip("/")
            if any(fnmatch.fnmatchcase(part, name) for part in parts[:-1]):
                return True
            continue
        if fnmatch.fnmatchcase(relpath, pattern):
            return True
        if any(fnmatch.fnmatchcase(part, pattern) for part in parts):
            return True
    return False


def _read_patterns(fs: Any, root: str) -> list[str]:
    path = root.rstrip("/") + "/" + IGNORE_FILE
    try:
        with fs.open(path, "r") as f:
            text = str(f.read())
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return []
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def copy_workspace(workspace: Workspace, job_dir: str) -> str:
    """Creates ``job_dir`` (it must not exist) and copies each project into its target there.

    Returns the absolute job directory.

    >>> import tempfile, pathlib
    >>> src = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (src / "main.py").write_text("print('hi')")
    >>> _ = (src / "x.pyc").write_text("")
    >>> _ = (src / ".anylaunchignore").write_text("*.pyc")
    >>> out = copy_workspace(Workspace({str(src): "code"}), str(src.parent / (src.name + "-job")))
    >>> sorted(p.name for p in pathlib.Path(out, "code").iterdir())
    ['.anylaunchignore', 'main.py']

    Raises:
        InvalidRunConfigException: ``job_dir`` exists already.
        InvalidSpecError: a project does not exist.
    """
    import shutil

    import fsspec

    job_dir = os.path.abspath(os.path.expanduser(job_dir))
    if os.path.lexists(job_dir):
        raise InvalidRunConfigException(
            "job_dir", job_dir, "already exists", "pass a directory that does not exist yet"
        )
    os.makedirs(os.path.dirname(job_dir), exist_ok=True)
    try:
        os.mkdir(job_dir)
    except FileExistsError:  # created in between by someone else
        raise InvalidRunConfigException(
            "job_dir", job_dir, "already exists", "pass a directory that does not exist yet"
        ) from None
    for src, target in workspace.projects.items():
        local = "://" not in src
        fs, root = fsspec.core.url_to_fs(os.path.expanduser(src) if local else src)
        if not fs.exists(root):
            raise InvalidSpecError(
                "Workspace.projects",
                src,
                "does not exist",
                "point the workspace at an existing directory or file",
            )
        dest = os.path.join(job_dir, target)
        if not fs.isdir(root):  # a single file
            os.makedirs(dest if not target else os.path.dirname(dest) or job_dir, exist_ok=True)
            out = dest if target else os.path.join(dest, os.path.basename(root.rstrip("/")))
            fs.get_file(root, out)
            if local:
                shutil.copymode(root, out)
            continue
        patterns = _read_patterns(fs, root)
        base = root.rstrip("/")
        for path in sorted(fs.find(root, withdirs=False)):
            rel = path[len(base) :].lstrip("/")
            if not rel or is_ignored(rel, patterns):
                continue
            out = os.path.join(dest, *rel.split("/"))
            os.makedirs(os.path.dirname(out), exist_ok=True)
            if local:
                shutil.copy2(path, out, follow_symlinks=True)
            else:
                fs.get_file(path, out)
    return job_dir


class DirWorkspaceMixin(WorkspaceMixin[dict[str, str]]):
    """Workspace support for shared-filesystem schedulers: copies it into a new ``job_dir``.

    Without ``job_dir``, a single local project with no target directory is used in place
    (the role runs from it); anything else needs ``job_dir``.
    """

    def workspace_opts(self) -> runopts:
        """Adds ``job_dir``."""
        opts = runopts()
        opts.add("job_dir", type_=str, help=JOB_DIR_HELP)
        return opts

    def build_workspace_and_update_role(
        self, role: Role, workspace: Workspace, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Copies ``workspace`` into ``cfg["job_dir"]`` and points ``role.image`` at it.

        Raises:
            InvalidRunConfigException: ``job_dir`` exists, or is missing for a workspace that
                cannot be used in place.
        """
        job_dir = cfg.get("job_dir")
        if job_dir is not None and not isinstance(job_dir, str):
            raise InvalidRunConfigException(
                "job_dir", job_dir, "must be a path string", "pass e.g. /shared/jobs/run1"
            )
        if not job_dir:
            src = next(iter(workspace.projects))
            local = os.path.expanduser(src)
            if workspace.is_unmapped_single_project() and "://" not in src and os.path.isdir(local):
                role.image = os.path.abspath(local)
                return
            raise InvalidRunConfigException(
                "job_dir",
                None,
                f"workspace {workspace} must be copied into a job directory",
                "pass -cfg job_dir=/shared/path/that/does/not/exist/yet",
            )
        role.image = copy_workspace(workspace, job_dir)
