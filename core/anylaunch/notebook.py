"""Helpers for creating and running components and apps from a Jupyter/IPython notebook
(TorchX's ``torchx.notebook``).

The ``%%workspacefile PATH`` cell magic writes the cell's text to ``PATH`` in the notebook
workspace, an in-memory fsspec directory (:func:`get_workspace`) that a run then takes as its
workspace::

    %load_ext anylaunch.notebook           # or: import anylaunch.notebook

    %%workspacefile train.py
    print("hello from the notebook")

    from anylaunch.notebook import get_workspace
    from anylaunch.runner import get_runner
    from anylaunch.components.utils import python

    with get_runner() as runner:  # a scheduler with workspaces: local_docker, slurm, ...
        runner.run(python(script="train.py"), "local_docker", workspace=get_workspace())

Importing this module in a running IPython shell registers the magic (as in TorchX); elsewhere
the import registers nothing and needs no IPython: :func:`workspacefile` is a plain function
too. IPython is imported only to register the magic, and a missing one raises
:class:`~anylaunch.sdk.MissingDependencyError`.
"""

from __future__ import annotations

import posixpath
import sys
from typing import Any

from anylaunch.sdk import MissingDependencyError
from anylaunch.specs.errors import InvalidSpecError

__all__ = ["NOTEBOOK_WORKSPACE", "get_workspace", "load_ipython_extension", "workspacefile"]

#: The fsspec URL of the notebook workspace (a directory of fsspec's in-memory filesystem,
#: which lives as long as the notebook's kernel).
NOTEBOOK_WORKSPACE = "memory://anylaunch-workspace/"


def get_workspace() -> str:
    """The notebook workspace's fsspec URL: where ``%%workspacefile`` writes.

    >>> get_workspace()
    'memory://anylaunch-workspace/'
    """
    return NOTEBOOK_WORKSPACE


def _relative_path(line: object) -> str:
    path = line.strip() if isinstance(line, str) else ""
    normalized = posixpath.normpath(path) if path else ""
    if not normalized or normalized.startswith(("/", "..")) or normalized == ".":
        raise InvalidSpecError(
            "%%workspacefile PATH",
            line,
            "must be a file path relative to the workspace, inside it",
            "write e.g. `%%workspacefile train.py` or `%%workspacefile pkg/main.py`",
        )
    return normalized


def workspacefile(line: str, cell: str) -> None:
    """The ``%%workspacefile PATH`` cell magic: writes ``cell`` to ``PATH`` (relative, inside
    the workspace) in the notebook workspace, creating its directories.

    >>> workspacefile("demo/hello.py", "print('hi')\\n")
    Added demo/hello.py to workspace memory://anylaunch-workspace/
    >>> import fsspec
    >>> fsspec.open("memory://anylaunch-workspace/demo/hello.py", "rt").open().read()
    "print('hi')\\n"

    Args:
        line: the magic's line: the file's path in the workspace
        cell: the cell's text, the file's content

    Raises:
        InvalidSpecError: the path is empty, absolute or leaves the workspace, or the cell is
            no str
    """
    import fsspec

    path = _relative_path(line)
    if not isinstance(cell, str):
        raise InvalidSpecError(
            "%%workspacefile cell", type(cell).__name__, "must be text", "write the file's text"
        )
    workspace = get_workspace()
    fs, root = fsspec.core.url_to_fs(workspace)
    target = posixpath.join(root, path)
    fs.mkdirs(posixpath.dirname(target), exist_ok=True)
    with fs.open(target, "wt") as f:
        f.write(cell)
    print(f"Added {path} to workspace {workspace}")


def _require_ipython() -> Any:
    try:
        import IPython
    except ImportError:
        raise MissingDependencyError(
            "anylaunch.notebook's %%workspacefile magic needs the Python package 'IPython', "
            "which is not installed. Fix: pip install ipython (or run in Jupyter)"
        ) from None
    return IPython


def load_ipython_extension(ipython: Any) -> None:
    """Registers the ``%%workspacefile`` cell magic in the shell ``ipython`` (what
    ``%load_ext anylaunch.notebook`` calls).

    Raises:
        MissingDependencyError: IPython is not installed
        InvalidSpecError: ``ipython`` is no IPython shell
    """
    _require_ipython()
    register = getattr(ipython, "register_magic_function", None)
    if not callable(register):
        raise InvalidSpecError(
            "load_ipython_extension.ipython",
            type(ipython).__name__,
            "is not an IPython shell",
            "run `%load_ext anylaunch.notebook` in the notebook, or pass get_ipython()",
        )
    register(workspacefile, magic_kind="cell", magic_name="workspacefile")


def _register_in_running_shell() -> None:
    # only a process that already runs IPython has a shell to register into: importing this
    # module elsewhere must not import IPython
    ipython = sys.modules.get("IPython")
    get_shell = getattr(ipython, "get_ipython", None)
    shell = get_shell() if callable(get_shell) else None
    if shell is not None:
        load_ipython_extension(shell)


_register_in_running_shell()
