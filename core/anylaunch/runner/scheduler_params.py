"""The keyword arguments ``get_runner(**scheduler_params)`` hands to every scheduler factory.

As in TorchX, every keyword goes to every scheduler's factory, and each scheduler takes the
ones it knows. A keyword that no scheduler takes would be dropped silently (a typo such as
``kubconfig=`` would leave the default in place), so :func:`check_scheduler_params` rejects
it, naming the accepted keywords and the closest one.

A scheduler's accepted keywords are the named parameters of its factory plus the
``factory_kwargs`` its scheduler class declares (see ``Scheduler.from_kwargs``). The keywords
TorchX's own scheduler factories take (``cache_size``, ``extra_paths``,
``image_provider_class``, ``client``, ``log_client``, ``docker_client``) are accepted too, so
ported code keeps working; where a scheduler here has no use for one, it is ignored, as it
is by TorchX's schedulers that do not take it. A plugin factory that takes ``**kwargs``
without declaring which (no ``factory_kwargs``) may take any keyword: with one installed,
nothing is rejected.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any

from anylaunch.specs.errors import InvalidSpecError, did_you_mean

__all__ = ["TORCHX_SCHEDULER_PARAMS", "check_scheduler_params", "scheduler_params_of"]

#: Keywords TorchX's scheduler factories take, to the TorchX schedulers that take them.
TORCHX_SCHEDULER_PARAMS: dict[str, str] = {
    "cache_size": "local_cwd",
    "extra_paths": "local_cwd",
    "image_provider_class": "local_cwd",
    "client": "kubernetes, kubernetes_mcad, aws_batch, aws_sagemaker",
    "log_client": "aws_batch",
    "docker_client": "aws_batch, aws_sagemaker",
}

log: logging.Logger = logging.getLogger(__name__)


def _unwrap_registry_factory(factory: object) -> Callable[..., Any] | None:
    """The function behind one of ``anylaunch.schedulers``' lazy factories (importing its
    module or loading its entry point), or the factory itself; None if it cannot load."""
    try:
        module = getattr(factory, "module", None)
        entry_point = getattr(factory, "entry_point", None)
        if isinstance(module, str) and type(factory).__name__ == "_DeferredFactory":
            import importlib

            fn: Callable[..., Any] = importlib.import_module(module).create_scheduler
            return fn
        if entry_point is not None and type(factory).__name__ == "_EntryPointFactory":
            loaded: Callable[..., Any] = entry_point.load()
            return loaded
    except Exception as e:  # a scheduler that cannot load takes no keyword at all
        log.debug("scheduler factory %r did not load: %s", factory, e)
        return None
    return factory if callable(factory) else None


def _declared_factory_kwargs(fn: Callable[..., Any]) -> tuple[str, ...] | None:
    """The ``factory_kwargs`` of the scheduler class ``fn`` returns: a built-in's always
    (they construct through ``from_kwargs``), a plugin's if its class (not only the base)
    declares them; None when unknown."""
    from anylaunch.schedulers.api import Scheduler

    try:
        returned = inspect.signature(fn, eval_str=True).return_annotation
    except Exception:  # an annotation that does not resolve says nothing
        return None
    if not (isinstance(returned, type) and issubclass(returned, Scheduler)):
        return None
    if getattr(fn, "__module__", "").startswith("anylaunch.schedulers."):
        # the built-in factories all construct through Scheduler.from_kwargs
        return tuple(returned.factory_kwargs)
    for cls in returned.__mro__:
        if cls is Scheduler:
            return None
        if "factory_kwargs" in vars(cls):
            declared: tuple[str, ...] = tuple(vars(cls)["factory_kwargs"])
            return declared
    return None


@functools.lru_cache(maxsize=64)
def _params_of_function(fn: Callable[..., Any]) -> frozenset[str] | None:
    try:
        params = list(inspect.signature(fn).parameters.values())[1:]  # after session_name
    except (TypeError, ValueError):
        return None  # a builtin or C callable: cannot tell
    named = {
        p.name
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return frozenset(named)
    declared = _declared_factory_kwargs(fn)
    if declared is None:
        return None  # **kwargs, and nothing says which it reads
    return frozenset(named | set(declared))


def scheduler_params_of(factory: object) -> frozenset[str] | None:
    """The keywords ``factory`` takes; None if it may take any (an undeclared ``**kwargs``).

    >>> from anylaunch.schedulers import get_scheduler_factory
    >>> sorted(scheduler_params_of(get_scheduler_factory("local_cwd")))
    ['start_timeout', 'state_dir']
    """
    fn = _unwrap_registry_factory(factory)
    if fn is None:
        return frozenset()
    try:
        return _params_of_function(fn)
    except TypeError:  # unhashable callable: not cached
        return _params_of_function.__wrapped__(fn)


def _torchx_only(key: str) -> str:
    return f"TorchX's {TORCHX_SCHEDULER_PARAMS[key]}; accepted and ignored here"


def check_scheduler_params(
    params: Mapping[str, object], factories: Mapping[str, Callable[..., Any]]
) -> None:
    """Raises if a keyword of ``params`` is taken by none of ``factories`` (nor by TorchX's).

    Imports the scheduler modules (no backend SDK) only when ``params`` is not empty.

    >>> from anylaunch.schedulers import get_scheduler_factories
    >>> check_scheduler_params({"kubeconfig": "/k", "cache_size": 10}, get_scheduler_factories())
    >>> check_scheduler_params({"kubconfig": "/k"}, get_scheduler_factories())
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: get_runner(kubconfig)='<not shown>' is invalid: ...

    Raises:
        InvalidSpecError: a keyword no scheduler takes, with a did-you-mean and the list of
            accepted keywords (and which schedulers take each); its value is not shown,
            since a misspelt keyword may carry a credential.
    """
    if not params:
        return
    takers: dict[str, list[str]] = {}
    for name, factory in factories.items():
        accepted = scheduler_params_of(factory)
        if accepted is None:
            log.debug("scheduler %s may take any keyword: scheduler_params not checked", name)
            return
        for key in accepted:
            takers.setdefault(key, []).append(name)
    known = sorted(set(takers) | set(TORCHX_SCHEDULER_PARAMS))
    for key in params:
        if key in known:
            continue
        listing = "; ".join(
            f"{k} ({', '.join(takers[k]) if k in takers else _torchx_only(k)})" for k in known
        )
        raise InvalidSpecError(
            f"get_runner({key})",
            "<not shown>",
            f"no scheduler takes this keyword.{did_you_mean(key, known)}",
            f"use one of: {listing}; or drop it",
        )
