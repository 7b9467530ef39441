"""The ``@register`` decorators that mark functions in ``anylaunch_plugins`` as plugins.

Decorating only tags the function; :func:`anylaunch.plugins.registry` finds tagged functions
when it scans the ``anylaunch_plugins.<group>`` namespace package.
"""

from __future__ import annotations

import copy
import inspect
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from anylaunch.plugins.fractions import WHOLE, Fractionals
from anylaunch.plugins.types import PluginType
from anylaunch.specs.checks import check_type
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.tags import resource_tags

if TYPE_CHECKING:
    from anylaunch.specs.api import Resource

__all__ = ["NAMED_RESOURCES_ATTR", "register"]

F = TypeVar("F", bound=Callable[..., object])

#: Module attribute in which ``@register.named_resource`` also records every name it
#: registers (``{name: factory}``), as TorchX does for modules read by name.
NAMED_RESOURCES_ATTR = "NAMED_RESOURCES"

# Attributes set on a registered function; the registry reads them.
TYPE_ATTR = "_plugin_type"
NAME_ATTR = "_plugin_name"
BASE_ATTR = "_plugin_base_name"
ALIAS_ATTR = "_plugin_is_alias"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


def _check_name(kind: str, name: object) -> None:
    if name is None:
        return
    if callable(name):
        raise InvalidSpecError(
            f"register.{kind}.name",
            getattr(name, "__name__", name),
            "a function was passed where the plugin name goes",
            f"call the decorator: write @register.{kind}() with parentheses",
        )
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidSpecError(
            f"register.{kind}.name",
            name,
            "must be a name of letters, digits, '_', '.' or '-' that starts with a letter or '_'",
            f"pass e.g. @register.{kind}(name='my_{kind}') or leave it out to use the "
            "function's name",
        )


def _check_callable(kind: str, fn: object) -> None:
    if not callable(fn):
        raise InvalidSpecError(
            f"register.{kind}",
            fn,
            "can only decorate a function",
            "put the decorator on the factory function's `def`",
        )


