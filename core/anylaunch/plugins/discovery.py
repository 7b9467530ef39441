"""Scanning of the ``anylaunch_plugins.<group>`` namespace package and of entry points.

Each function records what went wrong as :class:`RegistrationError` values instead of
raising: one broken plugin must not hide the others.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from anylaunch.plugins.registration import NAME_ATTR, TYPE_ATTR
from anylaunch.plugins.types import PluginType

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
    "EntryPointPlugin",
    "RegistrationError",
    "forget_entry_points",
    "scan_entry_points",
    "scan_namespace",
]

logger: logging.Logger = logging.getLogger("anylaunch.plugins")


@dataclasses.dataclass(frozen=True)
class RegistrationError:
    """A problem found while discovering plugins.

    Import problems carry only ``module`` and ``error``; problems with one plugin (wrong
    namespace, a name registered twice) also carry its ``name`` and ``plugin_type``.

    >>> RegistrationError(module="anylaunch_plugins.schedulers.x", error="ImportError: y")
    RegistrationError(module='anylaunch_plugins.schedulers.x', error='ImportError: y',
                      name=None, plugin_type=None)
    """

    module: str
    error: str
    name: str | None = None
    plugin_type: str | None = None


class EntryPointPlugin:
    """A plugin registered through a (legacy) entry point, loaded when first called.

    Calling it loads the entry point's object and calls it with the same arguments.

    Attributes:
        entry_point: the ``importlib.metadata.EntryPoint``
    """

    def __init__(self, entry_point: EntryPoint) -> None:
        self.entry_point = entry_point
        self.__module__ = entry_point.module

    @property
    def builtin(self) -> bool:
        """Whether anylaunch's own distribution declares it (a built-in, not a plugin)."""
        dist = getattr(self.entry_point, "dist", None)
        return dist is not None and dist.name == "anylaunch"

    def load(self) -> Any:
        """Imports and returns the entry point's object.

        Raises:
            PluginLoadError: importing it failed.
        """
        from anylaunch.plugins.errors import PluginLoadError

        try:
            return self.entry_point.load()
        except Exception as e:  # a third-party plugin can fail in any way on import
            raise PluginLoadError(self.entry_point, e) from e

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.load()(*args, **kwargs)

    def __repr__(self) -> str:
        ep = self.entry_point
        return f"<plugin {ep.name} from entry point {ep.group}: {ep.value}>"


#: Each group's entry points, with the state of the import path they were listed under.
_listed: dict[str, tuple[tuple[object, ...], dict[str, EntryPointPlugin]]] = {}
_listed_lock = threading.Lock()


def _import_path_state() -> tuple[object, ...]:
    """``sys.path`` with each entry's directory state: installing or removing a distribution
    adds or removes a ``.dist-info`` directory in one of them (its mtime and link count)."""
    state: list[object] = []
    for entry in sys.path:
        try:
            st = os.stat(entry or ".")
        except OSError:
            state.append((entry, None))
        else:
            state.append((entry, st.st_ino, st.st_mtime_ns, st.st_nlink))
    return tuple(state)


def scan_entry_points(plugin_type: PluginType) -> dict[str, EntryPointPlugin]:
    """The entry points of ``plugin_type``'s group, unloaded.

    Listed again only when the import path changed since (a distribution installed or
    removed, ``sys.path`` edited) or after :func:`forget_entry_points`: listing reads every
    installed distribution's metadata, which a process launching many apps (a runner each)
    would otherwise pay for every one.
    """
    from importlib.metadata import entry_points

    group, state = plugin_type.value, _import_path_state()
    with _listed_lock:
        listed = _listed.get(group)
        if listed is None or listed[0] != state:
            found = {ep.name: EntryPointPlugin(ep) for ep in entry_points(group=group)}
            listed = _listed[group] = (state, found)
        return dict(listed[1])


def forget_entry_points() -> None:
    """Makes the next :func:`scan_entry_points` list the entry points again.

    >>> forget_entry_points()
    """
    with _listed_lock:
        _listed.clear()


