"""Deprecation helpers (TorchX's ``torchx.deprecations``): :func:`deprecated_module` for an
import path that moved, :func:`deprecated` for a function or class on its way out.

Both warn with :class:`UserWarning`, not :class:`DeprecationWarning`: Python hides the latter
outside ``__main__``, and a user who never sees the warning learns of the move only when the
old name is gone.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar, cast

from anylaunch.specs.errors import InvalidSpecError

__all__ = ["deprecated", "deprecated_module"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _check_import_path(field: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidSpecError(
            field, value, "must be a non-empty import path", "pass e.g. 'anylaunch.new.path'"
        )
    return value


def deprecated_module(old_import: str, new_import: str, *, stacklevel: int = 3) -> None:
    """Warns (:class:`UserWarning`) that module ``old_import`` moved to ``new_import``.

    Call it at the top of the stub left at the old path, before re-exporting the new one::

        # my_pkg/old_path.py
        from anylaunch.deprecations import deprecated_module

        deprecated_module(old_import="my_pkg.old_path", new_import="my_pkg.new_path")

        from my_pkg.new_path import *  # noqa: F401,F403

    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     deprecated_module("pkg.old", "pkg.new")
    >>> caught[0].category.__name__, str(caught[0].message).splitlines()[0]
    ('UserWarning', '[Deprecated] pkg.old has moved to pkg.new and will be removed in a future release. Update your import:')

    Args:
        old_import: the deprecated import path
        new_import: the path to import from instead
        stacklevel: the frame the warning points at; the default ``3`` is the line that
            imports the stub (this function, then the stub's module code, then the importer)

    Raises:
        InvalidSpecError: a path is not a non-empty str, or ``stacklevel`` is not an int >= 1
    """
    _check_import_path("deprecated_module.old_import", old_import)
    _check_import_path("deprecated_module.new_import", new_import)
    if isinstance(stacklevel, bool) or not isinstance(stacklevel, int) or stacklevel < 1:
        raise InvalidSpecError(
            "deprecated_module.stacklevel", stacklevel, "must be an int >= 1", "leave the default 3"
        )
    warnings.warn(
        f"[Deprecated] {old_import} has moved to {new_import} and will be removed in a future"
        " release. Update your import:"
        f"\n\n  - from {old_import} import ...\n  + from {new_import} import ...\n",
        UserWarning,
        stacklevel=stacklevel,
    )


def deprecated(*, replacement: str | None = None) -> Callable[[_F], _F]:
    """Marks a function or class deprecated: each call warns (:class:`UserWarning`, pointing
    at the caller's line), then runs it.

    >>> @deprecated(replacement="new_add")
    ... def old_add(a: int, b: int) -> int:
    ...     return a + b
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     old_add(1, 2)
    3
    >>> str(caught[0].message)
    '[Deprecated] old_add is deprecated -- use new_add instead.'

    Args:
        replacement: the name or import path to use instead, if there is one

    Returns:
        a decorator that wraps its target (keeping its name and docstring)

    Raises:
        InvalidSpecError: ``replacement`` is not a str, or the target is not callable
    """
    if replacement is not None and not isinstance(replacement, str):
        raise InvalidSpecError(
            "deprecated.replacement",
            replacement,
            "must be a str or None",
            "pass the new name, e.g. replacement='new_func'",
        )

    def decorate(target: _F) -> _F:
        if not callable(target):
            raise InvalidSpecError(
                "deprecated(target)",
                type(target).__name__,
                "is not a function or class",
                "put @deprecated(...) on a def or a class",
            )
        name = getattr(target, "__qualname__", getattr(target, "__name__", repr(target)))
        message = f"[Deprecated] {name} is deprecated"
        message += f" -- use {replacement} instead." if replacement else "."

        @functools.wraps(target)
        def warn_then_call(*args: Any, **kwargs: Any) -> Any:
            warnings.warn(message, UserWarning, stacklevel=2)
            return target(*args, **kwargs)

        return cast(_F, warn_then_call)

    return decorate
