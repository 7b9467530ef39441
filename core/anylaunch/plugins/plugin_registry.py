"""The plugin registry: what the installed plugin packages provide, found once and cached."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import Any, overload

from anylaunch.plugins.discovery import (
    RegistrationError,
    forget_entry_points,
    logger,
    scan_entry_points,
    scan_namespace,
)
from anylaunch.plugins.errors import PLUGINS_SOURCE_ENV, InvalidPluginsSourceError
from anylaunch.plugins.registration import ALIAS_ATTR, BASE_ATTR
from anylaunch.plugins.types import PluginSource, PluginType

__all__ = ["PluginRegistry", "find", "on_clear", "registry"]

Plugins = dict[str, Callable[..., Any]]

_clear_hooks: list[Callable[[], None]] = []


def on_clear(hook: Callable[[], None]) -> None:
    """Calls ``hook`` whenever :meth:`PluginRegistry.clear` runs (for caches built on it).

    >>> on_clear(lambda: None)
    """
    if hook not in _clear_hooks:
        _clear_hooks.append(hook)


class PluginRegistry:
    """Plugins found in the ``anylaunch_plugins`` namespace package and in entry points.

    Each kind's namespace modules are scanned on its first :meth:`get` and cached. Where both channels
    register the same name, the entry point wins (as in TorchX) and the clash is logged and
    recorded in :attr:`errors`. Discovery never raises for a broken plugin: it logs a warning,
    records a :class:`RegistrationError` and goes on. The entry points of anylaunch's own
    distribution (its engines' owner checkers) are built-ins: read whatever the channels.

    >>> reg = PluginRegistry(plugin_sources=PluginSource.NONE)
    >>> reg.get(PluginType.SCHEDULER)
    {}
    >>> print(reg)
    scheduler: []
    named_resource: []
    component: []
    tracker: []
    event_handler: []
    owner_checker:
      - name: "airflow"
        module: "airflow_anylaunch.reap"
      - name: "dagster"
        module: "dagster_anylaunch.reap"
      - name: "prefect"
        module: "prefect_anylaunch.reap"
    cli_cmd: []
    errors: []

    Args:
        plugin_sources: the discovery channels to use (default: both)
    """

    def __init__(self, *, plugin_sources: PluginSource = PluginSource.ALL) -> None:
        self.plugin_sources = PluginSource(plugin_sources)
        self._cache: dict[PluginType, Plugins] = {}
        self._errors: list[RegistrationError] = []
        self._lock = threading.RLock()

    @property
    def entry_points_enabled(self) -> bool:
        """Whether legacy entry points are read (``ANYLAUNCH_PLUGINS_SOURCE`` 2 or 3)."""
        return PluginSource.ENTRYPOINT in self.plugin_sources

    def get(self, plugin_type: PluginType) -> Plugins:
        """Returns ``{name: factory}`` for ``plugin_type`` (``{}`` if none).

        The namespace package is scanned once (its modules are imported then) and cached;
        entry points are listed again whenever the import path changed (nothing is imported),
        so a distribution installed while the process runs is seen. Entry-point plugins are
        :class:`~anylaunch.plugins.discovery.EntryPointPlugin` objects, imported when first
        called.
        """
        with self._lock:
            if plugin_type not in self._cache:
                found: Plugins = {}
                if PluginSource.NAMESPACE_PKG in self.plugin_sources:
                    found = scan_namespace(plugin_type, self._errors)
                self._cache[plugin_type] = found
            plugins = dict(self._cache[plugin_type])
            from_eps = scan_entry_points(plugin_type)
            if not self.entry_points_enabled:
                from_eps = {name: ep for name, ep in from_eps.items() if ep.builtin}
            for name in sorted(from_eps.keys() & plugins.keys()):
                self._shadowed(plugin_type, name, plugins[name].__module__)
            plugins.update(from_eps)
            return plugins

    def _shadowed(self, plugin_type: PluginType, name: str, module: str) -> None:
        problem = (
            f"is registered both by a {plugin_type.value!r} entry point and in {module}; the "
            "entry point wins. Fix: remove one of the two"
        )
        error = RegistrationError(module, problem, name, plugin_type.label)
        if error not in self._errors:  # said once, not on every lookup
            logger.warning("plugin %r %s", name, problem)
            self._errors.append(error)

    @overload
    def info(self) -> dict[PluginType, Plugins]: ...

    @overload
    def info(self, plugin_type: PluginType) -> Plugins: ...

    def info(self, plugin_type: PluginType | None = None) -> dict[PluginType, Plugins] | Plugins:
        """Returns a copy of the plugins of ``plugin_type``, or of every kind keyed by kind.

        >>> PluginRegistry(plugin_sources=PluginSource.NONE).info(PluginType.TRACKER)
        {}
        """
        if plugin_type is not None:
            return dict(self.get(plugin_type))
        return {pt: dict(self.get(pt)) for pt in PluginType}

    @property
    def errors(self) -> list[RegistrationError]:
        """The problems found by the discovery that has run so far (nothing is discovered)."""
        return list(self._errors)

    def load_errors(self, plugin_type: PluginType | None = None) -> list[RegistrationError]:
        """Discovers ``plugin_type`` (every kind if None), then returns its problems.

        >>> PluginRegistry(plugin_sources=PluginSource.NONE).load_errors()
        []
        """
        kinds = [plugin_type] if plugin_type is not None else list(PluginType)
        for pt in kinds:
            self.get(pt)
        if plugin_type is None:
            return self.errors
        ns = plugin_type.namespace
        return [
            e
            for e in self._errors
            if e.plugin_type == plugin_type.label or e.module == ns or e.module.startswith(ns + ".")
        ]

    def clear(self) -> None:
        """Forgets what was discovered; the next :func:`registry` call makes a fresh registry.

        Caches built from the registry (the component and named-resource tables) are reset
        too, so plugins installed since are found.
        """
        with self._lock:
            self._cache.clear()
            self._errors.clear()
        forget_entry_points()
        registry.cache_clear()
        for hook in list(_clear_hooks):
            hook()

    def to_dict(self) -> dict[str, Any]:
        """Every plugin (discovering all kinds) as plain data, e.g. for ``json.dumps``.

        Keys are the kinds' labels (``scheduler``, ...) each with a list of ``{"name",
        "module"}`` (plus ``aliases``/``fractionals`` of a named resource, or ``error``),
        and ``errors`` with the import problems.
        """
        everything = self.info()
        data: dict[str, Any] = {}
        for pt, plugins in everything.items():
            children = {n for n, fn in plugins.items() if getattr(fn, BASE_ATTR, None)}
            items: list[dict[str, Any]] = []
            for name, fn in plugins.items():
                if name in children:
                    continue
                item: dict[str, Any] = {"name": name, "module": fn.__module__}
                for key, alias in (("aliases", True), ("fractionals", False)):
                    kids = [
                        n
                        for n in plugins
                        if n in children
                        and getattr(plugins[n], BASE_ATTR) == name
                        and bool(getattr(plugins[n], ALIAS_ATTR, False)) is alias
                    ]
                    if kids:
                        item[key] = kids
                items.append(item)
            for err in self._errors:
                if err.plugin_type == pt.label:
                    items.append({"name": err.name, "module": err.module, "error": err.error})
            data[pt.label] = items
        data["errors"] = [
            {"module": e.module, "error": e.error} for e in self._errors if e.plugin_type is None
        ]
        return data

    def __str__(self) -> str:
        """A YAML report of every plugin and problem (``yaml.safe_load`` reads it)."""
        import json

        lines: list[str] = []
        for key, items in self.to_dict().items():
            if not items:
                lines.append(f"{key}: []")
                continue
            lines.append(f"{key}:")
            for item in items:
                first = True
                for field, value in item.items():
                    text = (
                        "[" + ", ".join(json.dumps(v) for v in value) + "]"
                        if isinstance(value, list)
                        else json.dumps(value)  # a JSON string is a valid YAML scalar
                    )
                    lines.append(f"  {'- ' if first else '  '}{field}: {text}")
                    first = False
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<PluginRegistry sources={self.plugin_sources!r} loaded={len(self._cache)}>"


def _sources_from_env() -> PluginSource:
    raw = os.environ.get(PLUGINS_SOURCE_ENV, "").strip()
    if not raw:
        return PluginSource.ALL
    if raw not in {"0", "1", "2", "3"}:
        raise InvalidPluginsSourceError(raw)
    return PluginSource(int(raw))


@functools.lru_cache(maxsize=1)
def registry() -> PluginRegistry:
    """Returns the process-wide :class:`PluginRegistry` (created on first call).

    ``ANYLAUNCH_PLUGINS_SOURCE`` picks the channels: ``0`` none, ``1`` the
    ``anylaunch_plugins`` namespace package only, ``2`` entry points only, ``3`` (default)
    both. Built-in schedulers, resources and components are always available.

    >>> reg = registry()
    >>> reg is registry()
    True

    Raises:
        InvalidPluginsSourceError: (a ``ValueError``) the variable holds another value.
    """
    return PluginRegistry(plugin_sources=_sources_from_env())


def find(plugin_type: PluginType) -> Plugins:
    """Returns the plugins of ``plugin_type``: ``registry().get(plugin_type)``.

    >>> isinstance(find(PluginType.TRACKER), dict)
    True
    """
    return registry().get(plugin_type)
