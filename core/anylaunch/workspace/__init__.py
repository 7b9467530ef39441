"""Workspaces: applying local changes on top of a job's image or job directory, so local code
runs on a remote cluster (TorchX's ``torchx.workspace``).

:class:`WorkspaceMixin` is the interface a scheduler mixes in;
:mod:`anylaunch.workspace.docker_workspace` and :mod:`anylaunch.workspace.dir_workspace` are
the built-in implementations.
"""

from anylaunch.workspace.api import WorkspaceMixin, pin_workspace_images, walk_workspace

__all__ = ["WorkspaceMixin", "pin_workspace_images", "walk_workspace"]
