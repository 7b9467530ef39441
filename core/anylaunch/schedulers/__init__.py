"""The scheduler registry: names → factories, loaded lazily.

Listing schedulers imports no backend module and no SDK: a built-in scheduler's module is
imported when its factory is first called. Third-party schedulers are plugins (see
:mod:`anylaunch.plugins`): a factory ``(session_name, **kwargs) -> Scheduler`` decorated with
``@register.scheduler()`` in a module of the ``anylaunch_plugins.schedulers`` namespace
package, or (legacy) registered under the entry-point group ``anylaunch.schedulers``.

Plugin schedulers are added to the built-ins, which stay available (TorchX drops the
built-ins once any scheduler entry point is installed). A plugin named like a built-in
replaces it, and a warning is logged once per process.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing costs ~8 ms to import; this package must start fast
if TYPE_CHECKING:
    from typing import Any

    from anylaunch.schedulers.api import Scheduler as Scheduler
    from anylaunch.schedulers.api import SchedulerFactory as SchedulerFactory

# Nothing from anylaunch.specs is imported at module level: the local_cwd supervisor imports
# this package on every app start and must stay a few milliseconds from exec to running.

#: Built-in schedulers, in order: the first is the default.
DEFAULT_SCHEDULER_MODULES: dict[str, str] = {
    "local_cwd": "anylaunch.schedulers.local_scheduler",
    "local_docker": "anylaunch.schedulers.docker_scheduler",
    "slurm": "anylaunch.schedulers.slurm_scheduler",
    "kubernetes": "anylaunch.schedulers.kubernetes_scheduler",
    "kubernetes_mcad": "anylaunch.schedulers.kubernetes_mcad_scheduler",
    "aws_batch": "anylaunch.schedulers.aws_batch_scheduler",
    "aws_sagemaker": "anylaunch.schedulers.aws_sagemaker_scheduler",
    "lsf": "anylaunch.schedulers.lsf_scheduler",
}

ENTRY_POINT_GROUP = "anylaunch.schedulers"

# Built-in names a plugin replaced and that were already warned about in this process.
_warned_overrides: set[str] = set()


def __getattr__(name: str) -> Any:
    if name == "SchedulerFactory":
        from anylaunch.schedulers.api import SchedulerFactory

        return SchedulerFactory
    if name == "Scheduler":
        from anylaunch.schedulers.api import Scheduler

        return Scheduler
    raise AttributeError(f"module 'anylaunch.schedulers' has no attribute {name!r}")


class _DeferredFactory:
    """Imports ``module`` and calls its ``create_scheduler`` on first use."""

    def __init__(self, name: str, module: str) -> None:
        self.name = name
        self.module = module

    def __call__(self, session_name: str, **kwargs: Any) -> Scheduler[Any]:
        from anylaunch.specs.errors import SchedulerUnavailableError

        try:
            mod = importlib.import_module(self.module)
        except ModuleNotFoundError as e:
            if e.name != self.module:
                raise  # a dependency of the module is missing: let its own error speak
            raise SchedulerUnavailableError(
                f"scheduler {self.name!r} is not available in this version of anylaunch "
                f"(no module {self.module}). Fix: choose another scheduler "
                "(`anylaunch runopts` lists them) or upgrade anylaunch"
            ) from None
        factory: SchedulerFactory = mod.create_scheduler
        return factory(session_name, **kwargs)

    def __repr__(self) -> str:
        return f"<scheduler factory {self.name} from {self.module}>"


class _EntryPointFactory:
    def __init__(self, name: str, entry_point: Any) -> None:
        self.name = name
        self.entry_point = entry_point

    def __call__(self, session_name: str, **kwargs: Any) -> Scheduler[Any]:
        from anylaunch.specs.errors import SchedulerUnavailableError

        try:
            factory: SchedulerFactory = self.entry_point.load()
        except Exception as e:  # a third-party plugin can fail in any way on import
            raise SchedulerUnavailableError(
                f"scheduler {self.name!r} from entry point {self.entry_point.value!r} failed to "
                f"load: {e}. Fix: reinstall or repair the package that provides it"
            ) from e
        return factory(session_name, **kwargs)


def get_scheduler_factories(*, skip_defaults: bool = False) -> dict[str, SchedulerFactory]:
    """Returns all available scheduler names and the factories that create them.

    The built-ins come first (the first one is the default), then the plugin schedulers (see
    :mod:`anylaunch.plugins`). A plugin named like a built-in takes its place, with a logged
    warning. Listing imports the plugin modules of ``anylaunch_plugins.schedulers`` but no
    built-in backend module and no entry point.

    >>> list(get_scheduler_factories())[:2]
    ['local_cwd', 'local_docker']

    Args:
        skip_defaults: return the plugin schedulers only
    """
    from anylaunch.plugins.discovery import EntryPointPlugin
    from anylaunch.plugins.plugin_registry import registry
    from anylaunch.plugins.types import PluginType

    factories: dict[str, SchedulerFactory] = {}
    if not skip_defaults:
        for name, module in DEFAULT_SCHEDULER_MODULES.items():
            factories[name] = _DeferredFactory(name, module)
    for name, plugin in registry().get(PluginType.SCHEDULER).items():
        if name in DEFAULT_SCHEDULER_MODULES and name not in _warned_overrides:
            import logging  # only here: this package must start fast

            _warned_overrides.add(name)
            logging.getLogger(__name__).warning(
                "scheduler %r from plugin %s replaces the built-in scheduler of that name",
                name,
                plugin.__module__,
            )
        if isinstance(plugin, EntryPointPlugin):
            factories[name] = _EntryPointFactory(name, plugin.entry_point)
        else:
            factories[name] = plugin
    return factories


def get_default_scheduler_name() -> str:
    """Returns the name of the default scheduler (the first in get_scheduler_factories).

    >>> get_default_scheduler_name()
    'local_cwd'
    """
    return next(iter(get_scheduler_factories()))


def get_scheduler_factory(name: str) -> SchedulerFactory:
    """Returns the factory registered under ``name``.

    Raises:
        UnknownSchedulerException: with a did-you-mean, when no scheduler has that name.
    """
    from anylaunch.specs.errors import UnknownSchedulerException

    factories = get_scheduler_factories()
    if name not in factories:
        raise UnknownSchedulerException(name, factories)
    return factories[name]
