"""The plugins' named resources, as a source of :data:`anylaunch.specs.named_resources`.

``anylaunch.specs`` imports nothing of this package: it finds :func:`plugin_named_resources`
through the ``anylaunch.named_resource_sources`` entry point that anylaunch's own
``pyproject.toml`` declares, and calls it when it builds its table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anylaunch.plugins.discovery import EntryPointPlugin
from anylaunch.plugins.plugin_registry import on_clear, registry
from anylaunch.plugins.types import PluginType
from anylaunch.specs.api import Resource
from anylaunch.specs.resources import (
    NamedResourceEntryPointError,
    ResourceFactory,
    named_resource,
    reload_named_resources,
)

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["plugin_named_resources"]


def plugin_named_resources() -> dict[str, ResourceFactory]:
    """``{name: factory}`` of every named-resource plugin (namespace package and entry points,
    as ``ANYLAUNCH_PLUGINS_SOURCE`` selects); clearing the registry reloads the specs' table.

    >>> isinstance(plugin_named_resources(), dict)
    True
    """
    on_clear(reload_named_resources)
    table: dict[str, ResourceFactory] = {}
    for name, plugin in registry().get(PluginType.NAMED_RESOURCE).items():
        if isinstance(plugin, EntryPointPlugin):
            factory = named_resource(name, _entry_point_factory(plugin.entry_point))[name]
            factory.__module__ = plugin.__module__  # named in the "replaces" warning
            table[name] = factory
        else:  # @register.named_resource already tags what it makes
            table[name] = plugin
    return table


def _entry_point_factory(entry_point: EntryPoint) -> ResourceFactory:
    """Defers importing a user's entry point until its name is looked up."""

    def create() -> Resource:
        try:
            factory = entry_point.load()
        except Exception as e:
            problem = f"importing it failed ({type(e).__name__}: {e})"
            raise NamedResourceEntryPointError(entry_point, problem) from e
        if not callable(factory):
            problem = f"it loads a {type(factory).__name__}, not a callable"
            raise NamedResourceEntryPointError(entry_point, problem)
        try:
            made = factory()
        except Exception as e:
            problem = f"calling it raised {type(e).__name__}: {e}"
            raise NamedResourceEntryPointError(entry_point, problem) from e
        if not isinstance(made, Resource):
            problem = f"it returned a {type(made).__name__}, not a Resource"
            raise NamedResourceEntryPointError(entry_point, problem)
        return made

    return create
