"""Small input checks shared across the package (cheap to import: DAG files call them)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from anylaunch.specs.errors import InvalidSpecError

__all__ = ["check_known_fields", "check_seconds", "check_session_name", "check_type"]


def check_type(
    field_name: str,
    value: object,
    kind: type | tuple[type, ...],
    problem: str,
    fix: str,
    *,
    keys: type | None = None,
    items: type | tuple[type, ...] | None = None,
    nonempty: bool = False,
    error: type[InvalidSpecError] = InvalidSpecError,
) -> None:
    """Raises ``error`` naming ``field_name``, the type of ``value``, ``problem`` and ``fix``
    unless ``value`` is a ``kind``. The error shows the type, never the value (it may be large,
    or hold secrets). ``bool`` is never accepted where ``kind`` is ``int`` or ``float``.

    Args:
        field_name: the field the error names
        value: the value to check
        kind: the type (or types) ``value`` must be
        problem: what is wrong, for the error
        fix: how to fix it, for the error
        keys: the type every key of a dict ``value`` must be
        items: the type(s) every element of a list/tuple (or value of a dict) must be
        nonempty: also refuse an empty ``value`` (``""``, ``[]``, ``{}``)
        error: the error class (InvalidRunConfigException for run options)

    >>> check_type("cfg", {"a": 1}, dict, "must be a dict", "pass a dict", keys=str)
    >>> check_type("cfg", ["a"], dict, "must be a dict", "pass a dict")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: cfg='list' is invalid: must be a dict. Fix: pass a dict
    >>> check_type("args", ["a", 1], list, "must be a list of str", "use str()", items=str)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: args='list' is invalid: must be a list of str. Fix: use str()
    """
    bad = not isinstance(value, kind) or (
        isinstance(value, bool) and bool not in _as_tuple(kind) and (int in _as_tuple(kind))
    )
    if not bad and keys is not None and isinstance(value, dict):
        bad = not all(isinstance(k, keys) for k in value)
    if not bad and items is not None and isinstance(value, (list, tuple, dict)):
        elements = value.values() if isinstance(value, dict) else value
        bad = not all(isinstance(v, items) for v in elements)
    if not bad and nonempty:
        bad = not value
    if bad:
        raise error(field_name, type(value).__name__, problem, fix)


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def check_seconds(field_name: str, value: object, *, positive: bool) -> float:
    """``value`` as float seconds if it is a finite number ``>= 0`` (``> 0`` if ``positive``),
    else an InvalidSpecError naming ``field_name``.

    >>> check_seconds("timeout", 5, positive=False)
    5.0
    >>> check_seconds("timeout", float("inf"), positive=False)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: timeout=inf is invalid: must be a finite number of seconds >= 0. Fix: pass e.g. 30
    """
    bound = "> 0" if positive else ">= 0"
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
    ):
        raise InvalidSpecError(
            field_name, value, f"must be a finite number of seconds {bound}", "pass e.g. 30"
        )
    return float(value)


_SESSION_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def check_session_name(field_name: str, value: object) -> str:
    """Returns ``value`` if it can be a session name (part of every app handle): non-empty
    letters, digits, ``_``, ``.`` or ``-``.

    >>> check_session_name("session", "my-team")
    'my-team'
    >>> check_session_name("session", "a b")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: session='a b' is invalid: a session name must be non-empty letters, digits, '_', '.' or '-' (it is part of every app handle). Fix: use e.g. 'anylaunch' or 'my-team'
    """
    if not isinstance(value, str) or not value or not set(value) <= _SESSION_NAME_CHARS:
        from anylaunch.specs.errors import InvalidSpecError

        raise InvalidSpecError(
            field_name,
            value,
            "a session name must be non-empty letters, digits, '_', '.' or '-' "
            "(it is part of every app handle)",
            "use e.g. 'anylaunch' or 'my-team'",
        )
    return value


def check_known_fields(owner: str, data: object, known: Iterable[str]) -> None:
    """Rejects a key of ``data`` (a config mapping) that is not one of ``known``, with a
    did-you-mean; its value is never shown (it may be a secret). Engines whose configs allow
    extra fields would otherwise ignore a misspelt one silently.

    >>> check_known_fields("Job", {"sheduler": "x"}, ["scheduler", "cfg"])
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Job.sheduler='<not shown>' is invalid: is not a field of Job. Did you mean 'scheduler'? Fix: use one of: cfg, scheduler
    """
    if not isinstance(data, dict):
        return
    from anylaunch.specs.errors import InvalidSpecError, did_you_mean

    names = {k for k in known if not k.startswith("_")}
    for key in data:
        if isinstance(key, str) and not key.startswith("_") and key not in names:
            raise InvalidSpecError(
                f"{owner}.{key}",
                "<not shown>",
                f"is not a field of {owner}.{did_you_mean(key, names)}",
                f"use one of: {', '.join(sorted(names))}",
            )
