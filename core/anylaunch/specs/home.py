"""anylaunch's dot-directory (TorchX's ``TORCHX_HOME``), for files anylaunch keeps per user."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from anylaunch.specs.errors import InvalidSpecError

if TYPE_CHECKING:
    import pathlib

__all__ = ["ANYLAUNCH_HOME"]

#: The environment variable that moves the dot-directory.
ANYLAUNCH_HOME_ENV = "ANYLAUNCH_HOME"


def ANYLAUNCH_HOME(*subdir_paths: str) -> pathlib.Path:
    """Path to anylaunch's dot-directory (or a sub-directory of it), created if missing.

    Defaults to ``~/.anylaunch``; the ``ANYLAUNCH_HOME`` environment variable overrides it
    (``~`` in it is expanded; an empty value counts as unset). The directory and every
    parent are created, like ``mkdir -p``.

    >>> import os, pathlib, tempfile
    >>> os.environ["ANYLAUNCH_HOME"] = tempfile.mkdtemp()
    >>> ANYLAUNCH_HOME() == pathlib.Path(os.environ["ANYLAUNCH_HOME"])
    True
    >>> out = ANYLAUNCH_HOME("conda-pack-out", "v1")
    >>> out == pathlib.Path(os.environ["ANYLAUNCH_HOME"], "conda-pack-out", "v1"), out.is_dir()
    (True, True)
    >>> ANYLAUNCH_HOME("../elsewhere")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: ANYLAUNCH_HOME.subdir_paths='../elsewhere' is invalid: ...
    >>> del os.environ["ANYLAUNCH_HOME"]

    Raises:
        InvalidSpecError: (a ``ValueError``) a sub-directory that is not a relative path
            inside the dot-directory (absolute, or containing ``..``).
    """
    import pathlib  # only when called: importing anylaunch.specs need not pay for it

    for sub in subdir_paths:
        if (
            not isinstance(sub, str)
            or pathlib.PurePath(sub).is_absolute()
            or ".." in pathlib.PurePath(sub).parts
        ):
            raise InvalidSpecError(
                "ANYLAUNCH_HOME.subdir_paths",
                sub,
                "not a relative path inside the anylaunch home directory",
                "pass relative directory names, e.g. ANYLAUNCH_HOME('cache', 'v1')",
            )
    base = os.environ.get(ANYLAUNCH_HOME_ENV) or str(pathlib.Path.home() / ".anylaunch")
    home = pathlib.Path(base).expanduser().joinpath(*subdir_paths)
    home.mkdir(parents=True, exist_ok=True)
    return home
