"""Placement as the engines take it: targets written as data (a scheduler name, a mapping
``{scheduler, cfg, startup_timeout}``, a pydantic model with those fields, or a
:class:`~anylaunch.runner.placement.Target`), checked once, with errors that name the engine's
own field (``AnylaunchJob.targets[1].scheduler``) instead of ``Target.scheduler``.

>>> [t.scheduler for t in targets_from_data("Job.targets", ["local_cwd", {"scheduler": "slurm"}])]
['local_cwd', 'slurm']
>>> targets_from_data("Job.targets", [{"scheduler": "slurm", "startup_timout": 5}])
Traceback (most recent call last):
...
anylaunch.specs.errors.InvalidSpecError: Job.targets[0].startup_timout='<not shown>' is invalid: is not a field of Job.targets[0]. Did you mean 'startup_timeout'? Fix: use one of: cfg, scheduler, startup_timeout
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from anylaunch.runner.placement import Placement, Target
from anylaunch.specs.checks import check_known_fields
from anylaunch.specs.errors import InvalidSpecError, did_you_mean

__all__ = [
    "CHECKPOINT_ROOT_HELP",
    "MAX_INFRA_RETRIES_HELP",
    "TARGETS_HELP",
    "TARGET_FIELDS",
    "placement_from_data",
    "target_as_data",
    "targets_from_data",
]

#: The fields of one target written as data.
TARGET_FIELDS = ("scheduler", "cfg", "startup_timeout")

#: How every engine describes its placement settings (field help in forms and docs).
TARGETS_HELP = (
    "Placement instead of scheduler: ordered targets, each a scheduler name or {scheduler, "
    "cfg, startup_timeout}. The app runs on the first whose capacity is not 'no' and moves "
    "to the next when it cannot start there."
)
MAX_INFRA_RETRIES_HELP = (
    "With targets: relaunches after the platform lost the app (node lost, preempted); an "
    "application failure is never relaunched."
)
CHECKPOINT_ROOT_HELP = (
    "With targets: fsspec URL of the placement record and of ANYLAUNCH_CHECKPOINT_URL "
    "(default: $ANYLAUNCH_CHECKPOINT_ROOT, then ~/.anylaunch/placements)."
)


def _renamed(field: str, error: InvalidSpecError) -> InvalidSpecError:
    """``error`` (raised by Target or Placement) naming ``field`` instead of its own class."""
    _, _, attr = error.field.partition(".")
    name = ".".join(part for part in (field, attr) if part)
    return InvalidSpecError(name, error.value, error.problem, error.fix)


def target_from_data(field: str, value: object) -> Target:
    """One target from its data form (see the module doc), the scheduler a known one.

    >>> target_from_data("t", {"scheduler": "local_cwd", "cfg": {"log_dir": "/tmp"}}).cfg
    {'log_dir': '/tmp'}
    >>> target_from_data("Job.targets[1]", "local_cwdd")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Job.targets[1].scheduler='local_cwdd' is invalid: is not a known scheduler. Did you mean 'local_cwd'? Fix: use one of ...
    >>> target_from_data("Job.targets[0]", 5)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Job.targets[0]='int' is invalid: must be a scheduler name or {scheduler, cfg, startup_timeout}. Fix: pass e.g. 'slurm' or {'scheduler': 'slurm', 'cfg': {'partition': 'gpu'}}
    """
    if isinstance(value, Target):
        target = value
    else:
        data: object = value
        dump = getattr(value, "model_dump", None)
        if callable(dump) and not isinstance(value, (str, Mapping)):
            data = dump()  # a pydantic model (an engine's own target class)
        if isinstance(data, str):
            data = {"scheduler": data}
        if not isinstance(data, Mapping):
            raise InvalidSpecError(
                field,
                type(value).__name__,
                "must be a scheduler name or {scheduler, cfg, startup_timeout}",
                "pass e.g. 'slurm' or {'scheduler': 'slurm', 'cfg': {'partition': 'gpu'}}",
            )
        check_known_fields(field, dict(data), TARGET_FIELDS)
        if "scheduler" not in data:
            raise InvalidSpecError(
                f"{field}.scheduler", None, "is required", "name a scheduler, e.g. 'slurm'"
            )
        cfg = data.get("cfg")
        try:
            target = Target(
                data["scheduler"],
                dict(cfg) if isinstance(cfg, Mapping) else cfg,
                data.get("startup_timeout"),
            )
        except InvalidSpecError as e:
            raise _renamed(field, e) from None
    from anylaunch.schedulers import get_scheduler_factories

    known = sorted(get_scheduler_factories())
    if target.scheduler not in known:
        raise InvalidSpecError(
            f"{field}.scheduler",
            target.scheduler,
            f"is not a known scheduler.{did_you_mean(target.scheduler, known)}",
            f"use one of {', '.join(known)}, or register a scheduler plugin (docs: plugins)",
        )
    return target


def targets_from_data(field: str, value: object) -> list[Target]:
    """Every target of a list written as data, in order (at least one).

    >>> targets_from_data("Job.targets", "slurm")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Job.targets='str' is invalid: must be a list of targets. Fix: pass e.g. ['kubernetes', {'scheduler': 'slurm', 'cfg': {'partition': 'gpu'}}]
    """
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise InvalidSpecError(
            field,
            type(value).__name__,
            "must be a list of targets",
            "pass e.g. ['kubernetes', {'scheduler': 'slurm', 'cfg': {'partition': 'gpu'}}]",
        )
    if not value:
        raise InvalidSpecError(
            field, [], "must list at least one target", "pass e.g. ['kubernetes', 'slurm']"
        )
    return [target_from_data(f"{field}[{i}]", item) for i, item in enumerate(value)]


def target_as_data(target: Target) -> dict[str, Any]:
    """``target`` as plain data (what :func:`target_from_data` reads back).

    >>> target_as_data(Target("slurm", startup_timeout=60))
    {'scheduler': 'slurm', 'cfg': {}, 'startup_timeout': 60}
    """
    return {
        "scheduler": target.scheduler,
        "cfg": dict(target.cfg or {}),
        "startup_timeout": target.startup_timeout,
    }


def placement_from_data(
    owner: str,
    targets: object,
    max_infra_retries: object = 0,
    checkpoint_root: object = None,
) -> Placement:
    """The placement an engine's fields ask for; errors name ``{owner}.targets[i]...``,
    ``{owner}.max_infra_retries`` and ``{owner}.checkpoint_root`` (an empty ``owner``:
    ``targets[i]...``, as a function's arguments).

    >>> placement_from_data("Job", ["local_cwd"], max_infra_retries=-1)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Job.max_infra_retries=-1 is invalid: must be an int in 0..100. Fix: pass e.g. 2 (relaunches after node loss or preemption)
    """
    resolved = targets_from_data(f"{owner}.targets" if owner else "targets", targets)
    try:
        return Placement(resolved, max_infra_retries, checkpoint_root)  # type: ignore[arg-type]
    except InvalidSpecError as e:
        raise _renamed(owner, e) from None
