"""Plugin registration and discovery: schedulers, named resources, components, trackers.

A plugin package puts modules in the ``anylaunch_plugins`` namespace package (no
``__init__.py`` in ``anylaunch_plugins/`` nor in its group directories) and decorates factories
with :class:`register`; installing the package is all it takes::

    # anylaunch_plugins/schedulers/my_scheduler.py
    from anylaunch.plugins import register

    @register.scheduler()
    def my_scheduler(session_name: str, **kwargs: object) -> Scheduler:
        return MyScheduler(session_name, **kwargs)

    # anylaunch_plugins/named_resources/my_cluster.py
    @register.named_resource(fractionals=powers_of_two_gpus)
    def gpu_x(fractional: float = WHOLE) -> Resource:  # gpu_x, gpu_x_8, gpu_x_4, ...
        return Resource(cpu=int(64 * fractional), gpu=int(8 * fractional), memMB=...)

    # anylaunch_plugins/components/team.py  -> runs as `team.train`
    @register.component()
    def train(script: str) -> AppDef: ...

    # anylaunch_plugins/tracker/my_tracker.py  -> ANYLAUNCH_TRACKERS=my_tracker
    @register.tracker()
    def my_tracker(config: str | None) -> TrackerBase:
        return MyTracker(config)

A TorchX plugin package is ported by renaming ``torchx`` to ``anylaunch`` in its imports and
``torchx_plugins`` to ``anylaunch_plugins``. The groups are ``schedulers``,
``named_resources``, ``components``, ``tracker`` and ``event_handlers``, plus
``owner_checkers`` (each engine's checker for ``anylaunch reap``; anylaunch's own, declared as
entry points, count as built-ins) and ``cli.cmds`` (``anylaunch`` subcommands, TorchX's
``torchx.cli.cmds``; see :mod:`anylaunch.cli.plugin_cmds`).

Plugins add to the built-ins: a plugin scheduler, resource or component joins the built-in
ones. A plugin whose name equals a built-in's replaces it, and a warning is logged saying
so. Entry points (``[project.entry-points."anylaunch.schedulers"]`` and the
``anylaunch.named_resources`` / ``anylaunch.components`` groups) still work, as the legacy
channel; a name registered both ways resolves to the entry point, with a warning.
``ANYLAUNCH_PLUGINS_SOURCE`` selects the channels: ``0`` none, ``1`` namespace package only,
``2`` entry points only, ``3`` both (default).

Inspect what was found::

    from anylaunch import plugins
    reg = plugins.registry()
    reg.get(plugins.PluginType.SCHEDULER)   # {name: factory}
    print(reg)                              # YAML report, including broken plugins

>>> from anylaunch.plugins import PluginType, find
>>> sorted(find(PluginType.SCHEDULER)) == sorted(find(PluginType.SCHEDULER))
True

Importing this package is cheap; discovery runs on first use.
"""

from __future__ import annotations

from anylaunch.lazy import lazy_getattr

TYPE_CHECKING = False
if TYPE_CHECKING:
    from anylaunch.plugins.discovery import EntryPointPlugin, RegistrationError
    from anylaunch.plugins.errors import InvalidPluginsSourceError, PluginLoadError
    from anylaunch.plugins.fractions import (
        EIGHTH,
        HALF,
        QUARTER,
        SIXTEENTH,
        WHOLE,
        halve_mem_down_to,
        powers_of_two_gpus,
    )
    from anylaunch.plugins.plugin_registry import PluginRegistry, find, registry
    from anylaunch.plugins.registration import register
    from anylaunch.plugins.types import PluginSource, PluginType
    from anylaunch.specs.tags import resource_tags

# the module defining each name (the tag keys are plain data of anylaunch.specs)
_LAZY = {
    "anylaunch.plugins.discovery": ("EntryPointPlugin", "RegistrationError"),
    "anylaunch.plugins.errors": ("InvalidPluginsSourceError", "PluginLoadError"),
    "anylaunch.plugins.fractions": (
        "EIGHTH",
        "HALF",
        "QUARTER",
        "SIXTEENTH",
        "WHOLE",
        "halve_mem_down_to",
        "powers_of_two_gpus",
    ),
    "anylaunch.plugins.registration": ("register",),
    "anylaunch.plugins.plugin_registry": ("PluginRegistry", "find", "registry"),
    "anylaunch.plugins.types": ("PluginSource", "PluginType"),
    "anylaunch.specs.tags": ("resource_tags",),
}

__all__ = [
    "EIGHTH",
    "HALF",
    "QUARTER",
    "SIXTEENTH",
    "WHOLE",
    "EntryPointPlugin",
    "InvalidPluginsSourceError",
    "PluginLoadError",
    "PluginRegistry",
    "PluginSource",
    "PluginType",
    "RegistrationError",
    "find",
    "halve_mem_down_to",
    "powers_of_two_gpus",
    "register",
    "registry",
    "resource_tags",
]


__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
