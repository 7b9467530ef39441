"""The kinds of plugins and the channels they are discovered through."""

from __future__ import annotations

import enum

__all__ = ["NAMESPACE", "PluginSource", "PluginType"]

#: The namespace package that plugin modules live in (``anylaunch_plugins.<group>.<module>``).
NAMESPACE = "anylaunch_plugins"


class PluginType(str, enum.Enum):
    """A kind of plugin; its value is the legacy entry-point group of that kind.

    >>> PluginType.SCHEDULER.value
    'anylaunch.schedulers'
    >>> PluginType.SCHEDULER.namespace
    'anylaunch_plugins.schedulers'
    """

    SCHEDULER = "anylaunch.schedulers"
    NAMED_RESOURCE = "anylaunch.named_resources"
    COMPONENT = "anylaunch.components"
    TRACKER = "anylaunch.tracker"
    EVENT_HANDLER = "anylaunch.event_handlers"
    #: ``(**options) -> OwnerChecker`` for one engine, named after it (see
    #: :mod:`anylaunch.runner.reap`); the engine integrations register theirs as entry points.
    OWNER_CHECKER = "anylaunch.owner_checkers"
    #: ``() -> SubCommand``: an ``anylaunch <name>`` subcommand (TorchX's ``torchx.cli.cmds``);
    #: one named like a built-in replaces it (see :mod:`anylaunch.cli.plugin_cmds`).
    CLI_CMD = "anylaunch.cli.cmds"

    @property
    def namespace(self) -> str:
        """The package whose modules are scanned for this kind of plugin."""
        return f"{NAMESPACE}.{self.value.removeprefix('anylaunch.')}"

    @property
    def label(self) -> str:
        """Lower-case name used in messages and reports (``scheduler``, ``named_resource``)."""
        return self.name.lower()


class PluginSource(enum.IntFlag):
    """Bitmask of discovery channels, as read from ``ANYLAUNCH_PLUGINS_SOURCE``.

    ``0``: none (built-ins only), ``1``: the ``anylaunch_plugins`` namespace package only,
    ``2``: entry points only, ``3``: both (the default).

    >>> PluginSource(3) == PluginSource.NAMESPACE_PKG | PluginSource.ENTRYPOINT
    True
    >>> PluginSource.ENTRYPOINT in PluginSource(1)
    False
    """

    NONE = 0
    NAMESPACE_PKG = 1
    ENTRYPOINT = 2
    ALL = 3