class register:
    """Decorator that marks a function as an anylaunch plugin of a given type.

    Put the module in the ``anylaunch_plugins.<group>`` namespace package (``schedulers``,
    ``named_resources``, ``components``, ``tracker``, ``event_handlers``, ``owner_checkers``,
    ``cli.cmds``) of an installed
    distribution; :func:`anylaunch.plugins.registry` finds it. The plugin's name is ``name``
    or, by default, the function's name (components: ``<module>.<function>``, like the
    built-ins).

    >>> @register.scheduler()
    ... def my_sched(session_name: str, **kwargs: object) -> object: ...
    >>> my_sched._plugin_type, my_sched._plugin_name
    (<PluginType.SCHEDULER: 'anylaunch.schedulers'>, 'my_sched')
    >>> register.scheduler(my_sched)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: register.scheduler.name='my_sched' is invalid: ...

    Args:
        type: the kind of plugin
        name: the plugin's name; defaults to the decorated function's ``__name__``
    """

    def __init__(self, type: PluginType, name: str | None = None) -> None:
        if not isinstance(type, PluginType):
            raise InvalidSpecError(
                "register.type",
                type,
                "must be a PluginType",
                "use PluginType.SCHEDULER (or one of @register.scheduler() and friends)",
            )
        _check_name(type.label, name)
        self._type = type
        self._name = name

    def __call__(self, fn: F) -> F:
        """Tags ``fn`` as a plugin and returns it unchanged."""
        _check_callable(self._type.label, fn)
        setattr(fn, TYPE_ATTR, self._type)
        setattr(fn, NAME_ATTR, self._name or getattr(fn, "__name__", None))
        return fn

    @classmethod
    def scheduler(cls, name: str | None = None) -> register:
        """Registers a factory ``(session_name: str, **kwargs) -> Scheduler``."""
        return cls(PluginType.SCHEDULER, name=name)

    @classmethod
    def tracker(cls, name: str | None = None) -> register:
        """Registers a tracker factory ``(config: str | None) -> TrackerBase``: configured by
        its name like a built-in tracker (see :mod:`anylaunch.tracker.config`)."""
        return cls(PluginType.TRACKER, name=name)

    @classmethod
    def event_handler(cls, name: str | None = None) -> register:
        """Registers an event :class:`logging.Handler` factory."""
        return cls(PluginType.EVENT_HANDLER, name=name)

    @classmethod
    def owner_checker(cls, name: str | None = None) -> register:
        """Registers the owner-checker factory ``(**options) -> OwnerChecker`` of the engine
        ``name`` (see :mod:`anylaunch.runner.reap`)."""
        return cls(PluginType.OWNER_CHECKER, name=name)

    @classmethod
    def cli_cmd(cls, name: str | None = None) -> register:
        """Registers an ``anylaunch <name>`` subcommand: a
        :class:`~anylaunch.cli.cmd_base.SubCommand` class (or a function returning an
        instance); one named like a built-in subcommand replaces it."""
        return cls(PluginType.CLI_CMD, name=name)

    @classmethod
    def component(cls, name: str | None = None) -> register:
        """Registers a component: a function that returns an ``AppDef``.

        Without ``name`` it is run as ``<module>.<function>``, where ``<module>`` is the
        module's path under ``anylaunch_plugins.components`` (``anylaunch_plugins/components/
        team/train.py`` holding ``ddp`` gives ``team.train.ddp``). An anylaunch addition: TorchX
        registers components through entry points only.

        >>> @register.component(name="hello")
        ... def hello_world(msg: str = "hi") -> object: ...
        >>> hello_world._plugin_name
        'hello'
        """
        return _register_component(name=name)

    @classmethod
    def named_resource(
        cls,
        name: str | None = None,
        aliases: list[str] | None = None,
        fractionals: Fractionals | None = None,
    ) -> _register_named_resource:
        """Registers a named-resource factory, its aliases and its fractional slices.

        Every resource the registered factories return is a fresh copy tagged with its
        registered name (:attr:`resource_tags.RESOURCE_NAME`) and whether it is a fraction
        (:attr:`resource_tags.IS_FRACTIONAL`). With ``fractionals``, the function must take a
        ``fractional: float`` parameter; each ``{fraction: suffix}`` adds ``<name>_<suffix>``,
        made by ``fn(fractional=fraction)`` and fractional unless ``fraction`` is 1.0. Aliases
        get no slices. The names are also set as attributes of the module and recorded in
        its ``NAMED_RESOURCES`` dict.

        Args:
            name: the resource's name; defaults to the function's name
            aliases: more names for the same resource
            fractionals: ``{fraction: suffix}``, or a callable computing it from the
                whole-host resource (see :func:`powers_of_two_gpus`)
        """
        return _register_named_resource(name=name, aliases=aliases, fractionals=fractionals)


class _register_component(register):
    def __init__(self, name: str | None) -> None:
        super().__init__(PluginType.COMPONENT, name=name)

    def __call__(self, fn: F) -> F:
        _check_callable("component", fn)
        setattr(fn, TYPE_ATTR, PluginType.COMPONENT)
        # None: the registry names it <module>.<function> when it finds it
        setattr(fn, NAME_ATTR, self._name)
        return fn


