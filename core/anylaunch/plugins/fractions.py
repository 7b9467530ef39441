"""Fraction constants and helpers that name the fractional slices of a named resource."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from anylaunch.specs.errors import InvalidSpecError

if TYPE_CHECKING:
    from anylaunch.specs.api import Resource

__all__ = [
    "EIGHTH",
    "HALF",
    "QUARTER",
    "SIXTEENTH",
    "WHOLE",
    "Fractionals",
    "halve_mem_down_to",
    "powers_of_two_gpus",
]

WHOLE: float = 1.0  #: The entire host: all its CPUs, memory and GPUs.
HALF: float = 0.5  #: Half of every resource of the host.
QUARTER: float = 0.25  #: A quarter of every resource of the host.
EIGHTH: float = 0.125  #: An eighth of every resource of the host.
SIXTEENTH: float = 0.0625  #: A sixteenth of every resource of the host.

#: What ``register.named_resource(fractionals=...)`` takes: ``{fraction: suffix}`` or a
#: callable that computes it from the whole-host resource.
Fractionals = dict[float, str] | Callable[["Resource"], dict[float, str]]


def powers_of_two_gpus(resource: Resource) -> dict[float, str]:
    """Maps each power-of-two share of ``resource``'s GPUs to its GPU count.

    >>> from anylaunch.specs import Resource
    >>> powers_of_two_gpus(Resource(cpu=64, gpu=8, memMB=1024))
    {1.0: '8', 0.5: '4', 0.25: '2', 0.125: '1'}
    >>> powers_of_two_gpus(Resource(cpu=64, gpu=6, memMB=1024))
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Resource.gpu=6 is invalid: ...

    Raises:
        InvalidSpecError: (a ``ValueError``) the GPU count is not a power of two.
    """
    gpus = resource.gpu
    if gpus < 1 or gpus & (gpus - 1):
        raise InvalidSpecError(
            "Resource.gpu",
            gpus,
            "powers_of_two_gpus needs a GPU count that is a power of two (1, 2, 4, 8, ...)",
            "use a dict of fractionals, e.g. fractionals={WHOLE: '6', HALF: '3'}",
        )
    out: dict[float, str] = {}
    fraction = WHOLE
    while int(gpus * fraction) > 0:
        out[fraction] = str(int(gpus * fraction))
        fraction /= 2
    return out


def halve_mem_down_to(*, minGiB: int) -> Callable[[Resource], dict[float, str]]:
    """Returns a ``fractionals`` callable that halves the memory (in GiB) down to ``minGiB``.

    >>> from anylaunch.specs import Resource
    >>> halve_mem_down_to(minGiB=8)(Resource(cpu=32, gpu=0, memMB=64 * 1024))
    {1.0: '64', 0.5: '32', 0.25: '16', 0.125: '8'}

    Args:
        minGiB: the smallest slice, in GiB; it must be at least the odd part of the host's
            memory in GiB, so that every slice is a whole number of GiB.

    Raises:
        InvalidSpecError: (a ``ValueError``) the memory is not whole GiB, or ``minGiB`` is
            too small.
    """
    if isinstance(minGiB, bool) or not isinstance(minGiB, int) or minGiB < 1:
        raise InvalidSpecError(
            "halve_mem_down_to.minGiB", minGiB, "must be an int >= 1", "pass e.g. minGiB=16"
        )

    def fractionals(resource: Resource) -> dict[float, str]:
        mem = resource.memMB
        if mem < 1024 or mem % 1024:
            raise InvalidSpecError(
                "Resource.memMB",
                mem,
                "halve_mem_down_to needs memory that is a whole number of GiB",
                "make memMB a multiple of 1024",
            )
        gib = mem // 1024
        odd = gib
        while odd % 2 == 0:
            odd //= 2
        if minGiB < odd:
            raise InvalidSpecError(
                "halve_mem_down_to.minGiB",
                minGiB,
                f"halving {gib} GiB below {odd} GiB gives fractions of a GiB",
                f"use minGiB >= {odd}",
            )
        out: dict[float, str] = {}
        fraction = WHOLE
        while int(gib * fraction) >= minGiB:
            out[fraction] = str(int(gib * fraction))
            fraction /= 2
        return out

    return fractionals
