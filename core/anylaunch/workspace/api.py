"""Workspaces: mirroring local project directories into the job's image or job directory.

A scheduler that supports workspaces inherits a :class:`WorkspaceMixin` alongside
``Scheduler``; the Runner builds the workspace into the first role before the dryrun.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Generic, TypeVar

from anylaunch.specs.api import Role, Workspace
from anylaunch.specs.runopts import CfgVal, runopts

T = TypeVar("T")


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