class _register_named_resource(register):
    def __init__(
        self,
        name: str | None,
        aliases: list[str] | None,
        fractionals: Fractionals | None,
    ) -> None:
        super().__init__(PluginType.NAMED_RESOURCE, name=name)
        if aliases is not None and (
            isinstance(aliases, str) or not isinstance(aliases, list | tuple)
        ):
            raise InvalidSpecError(
                "register.named_resource.aliases",
                aliases,
                "must be a list of names",
                "pass e.g. aliases=['gpu_x8']",
            )
        for alias in aliases or ():
            _check_name("named_resource", alias)
        if fractionals is not None and not (isinstance(fractionals, dict) or callable(fractionals)):
            raise InvalidSpecError(
                "register.named_resource.fractionals",
                fractionals,
                "must be a dict {fraction: suffix} or a callable computing one from a Resource",
                "pass e.g. fractionals=powers_of_two_gpus",
            )
        self._aliases = list(aliases or ())
        self._fractionals = fractionals

    def __call__(self, fn: F) -> F:
        _check_callable("named_resource", fn)
        name: str = self._name or fn.__name__
        module = sys.modules.get(getattr(fn, "__module__", None) or "")
        if module is None:
            raise InvalidSpecError(
                f"register.named_resource({name!r})",
                getattr(fn, "__module__", None),
                "the function's module is not imported, so its names cannot be recorded there",
                "decorate a function defined at the top level of a module",
            )
        table: dict[str, Callable[..., Resource]] = (
            getattr(module, NAMED_RESOURCES_ATTR, None) or {}
        )
        setattr(module, NAMED_RESOURCES_ATTR, table)

        def add(reg_name: str, factory: Callable[..., Resource], attr: bool) -> None:
            if reg_name in table:
                raise InvalidSpecError(
                    "register.named_resource.name",
                    reg_name,
                    f"is registered twice in module {module.__name__}",
                    "give each resource, alias and fractional slice its own name",
                )
            factory.__module__ = fn.__module__
            factory.__qualname__ = factory.__name__ = reg_name
            setattr(factory, TYPE_ATTR, PluginType.NAMED_RESOURCE)
            setattr(factory, NAME_ATTR, reg_name)
            table[reg_name] = factory
            if attr:
                if hasattr(module, reg_name):
                    raise InvalidSpecError(
                        "register.named_resource.name",
                        reg_name,
                        f"module {module.__name__} already has an attribute of that name",
                        "rename the resource or the attribute",
                    )
                setattr(module, reg_name, factory)

        base = _tagged(fn, name, fraction=None)
        add(name, base, attr=name != fn.__name__)
        for alias in self._aliases:
            wrapper = _tagged(fn, name, fraction=None)
            setattr(wrapper, BASE_ATTR, name)
            setattr(wrapper, ALIAS_ATTR, True)
            add(alias, wrapper, attr=True)
        if self._fractionals is not None:
            for fraction, suffix in self._slices(fn, name).items():
                slice_name = f"{name}_{suffix}"
                made = _tagged(fn, slice_name, fraction=fraction)
                setattr(made, BASE_ATTR, name)
                add(slice_name, made, attr=True)
        # The decorated name now makes the tagged base resource, as in TorchX.
        return base  # type: ignore[return-value]

    def _slices(self, fn: Callable[..., Any], name: str) -> dict[float, str]:
        field = f"register.named_resource({name!r}).fractionals"
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        if "fractional" not in params:
            raise InvalidSpecError(
                field,
                self._fractionals,
                f"{fn.__qualname__} takes no `fractional` parameter to make the slices with",
                f"define it as `def {fn.__name__}(fractional: float = WHOLE) -> Resource`",
            )
        if isinstance(self._fractionals, dict):
            slices = self._fractionals
        else:
            assert self._fractionals is not None
            slices = self._fractionals(_checked(fn(fractional=WHOLE), name))
        if not isinstance(slices, dict) or not all(
            isinstance(f, int | float)
            and not isinstance(f, bool)
            and 0 < f <= 1
            and isinstance(s, str)
            and s
            for f, s in slices.items()
        ):
            raise InvalidSpecError(
                field,
                slices,
                "must map fractions in (0, 1] to non-empty suffix strings",
                "use e.g. {WHOLE: '8', HALF: '4'}",
            )
        return slices


def _checked(made: Any, name: str) -> Resource:
    from anylaunch.specs.api import Resource

    check_type(
        f"named resource {name!r}",
        made,
        Resource,
        "its factory returned something other than a Resource",
        "make the factory return anylaunch.specs.Resource(cpu=..., gpu=..., memMB=...)",
    )
    resource: Resource = made
    return resource


def _tagged(
    fn: Callable[..., Any], reg_name: str, fraction: float | None
) -> Callable[..., Resource]:
    """A factory calling ``fn`` that tags (a copy of) the resource with ``reg_name``."""

    def factory(*args: Any, **kwargs: Any) -> Resource:
        if fraction is not None:
            kwargs = {**kwargs, "fractional": fraction}
        # A factory may hand out a shared instance: every caller gets its own to change.
        made = copy.deepcopy(_checked(fn(*args, **kwargs), reg_name))
        made.tags[resource_tags.RESOURCE_NAME] = reg_name
        made.tags[resource_tags.IS_FRACTIONAL] = fraction is not None and fraction != WHOLE
        return made

    factory.__doc__ = fn.__doc__ or f"Makes the named resource {reg_name!r}."
    return factory
