"""Workspaces: mirroring local project directories into the job's image or job directory.

A scheduler that supports workspaces inherits a :class:`WorkspaceMixin` alongside
``Scheduler``; the Runner builds the workspace into the first role before the dryrun.
"""

from __future__ import annotations

import abc
import fnmatch
import posixpath
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

from anylaunch.specs.api import AppDef, Role, Workspace
from anylaunch.specs.runopts import CfgVal, runopts

__all__ = ["ANYLAUNCH_IGNORE", "WorkspaceMixin", "pin_workspace_images", "walk_workspace"]

T = TypeVar("T")

#: The ignore file :func:`walk_workspace` reads by default (TorchX's ``TORCHX_IGNORE``).
ANYLAUNCH_IGNORE = ".anylaunchignore"

# Never ignored: the walk's root, and the Dockerfile a Docker workspace builds with.
_NEVER_IGNORED = (".", "Dockerfile.anylaunch")


class WorkspaceMixin(abc.ABC, Generic[T]):
    """Adds workspace support to a scheduler."""

    def workspace_opts(self) -> runopts:
        """Run options this workspace adds to the scheduler's (merged by ``run_opts``)."""
        return runopts()

    @abc.abstractmethod
    def build_workspace_and_update_role(
        self, role: Role, workspace: Workspace, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Builds ``workspace`` and points ``role`` (its image) at the result, in place."""


def pin_workspace_images(app: AppDef, images: Mapping[tuple[str, Workspace], str]) -> None:
    """Points each role at the image already built for it, so submitting ``app`` again does
    not rebuild its workspace (as TorchX's ``pin_workspace_images``).

    A role matches on its ``(image, workspace)`` pair, what the build ran on: its ``image`` is
    set and its ``workspace`` cleared. A role without a workspace, or whose pair is not in
    ``images``, is left as it is. Mutates ``app``.

    >>> ws = Workspace({"/src": ""})
    >>> app = AppDef("a", roles=[Role("r", image="base", workspace=ws), Role("s", image="x")])
    >>> pin_workspace_images(app, {("base", ws): "base@sha256:ab"})
    >>> [(r.image, r.workspace) for r in app.roles]
    [('base@sha256:ab', None), ('x', None)]

    Args:
        app: the app whose roles to pin
        images: the built image of each ``(base image, workspace)`` pair
    """
    for role in app.roles:
        if not role.workspace:
            continue
        image = images.get((role.image, role.workspace))
        if image is not None:
            role.image = image
            role.workspace = None


def _last_match(relpath: str, patterns: list[str]) -> tuple[int, bool]:
    """The index of the last pattern matching ``relpath`` (-1: none) and whether it ignores it
    (a ``!pattern`` un-ignores)."""
    if relpath in _NEVER_IGNORED:
        return -1, False
    relpath = posixpath.normpath(relpath)
    index, ignored = -1, False
    for i, pattern in enumerate(patterns):
        negated = pattern.startswith("!")
        if fnmatch.fnmatch(relpath, pattern[1:] if negated else pattern):
            index, ignored = i, not negated
    return index, ignored


def _ignore_patterns(fs: Any, path: str, ignore_name: str) -> list[str]:
    ignore_path = posixpath.join(path, ignore_name)
    if not fs.exists(ignore_path):
        return []
    with fs.open(ignore_path, "rt") as f:
        lines = f.readlines()
    patterns = []
    for line in lines:
        pattern = line.partition("#")[0].strip()
        if pattern and pattern != ".":
            patterns.append(pattern)
    return patterns


def walk_workspace(
    fs: Any, path: str, ignore_name: str = ANYLAUNCH_IGNORE
) -> Iterator[tuple[str, list[str], dict[str, Mapping[str, object]]]]:
    """Walks ``path`` on the fsspec filesystem ``fs`` like ``fs.walk(path, detail=True)``,
    leaving out what the ignore file ``ignore_name`` at ``path`` lists (TorchX's
    ``walk_workspace``).

    The ignore file has ``.dockerignore``-style lines: ``fnmatch`` patterns of paths relative
    to ``path``, ``#`` comments, and ``!pattern`` to keep what an earlier line ignores (the
    last matching line wins). An ignored directory is not entered.

    >>> import fsspec
    >>> fs = fsspec.filesystem("memory")
    >>> for name, text in [("ws/a.py", "a"), ("ws/b.log", "b"), ("ws/keep.log", "k"),
    ...                    ("ws/build/out", "o"), ("ws/.anylaunchignore", "*.log\\n!keep.log\\nbuild")]:
    ...     fs.pipe(f"/{name}", text.encode())
    >>> sorted(f for _, _, files in walk_workspace(fs, "/ws") for f in files)
    ['.anylaunchignore', 'a.py', 'keep.log']

    Args:
        fs: the filesystem (an ``fsspec.AbstractFileSystem``)
        path: the workspace root on ``fs``
        ignore_name: the ignore file's name, at ``path``

    Yields:
        ``(directory, subdirectories, {file name: file info})`` for each directory kept
    """
    patterns = _ignore_patterns(fs, path, ignore_name)
    pending: list[tuple[int, str]] = [(0, path)]
    while pending:
        first, current = pending.pop()
        active = patterns[first:]
        for directory, dirs, files in fs.walk(current, detail=True, maxdepth=1):
            relpath = posixpath.relpath(directory, path)
            if _last_match(relpath, active)[1]:
                continue
            kept_dirs: list[str] = []
            next_first: list[int] = []
            for d in dirs:
                index, ignored = _last_match(posixpath.join(relpath, d), active)
                if not ignored:
                    kept_dirs.append(d)
                    next_first.append(first + index)
            kept_files = {
                name: info
                for name, info in files.items()
                if not _last_match(
                    posixpath.join(relpath, name) if relpath != "." else name, active
                )[1]
            }
            yield directory, kept_dirs, kept_files
            for index, d in zip(next_first, kept_dirs, strict=True):
                pending.append((index + 1, posixpath.join(directory, d)))
