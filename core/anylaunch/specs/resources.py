"""Named resources: look up a :class:`~anylaunch.specs.Resource` by name.

Names come from three places, later ones overriding earlier ones:

1. generic t-shirt sizes (:mod:`anylaunch.specs.named_resources_generic`, e.g. ``gpu.small``),
2. AWS instance types (:mod:`anylaunch.specs.named_resources_aws`, e.g. ``aws_p3.2xlarge``),
3. plugins: factories decorated with ``@anylaunch.plugins.register.named_resource()`` in the
   ``anylaunch_plugins.named_resources`` namespace package of an installed distribution (see
   :mod:`anylaunch.plugins`), and, the legacy way, entry points in the
   ``anylaunch.named_resources`` group: the entry point's name is the resource name and its
   object a zero-argument callable returning a ``Resource``::

       [anylaunch.named_resources]
       gpu_x2 = my_module.resources:gpu_x2

   A plugin named like a built-in replaces it, with a warning in the log.

This module knows only the built-ins: the plugins reach it through a *source*, a zero-argument
callable returning ``{name: factory}``, registered in the :data:`SOURCES_GROUP` entry-point
group (anylaunch registers :func:`anylaunch.plugins.named_resources.plugin_named_resources`
there), so ``anylaunch.specs`` imports nothing of the layers above it.

The table is built on first access (reading entry points needs ``importlib.metadata``, which
``import anylaunch.specs`` must not pay for); a user entry point is imported only when its name
is looked up, so one broken plugin cannot break the other names.

>>> from anylaunch.specs import resource, named_resources
>>> resource(h="gpu.small")  # generic t-shirt size
Resource(cpu=8, gpu=1, memMB=32768, capabilities={}, devices={},
         tags={'anylaunch/resource_name': 'gpu.small'})
>>> r = resource(h="aws_p3.2xlarge")  # AWS instance type
>>> (r.cpu, r.gpu, r.get_resource_name())
(8, 1, 'aws_p3.2xlarge')
>>> "cpu.small" in named_resources
True
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from anylaunch.specs.api import NULL_RESOURCE, Resource
from anylaunch.specs.errors import AnylaunchError, InvalidSpecError, did_you_mean
from anylaunch.specs.tags import resource_tags

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
    "ENTRY_POINT_GROUP",
    "SOURCES_GROUP",
    "NamedResourceEntryPointError",
    "ResourceFactory",
    "ResourceSource",
    "UnknownNamedResourceError",
    "get_named_resources",
    "named_resource",
    "named_resources",
    "reload_named_resources",
    "resource",
]

logger: logging.Logger = logging.getLogger(__name__)

#: A zero-argument callable that makes a fresh Resource.
ResourceFactory = Callable[[], Resource]

#: Entry-point group in which installed distributions register their own named resources.
ENTRY_POINT_GROUP = "anylaunch.named_resources"

#: Where the named resources beyond the built-ins come from: ``{name: factory}``, asked each
#: time the table is built.
ResourceSource = Callable[[], Mapping[str, ResourceFactory]]

#: Entry-point group of the :data:`ResourceSource` s (loaded in name order): how the plugin
#: layer, above specs, adds its named resources to :data:`named_resources`.
SOURCES_GROUP = "anylaunch.named_resource_sources"

# Raw-spec defaults of resource(): the same values TorchX uses.
_DEFAULT_CPU = 2
_DEFAULT_GPU = 0
_DEFAULT_MEM_MB = 1024


class UnknownNamedResourceError(AnylaunchError, KeyError):
    """No named resource is registered under the requested name.

    A ``KeyError`` so that ``Mapping.get`` and ``in`` work as usual on :data:`named_resources`.
    """

    def __init__(self, name: object, known: Iterable[str]) -> None:
        self.name = name
        hint = did_you_mean(name, known) if isinstance(name, str) else ""
        self.message = (
            f"unknown named resource {name!r}.{hint} Fix: use a registered name "
            "(list them with `list(anylaunch.specs.named_resources)`), pass raw cpu/gpu/memMB "
            "instead, or register your own with @anylaunch.plugins.register.named_resource() "
            "in a module of the anylaunch_plugins.named_resources package (legacy: under the "
            f"{ENTRY_POINT_GROUP!r} entry-point group)"
        )
        super().__init__(self.message)

    def __str__(self) -> str:
        # KeyError's own __str__ would print the message as a quoted repr.
        return self.message


class NamedResourceEntryPointError(InvalidSpecError):
    """An entry point in the ``anylaunch.named_resources`` group cannot make its resource."""

    def __init__(self, entry_point: EntryPoint, problem: str) -> None:
        self.entry_point_name = entry_point.name
        super().__init__(
            f"entry point {entry_point.name!r} (group {ENTRY_POINT_GROUP!r})",
            entry_point.value,
            problem,
            "point the entry point at a zero-argument callable that returns "
            "anylaunch.specs.Resource, e.g. `my_pkg.resources:gpu_x2`, and reinstall the "
            "distribution that declares it (or uninstall it)",
        )


def named_resource(
    name: str, factory: ResourceFactory, divisors: Iterable[int] = ()
) -> dict[str, ResourceFactory]:
    """Registers ``factory`` under ``name``, plus ``1/d`` slices of it for each ``d`` in ``divisors``.

    Every resource the returned factories make is a fresh copy tagged with its name, so
    ``Resource.get_resource_name()`` returns it. A ``1/d`` slice divides cpu, gpu, memMB and
    device counts by ``d`` (rounding down; devices that drop to 0 are left out, so ``d`` slices
    always fit on one host), keeps the capabilities, reports ``is_fractional()`` and is named
    ``<name>_<n>`` where ``n`` is the slice's GPU count (TorchX's convention: on an 8-GPU host
    ``_1`` is an eighth, ``_4`` a half and ``_8`` the whole host). The base factory is called once
    here when ``divisors`` is given, to learn its GPU count.

    >>> table = named_resource(
    ...     "box", lambda: Resource(cpu=96, gpu=8, memMB=1024), divisors=(1, 2, 8)
    ... )
    >>> sorted(table)
    ['box', 'box_1', 'box_4', 'box_8']
    >>> half = table["box_4"]()
    >>> (half.cpu, half.gpu, half.memMB, half.get_resource_name(), half.is_fractional())
    (48, 4, 512, 'box_4', True)
    >>> table["box"]().is_fractional(), table["box_8"]().is_fractional()  # 1/1: the whole host
    (False, False)
    """
    if not isinstance(name, str) or not name:
        raise InvalidSpecError(
            "named_resource.name", name, "must be a non-empty str", "pass e.g. 'gpu.small'"
        )
    if not callable(factory):
        raise InvalidSpecError(
            "named_resource.factory",
            factory,
            "must be a zero-argument callable returning a Resource",
            "pass the factory function itself, not its result",
        )
    table: dict[str, ResourceFactory] = {name: _tagging(name, factory, divisor=1, fraction=False)}
    divisors = tuple(divisors)
    if divisors:
        gpus = _call(name, factory).gpu
        for d in divisors:
            _check_divisor(name, d, gpus)
            slice_name = f"{name}_{gpus // d}"
            table[slice_name] = _tagging(
                slice_name, factory, divisor=d, fraction=d != 1
            )  # the whole host is no fraction
    return table


def _check_divisor(name: str, d: object, gpus: int) -> None:
    field = f"named_resource({name!r}).divisors"
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise InvalidSpecError(field, d, "must hold ints >= 1", "use e.g. divisors=(1, 2, 4, 8)")
    if gpus < 1 or gpus % d:
        raise InvalidSpecError(
            field,
            d,
            f"slices are named by GPU count, so each divisor must split the {gpus} GPU(s) evenly",
            "use divisors of the resource's GPU count (e.g. 1, 2, 4, 8 for 8 GPUs)",
        )


def _call(name: str, factory: ResourceFactory) -> Resource:
    made = factory()
    if not isinstance(made, Resource):
        raise InvalidSpecError(
            f"named resource {name!r}",
            made,
            f"its factory returned a {type(made).__name__}, not a Resource",
            "make the factory return anylaunch.specs.Resource(cpu=..., gpu=..., memMB=...)",
        )
    return made


def _tagging(name: str, factory: ResourceFactory, divisor: int, fraction: bool) -> ResourceFactory:
    def create() -> Resource:
        # A factory may hand out a shared instance; every caller gets its own to mutate.
        made = copy.deepcopy(_call(name, factory))
        if fraction:
            made = Resource(
                cpu=made.cpu // divisor,
                gpu=made.gpu // divisor,
                memMB=made.memMB // divisor,
                capabilities=made.capabilities,
                devices={k: n // divisor for k, n in made.devices.items() if n // divisor},
                tags={**made.tags, resource_tags.IS_FRACTIONAL: True},
            )
        made.tags[resource_tags.RESOURCE_NAME] = name
        return made

    create.__name__ = create.__qualname__ = name
    create.__doc__ = f"Makes the named resource {name!r}."
    return create


def _sources() -> list[ResourceSource]:
    from importlib.metadata import entry_points

    sources: list[ResourceSource] = []
    for ep in sorted(entry_points(group=SOURCES_GROUP), key=lambda ep: ep.name):
        try:
            sources.append(ep.load())
        except Exception as e:  # a broken source must not hide the built-ins
            logger.warning(
                "named-resource source %r (%s) failed to load: %s: %s",
                ep.name,
                ep.value,
                type(e).__name__,
                e,
            )
    return sources


def _load_factories() -> dict[str, ResourceFactory]:
    # Imported here: the built-in tables import this module for named_resource().
    from anylaunch.specs import named_resources_aws, named_resources_generic

    builtins = {**named_resources_generic.NAMED_RESOURCES, **named_resources_aws.NAMED_RESOURCES}
    table = dict(builtins)
    for source in _sources():
        for name, factory in source().items():
            if name in builtins:
                logger.warning(
                    "named resource %r from plugin %s replaces the built-in of that name",
                    name,
                    getattr(factory, "__module__", None),
                )
            table[name] = factory
    # as in TorchX: "NULL" and "MISSING" name the placeholder resource (cpu, gpu and memMB -1,
    # Resource.is_null()), whatever plugins say
    for name in ("NULL", "MISSING"):
        table[name] = _tagging(name, lambda: NULL_RESOURCE, divisor=1, fraction=False)
    return table


class _NamedResources(Mapping[str, Resource]):
    """Read-only mapping of name to Resource; each lookup makes a fresh Resource."""

    def __init__(self) -> None:
        self._factories: dict[str, ResourceFactory] | None = None

    def _table(self) -> dict[str, ResourceFactory]:
        # Two threads racing here both build the same table; the last one simply wins.
        if self._factories is None:
            self._factories = _load_factories()
        return self._factories

    def forget(self) -> None:
        """Drops the table: the next lookup builds it again."""
        self._factories = None

    def __getitem__(self, name: str) -> Resource:
        table = self._table()
        factory = table.get(name) if isinstance(name, str) else None
        if factory is None:
            raise UnknownNamedResourceError(name, table)
        return factory()

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._table()

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def __repr__(self) -> str:
        if self._factories is None:
            return "<named_resources (not loaded yet)>"
        return f"<named_resources: {len(self._factories)} registered>"


_named_resources = _NamedResources()

#: Every registered named resource, loaded on first access. ``named_resources[name]`` returns
#: a fresh Resource or raises :class:`UnknownNamedResourceError`.
named_resources: Mapping[str, Resource] = _named_resources


def reload_named_resources() -> None:
    """Forgets the table of :data:`named_resources`; the next lookup asks the sources again.

    The plugin registry calls it when it is cleared, so plugins installed since are found.

    >>> reload_named_resources()
    >>> named_resources
    <named_resources (not loaded yet)>
    """
    _named_resources.forget()


def get_named_resources(name: str) -> Resource:
    """Returns a fresh copy of the named resource ``name`` (same as ``named_resources[name]``).

    >>> get_named_resources("cpu.medium").memMB
    4096
    >>> get_named_resources("cpu.mediun")
    Traceback (most recent call last):
    ...
    anylaunch.specs.resources.UnknownNamedResourceError: unknown named resource 'cpu.mediun'.
      Did you mean 'cpu.medium'? Fix: ...
    """
    return named_resources[name]


def resource(
    cpu: int | None = None,
    gpu: int | None = None,
    memMB: int | None = None,
    h: str | None = None,
) -> Resource:
    """Creates a Resource from raw specs or a named resource.

    When ``h`` is set it takes precedence and the raw specs are ignored. Raw specs left unset
    default to ``cpu=2``, ``gpu=0``, ``memMB=1024`` (as in TorchX). An empty ``h`` counts as
    unset, as in TorchX.

    >>> resource(cpu=4, gpu=1, memMB=8192)
    Resource(cpu=4, gpu=1, memMB=8192, capabilities={}, devices={}, tags={})
    >>> resource(cpu=4, h="cpu.nano").cpu
    1
    >>> resource()
    Resource(cpu=2, gpu=0, memMB=1024, capabilities={}, devices={}, tags={})

    Args:
        cpu: number of logical cpu cores
        gpu: number of gpus
        memMB: MB of ram
        h: name of a registered named resource (e.g. ``"gpu.small"``, ``"aws_p3.2xlarge"``)

    Raises:
        UnknownNamedResourceError: ``h`` is not a registered name.
        InvalidSpecError: ``h`` is not a str, or a raw spec is not an int >= 0.
    """
    if h is not None and not isinstance(h, str):
        raise InvalidSpecError(
            "resource.h",
            h,
            "must be the name of a named resource (a str)",
            "pass e.g. h='gpu.small'",
        )
    if h:
        return named_resources[h]
    return Resource(
        cpu=_DEFAULT_CPU if cpu is None else cpu,
        gpu=_DEFAULT_GPU if gpu is None else gpu,
        memMB=_DEFAULT_MEM_MB if memMB is None else memMB,
    )
