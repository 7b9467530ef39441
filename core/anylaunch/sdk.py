"""Lazy imports of backend SDKs, with an error that names the extra to install.

Used by the schedulers and the workspaces alike, so it sits below both (and imports nothing
but :mod:`anylaunch.specs.errors`)."""

from __future__ import annotations

import importlib
from types import ModuleType

from anylaunch.specs.errors import AnylaunchError


class MissingDependencyError(AnylaunchError, ImportError):
    """A backend's SDK (for a scheduler or a workspace) is not installed."""


def require_sdk(module: str, extra: str, scheduler: str) -> ModuleType:
    """Imports ``module`` for ``scheduler``, or raises an error naming the extra to install.

    >>> require_sdk("json", extra="none", scheduler="test").__name__
    'json'
    >>> require_sdk("no_such_sdk_xyz", extra="kubernetes", scheduler="kubernetes")
    Traceback (most recent call last):
    ...
    anylaunch.sdk.MissingDependencyError: the kubernetes scheduler needs the Python package 'no_such_sdk_xyz', which is not installed. Fix: pip install 'anylaunch[kubernetes]'
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(
            f"the {scheduler} scheduler needs the Python package {module!r}, which is not "
            f"installed. Fix: pip install 'anylaunch[{extra}]'"
        ) from None
