"""Small input checks shared across the package (cheap to import: DAG files call them)."""

from __future__ import annotations

import math

from anylaunch.specs.errors import InvalidSpecError

__all__ = ["check_seconds"]


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