def scan_namespace(
    plugin_type: PluginType, errors: list[RegistrationError]
) -> dict[str, Callable[..., Any]]:
    """Imports every public module under ``plugin_type.namespace`` and collects its plugins.

    A namespace that is not installed gives ``{}``. Sub-packages, with or without
    ``__init__.py``, are scanned too; modules whose name starts with ``_`` are skipped.
    """
    namespace = plugin_type.namespace
    try:
        package = importlib.import_module(namespace)
    except ModuleNotFoundError as e:
        if e.name and (namespace == e.name or namespace.startswith(f"{e.name}.")):
            return {}  # no distribution provides this group
        _record(errors, namespace, e)
        return {}
    except Exception as e:
        _record(errors, namespace, e)
        return {}
    found: dict[str, Callable[..., Any]] = {}
    _scan_package(package, plugin_type, found, errors)
    return found


def _record(errors: list[RegistrationError], module: str, e: BaseException) -> None:
    logger.warning("plugin module %r failed to import: %s: %s", module, type(e).__name__, e)
    errors.append(RegistrationError(module=module, error=f"{type(e).__name__}: {e}"))


def _submodules(package: ModuleType) -> list[str]:
    """Public sub-module names of ``package``, namespace directories included, sorted."""
    import pkgutil

    names: set[str] = set()
    for info in pkgutil.iter_modules(getattr(package, "__path__", [])):
        names.add(info.name)
    for entry in getattr(package, "__path__", []):
        root = Path(entry)
        if root.is_dir():
            for child in root.iterdir():
                # a directory without __init__.py is an implicit namespace sub-package
                if child.is_dir() and child.name.isidentifier() and any(child.glob("*.py")):
                    names.add(child.name)
    return sorted(n for n in names if not n.startswith("_"))


def _scan_package(
    package: ModuleType,
    plugin_type: PluginType,
    found: dict[str, Callable[..., Any]],
    errors: list[RegistrationError],
) -> None:
    for name in _submodules(package):
        fqn = f"{package.__name__}.{name}"
        try:
            module = importlib.import_module(fqn)
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            _record(errors, fqn, e)  # SystemExit too: a plugin must not end the caller
            continue
        _collect(module, plugin_type, found, errors)
        if hasattr(module, "__path__"):
            _scan_package(module, plugin_type, found, errors)


def _collect(
    module: ModuleType,
    plugin_type: PluginType,
    found: dict[str, Callable[..., Any]],
    errors: list[RegistrationError],
) -> None:
    fqn = module.__name__
    for attr in sorted(vars(module)):
        obj = getattr(module, attr)
        actual = getattr(obj, TYPE_ATTR, None)
        # re-imported plugins are collected where they are defined, not again here
        defined_in = getattr(obj, "__module__", None)
        if not callable(obj) or not isinstance(actual, PluginType) or defined_in != fqn:
            continue
        name = getattr(obj, NAME_ATTR, None) or _default_name(obj, attr, fqn, plugin_type)
        if actual is not plugin_type:
            problem = (
                f"is a {actual.label} but is in {plugin_type.namespace}: use "
                f"@register.{plugin_type.label}() or move it to {actual.namespace}"
            )
            logger.warning("plugin %r in %s %s", name, fqn, problem)
            errors.append(RegistrationError(fqn, problem, name, actual.label))
            continue
        if name in found and found[name] is not obj:
            other = found[name].__module__
            problem = f"is also registered in {other}; the one in {other} is kept"
            logger.warning("plugin %r in %s %s", name, fqn, problem)
            errors.append(RegistrationError(fqn, problem, name, plugin_type.label))
            continue
        found[name] = obj


def _default_name(obj: Any, attr: str, fqn: str, plugin_type: PluginType) -> str:
    if plugin_type is PluginType.COMPONENT:
        # anylaunch_plugins.components.team.train:ddp -> team.train.ddp, like the built-ins
        relative = fqn.removeprefix(plugin_type.namespace + ".")
        return f"{relative}.{getattr(obj, '__name__', attr)}"
    return str(getattr(obj, "__name__", attr))
