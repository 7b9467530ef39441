"""Module attributes imported on first use (PEP 562), for packages whose import must stay cheap.

A package lists the modules it exports names of lazily, with those names, and sets its
``__getattr__`` to :func:`lazy_getattr` of that table::

    _LAZY = {"anylaunch.runner.logs": ("LineSink", "LogPump")}
    __getattr__ = lazy_getattr(__name__, _LAZY)

The first ``package.LogPump`` imports ``anylaunch.runner.logs`` and keeps the value in the
package, so later uses cost nothing.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(module_name: str, exports: Mapping[str, Iterable[str]]) -> Callable[[str], Any]:
    """Returns a module ``__getattr__`` that imports a name of ``exports[source]`` from the
    module ``source`` on first access and stores it in the module ``module_name``.

    >>> import types
    >>> sys.modules["lazy_demo"] = types.ModuleType("lazy_demo")
    >>> get = lazy_getattr("lazy_demo", {"textwrap": ("dedent", "indent")})
    >>> get("dedent").__module__, sys.modules["lazy_demo"].dedent is get("dedent")
    ('textwrap', True)
    >>> get("nope")
    Traceback (most recent call last):
    ...
    AttributeError: module 'lazy_demo' has no attribute 'nope'
    >>> del sys.modules["lazy_demo"]

    Args:
        module_name: the module the attributes belong to (its ``__name__``)
        exports: the dotted name of a module to the names the module defines
    """
    where = {name: source for source, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        source = where.get(name)
        if source is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        setattr(sys.modules[module_name], name, value)
        return value

    return __getattr__
