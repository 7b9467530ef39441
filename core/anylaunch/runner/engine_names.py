"""Checks of the names an engine object (operator, block, resource, op config) is given.

They run where the object is defined, so that a typo fails there and not when the app is
launched: a scheduler name (against the registered schedulers), a component name (against the
built-in and plugin components) and environment variable names. Each error names the field,
the value (masked if secret) and the fix, with a did-you-mean.

>>> check_scheduler_name("scheduler", "local_cwd")
'local_cwd'
>>> check_scheduler_name("scheduler", "local_cdw")
Traceback (most recent call last):
...
anylaunch.runner.engine_names.UnknownSchedulerNameError: scheduler='local_cdw' is invalid: unknown scheduler 'local_cdw'. Did you mean 'local_cwd'? Fix: ...
>>> check_component_name("component", "utils.ecoh")
Traceback (most recent call last):
...
anylaunch.runner.engine_names.UnknownComponentNameError: component='utils.ecoh' is invalid: unknown component 'utils.ecoh'. Did you mean 'utils.echo'? Fix: ...
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from anylaunch.components import ComponentNotFoundException
from anylaunch.specs.api import ENV_NAME
from anylaunch.specs.errors import InvalidSpecError, UnknownSchedulerException, did_you_mean

__all__ = [
    "UnknownComponentNameError",
    "UnknownSchedulerNameError",
    "check_component_name",
    "check_env_names",
    "check_scheduler_name",
]

# the longest start of a name that Role.env's rule (ENV_NAME) accepts
_VALID_PREFIX = re.compile(ENV_NAME.pattern[:-1] + "*")


class UnknownSchedulerNameError(InvalidSpecError, UnknownSchedulerException):
    """A field names a scheduler that is not registered (an ``InvalidSpecError`` naming the
    field, and an ``UnknownSchedulerException``)."""

    def __init__(self, field: str, scheduler: str, known: Iterable[str]) -> None:
        names = sorted(known)
        self.field, self.value, self.scheduler = field, scheduler, scheduler
        self.problem = f"unknown scheduler {scheduler!r}.{did_you_mean(scheduler, names)}"
        self.fix = (
            f"use one of {', '.join(names) or '(none registered)'}, or register a scheduler "
            "(@anylaunch.plugins.register.scheduler() or the 'anylaunch.schedulers' entry points)"
        )
        Exception.__init__(
            self, f"{field}={scheduler!r} is invalid: {self.problem} Fix: {self.fix}"
        )


class UnknownComponentNameError(InvalidSpecError, ComponentNotFoundException):
    """A field names a component that no built-in or plugin provides (an
    ``InvalidSpecError`` naming the field, and a ``ComponentNotFoundException``)."""

    def __init__(self, field: str, component: str, known: Iterable[str]) -> None:
        self.field, self.value, self.name = field, component, component
        self.problem = f"unknown component {component!r}.{did_you_mean(component, known)}"
        self.fix = (
            "use a built-in (`anylaunch builtins` lists them), a plugin component, "
            "or path/to/file.py:function"
        )
        Exception.__init__(
            self, f"{field}={component!r} is invalid: {self.problem} Fix: {self.fix}"
        )


def check_scheduler_name(field: str, value: object) -> str:
    """Returns ``value`` if it names a registered scheduler.

    Raises:
        InvalidSpecError: ``value`` is not a non-empty str
        UnknownSchedulerNameError: no scheduler has that name (with a did-you-mean)
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidSpecError(field, value, "must be a scheduler name", "e.g. 'local_cwd'")
    from anylaunch.schedulers import get_scheduler_factories

    known = get_scheduler_factories()
    if value not in known:
        raise UnknownSchedulerNameError(field, value, known)
    return value


def check_component_name(field: str, value: object) -> str:
    """Returns ``value`` if it names a built-in or plugin component, or has the form
    ``path/to/file.py:function`` (a file is read only at launch, where it runs).

    Raises:
        InvalidSpecError: ``value`` is not a non-empty str, or a file form without a function
        UnknownComponentNameError: no component has that name (with a did-you-mean)
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidSpecError(field, value, "must be a component name", "e.g. 'utils.echo'")
    if ":" in value:
        path, _, fn_name = value.rpartition(":")
        if not path.strip() or not fn_name.isidentifier():
            raise InvalidSpecError(
                field,
                value,
                "a component file must be named as path/to/file.py:function",
                "e.g. 'my_components.py:train'",
            )
        return value
    from anylaunch.components import get_components

    known = get_components(include_invalid=True)
    if value not in known:
        raise UnknownComponentNameError(field, value, known)
    return value


def _shown(name: str, secret: bool) -> str:
    """An invalid name as an error may show it: a secret env's only up to its first invalid
    character (a token pasted into the name must not reach a log)."""
    if not secret:
        return name
    return f"{_VALID_PREFIX.match(name).group(0)[:40]}***"  # type: ignore[union-attr]


def check_env_names(field: str, env: object, *, secret: bool = False) -> None:
    """Rejects a mapping whose keys are not environment variable names (``Role.env``'s rule:
    printable, no ``=``, no space), or whose values are not str; a secret mapping's values
    are never shown.

    >>> check_env_names("env", {"A B": "1"})
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: env='A B' is invalid: is not an environment variable name (printable, no '=' and no space). Fix: rename it, e.g. 'HF_TOKEN'
    """
    if not isinstance(env, Mapping):
        raise InvalidSpecError(field, type(env).__name__, "must be a mapping", "e.g. {'K': 'v'}")
    for name, value in env.items():
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            raise InvalidSpecError(
                field,
                _shown(name, secret) if isinstance(name, str) else f"<{type(name).__name__}>",
                "is not an environment variable name (printable, no '=' and no space)",
                "rename it, e.g. 'HF_TOKEN'",
            )
        if not isinstance(value, str):
            raise InvalidSpecError(
                f"{field}[{name!r}]",
                f"<{type(value).__name__}>" if secret else value,
                "must be a str",
                "quote the value, e.g. '1'",
            )
