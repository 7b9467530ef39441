"""Which tracker factories exist, and how a configured value names one.

A tracker is made by a factory ``(config: str | None) -> TrackerBase``, named in the
configuration either by its registered name (the built-in ``fsspec``, or a plugin registered
with ``@register.tracker()`` in ``anylaunch_plugins.tracker``, or an ``anylaunch.tracker``
entry point) or as ``module.path:function``, imported where the tracker is built (in the job,
or by ``anylaunch tracker``).
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable
from typing import Any

from anylaunch.specs.errors import InvalidSpecError, did_you_mean
from anylaunch.tracker.errors import TrackerLoadError

__all__ = [
    "BUILTIN_TRACKERS",
    "TrackerFactory",
    "check_factory",
    "get_tracker_factories",
    "load_factory",
]

logger: logging.Logger = logging.getLogger(__name__)

#: ``(config) -> TrackerBase``: what a tracker plugin registers.
TrackerFactory = Callable[[str | None], Any]

#: The built-in trackers: name to ``module:function`` of the factory.
BUILTIN_TRACKERS: dict[str, str] = {"fsspec": "anylaunch.tracker.backend.fsspec:create"}

# a registered name (as @register accepts it) or module.path:attr.path
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_MODULE_FACTORY = re.compile(rf"({_DOTTED}):({_DOTTED})")

_warned_overrides: set[str] = set()


def check_factory(field: str, value: object) -> str:
    """Returns ``value`` if it can name a tracker factory: a registered name or
    ``module.path:function``.

    >>> check_factory("ANYLAUNCH_TRACKERS", "my_pkg.tracking:create")
    'my_pkg.tracking:create'
    >>> check_factory("ANYLAUNCH_TRACKERS", "a b")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: ANYLAUNCH_TRACKERS='a b' is invalid: names no tracker factory. Fix: use a tracker's name (e.g. 'fsspec') or 'module.path:function'
    """
    if not isinstance(value, str) or not (
        _NAME.fullmatch(value) or _MODULE_FACTORY.fullmatch(value)
    ):
        shown = value if isinstance(value, str) and len(value) <= 80 else type(value).__name__
        raise InvalidSpecError(
            field,
            shown,
            "names no tracker factory",
            "use a tracker's name (e.g. 'fsspec') or 'module.path:function'",
        )
    return value


def _import_factory(spec: str) -> TrackerFactory:
    """The object ``module.path:attr.path`` names (raises TrackerLoadError)."""
    module_name, _, attr_path = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for attr in attr_path.split("."):
            obj = getattr(obj, attr)
    except Exception as e:  # a third-party module can fail on import in any way
        raise TrackerLoadError(
            spec,
            f"importing it failed ({type(e).__name__}: {e})",
            "install the package that provides it where the tracker is built (the job's "
            "image, and where you run `anylaunch tracker`), or fix the name",
        ) from e
    if not callable(obj):
        raise TrackerLoadError(
            spec, f"it is a {type(obj).__name__}, not a function", "name the factory function"
        )
    factory: TrackerFactory = obj
    return factory


class _Deferred:
    """A built-in factory, imported when first called (listing imports nothing)."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.__module__ = spec.partition(":")[0]

    def __call__(self, config: str | None) -> Any:
        return _import_factory(self.spec)(config)


def get_tracker_factories() -> dict[str, TrackerFactory]:
    """The trackers by name: the built-ins, then the plugins (a plugin named like a built-in
    replaces it, with a logged warning).

    >>> "fsspec" in get_tracker_factories()
    True
    """
    from anylaunch.plugins.plugin_registry import registry
    from anylaunch.plugins.types import PluginType

    factories: dict[str, TrackerFactory] = {n: _Deferred(s) for n, s in BUILTIN_TRACKERS.items()}
    for name, plugin in registry().get(PluginType.TRACKER).items():
        if name in BUILTIN_TRACKERS and name not in _warned_overrides:
            _warned_overrides.add(name)
            logger.warning(
                "tracker %r from plugin %s replaces the built-in tracker of that name",
                name,
                plugin.__module__,
            )
        factories[name] = plugin
    return factories


def load_factory(field: str, spec: str) -> TrackerFactory:
    """The factory ``spec`` names: a known tracker's name, else ``module.path:function``.

    Raises:
        InvalidSpecError: ``spec`` names no known tracker and is no ``module:function``
        TrackerLoadError: the module cannot be imported, or the name is no function
    """
    check_factory(field, spec)
    factories = get_tracker_factories()
    if spec in factories:
        return factories[spec]
    if _MODULE_FACTORY.fullmatch(spec):
        return _import_factory(spec)
    raise InvalidSpecError(
        field,
        spec,
        f"names no tracker.{did_you_mean(spec, factories)}",
        f"use one of: {', '.join(sorted(factories))}, a tracker plugin installed here, or "
        "'module.path:function'",
    )


def kind_here(spec: str) -> str | None:
    """What ``spec`` is in this process: ``"builtin"``, ``"plugin"``, ``"module"`` (a
    ``module:function``, which only the process building the tracker imports) or None.

    >>> kind_here("fsspec"), kind_here("pkg.mod:make"), kind_here("nope")
    ('builtin', 'module', None)
    """
    found = get_tracker_factories().get(spec)
    if found is not None:
        return "builtin" if isinstance(found, _Deferred) else "plugin"
    return "module" if _MODULE_FACTORY.fullmatch(spec) else None
