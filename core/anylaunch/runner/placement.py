"""Placement: run an app on the first of several targets that can run it now, move on when it
cannot start there, and relaunch it when the platform takes its machines away.

>>> placement = Placement(
...     [Target("kubernetes", startup_timeout=120), Target("slurm", {"partition": "gpu"})],
...     max_infra_retries=2,
... )
>>> [t.scheduler for t in placement.targets], placement.max_infra_retries
(['kubernetes', 'slurm'], 2)
>>> Placement([])
Traceback (most recent call last):
...
anylaunch.specs.errors.InvalidSpecError: Placement.targets=[] is invalid: must list at least one Target. Fix: pass e.g. [Target('kubernetes'), Target('slurm')]

The policy (:func:`next_step`) is pure: fed an attempt and what its backend says, it answers
what to do; :mod:`anylaunch.runner.placed` does the I/O. Only two kinds of failure move an
app: a **startup** failure (an image that cannot be pulled, a request no node takes, a quota,
a target's startup timeout, a submission the backend refused) moves it to the next target, at
most once per target; an **infrastructure** failure (node lost, preempted, evicted, spot
reclaimed) relaunches it, on the same target if it can run it now or else the next one, up to
``max_infra_retries`` times. An application failure (a non-zero exit) is never relaunched.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from anylaunch.runner.failures import FailureCategory, failure_category
from anylaunch.runner.watch import has_started
from anylaunch.specs.api import AppState, AppStatus
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.runopts import CfgVal

__all__ = [
    "ENV_ANYLAUNCH_ATTEMPT",
    "ENV_ANYLAUNCH_CHECKPOINT_URL",
    "MAX_INFRA_RETRIES",
    "Move",
    "Placement",
    "Relaunch",
    "Settle",
    "Stay",
    "Step",
    "Target",
    "next_step",
]

#: Every attempt's number: 0 for the first, 1 after the first move or relaunch, ...
ENV_ANYLAUNCH_ATTEMPT = "ANYLAUNCH_ATTEMPT"
#: An fsspec URL, the same for every attempt and target of one placed app: resume from it.
ENV_ANYLAUNCH_CHECKPOINT_URL = "ANYLAUNCH_CHECKPOINT_URL"
#: The most infrastructure relaunches one placement may allow.
MAX_INFRA_RETRIES = 100

_SCHEDULER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class Target:
    """One place an app may run: a scheduler, its run options, and how long the app may stay
    unstarted there before it moves on (None: no limit of its own).

    >>> Target("slurm", startup_timeout=-1)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Target.startup_timeout=-1 is invalid: must be a finite number of seconds > 0. Fix: pass e.g. 300, or None for no limit
    """

    scheduler: str
    cfg: Mapping[str, CfgVal] | None = None
    startup_timeout: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.scheduler, str) or not _SCHEDULER_NAME.fullmatch(self.scheduler):
            raise InvalidSpecError(
                "Target.scheduler",
                self.scheduler,
                "must be a scheduler name",
                "pass e.g. 'kubernetes' (anylaunch schedulers lists them)",
            )
        if self.cfg is not None and (
            not isinstance(self.cfg, Mapping) or not all(isinstance(k, str) for k in self.cfg)
        ):
            raise InvalidSpecError(
                "Target.cfg",
                type(self.cfg).__name__,
                "must be a mapping of run option name to value",
                "pass e.g. {'queue': 'default'}, or None",
            )
        timeout = self.startup_timeout
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise InvalidSpecError(
                "Target.startup_timeout",
                timeout,
                "must be a finite number of seconds > 0",
                "pass e.g. 300, or None for no limit",
            )


@dataclass(frozen=True)
class Placement:
    """The ordered targets of one app and its budget of infrastructure relaunches.

    Args:
        targets: tried in order; a scheduler name alone stands for ``Target(name)``
        max_infra_retries: relaunches after the platform lost the app (0..100); a budget
            apart from an engine's own task retries
        checkpoint_root: the fsspec URL under which the placement record and
            ``ANYLAUNCH_CHECKPOINT_URL`` live (default: ``$ANYLAUNCH_CHECKPOINT_ROOT``, then
            ``[placement] checkpoint_root`` of ``.anylaunchconfig``, then the local
            ``~/.anylaunch/placements``, which only serves one host)
    """

    targets: Sequence[Target | str]
    max_infra_retries: int = 0
    checkpoint_root: str | None = None
    _targets: tuple[Target, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.targets, (str, bytes)) or not isinstance(self.targets, Sequence):
            raise InvalidSpecError(
                "Placement.targets",
                type(self.targets).__name__,
                "must be a list of Target",
                "pass e.g. [Target('kubernetes'), Target('slurm')]",
            )
        if not self.targets:
            raise InvalidSpecError(
                "Placement.targets",
                [],
                "must list at least one Target",
                "pass e.g. [Target('kubernetes'), Target('slurm')]",
            )
        targets = []
        for i, target in enumerate(self.targets):
            if isinstance(target, str):
                target = Target(target)
            if not isinstance(target, Target):
                raise InvalidSpecError(
                    f"Placement.targets[{i}]",
                    type(target).__name__,
                    "must be a Target or a scheduler name",
                    "pass e.g. Target('slurm', cfg={'partition': 'gpu'})",
                )
            targets.append(target)
        object.__setattr__(self, "_targets", tuple(targets))
        retries = self.max_infra_retries
        if (
            isinstance(retries, bool)
            or not isinstance(retries, int)
            or not 0 <= retries <= MAX_INFRA_RETRIES
        ):
            raise InvalidSpecError(
                "Placement.max_infra_retries",
                retries,
                f"must be an int in 0..{MAX_INFRA_RETRIES}",
                "pass e.g. 2 (relaunches after node loss or preemption)",
            )
        root = self.checkpoint_root
        if root is not None and (not isinstance(root, str) or not root.strip() or "\0" in root):
            raise InvalidSpecError(
                "Placement.checkpoint_root",
                root,
                "must be a non-empty fsspec URL",
                "pass e.g. 's3://bucket/anylaunch' or '/shared/anylaunch', or None",
            )

    @property
    def resolved_targets(self) -> tuple[Target, ...]:
        """The targets, each a :class:`Target` (names expanded)."""
        return self._targets


# --- the policy --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stay:
    """Keep following the current attempt."""


@dataclass(frozen=True)
class Move:
    """Leave the current target for a later one (a startup failure); cancel it first if
    ``cancel`` (it may still be queued there)."""

    reason: str
    cancel: bool


@dataclass(frozen=True)
class Relaunch:
    """Start the next attempt (the platform lost this one), the same target first."""

    reason: str


@dataclass(frozen=True)
class Settle:
    """The placed app has ended with its current attempt's status; ``reason`` says why no
    other attempt follows (empty when it simply ended)."""

    reason: str


Step = Stay | Move | Relaunch | Settle


def next_step(
    placement: Placement,
    target_index: int,
    relaunches: int,
    status: AppStatus | None,
    unstarted_for: float,
) -> Step:
    """What to do about the current attempt, on target ``target_index`` after ``relaunches``
    infrastructure relaunches, whose backend says ``status`` (None: it forgot the app) and
    which has not started for ``unstarted_for`` seconds since its submission (0 once started).

    >>> p = Placement([Target("kubernetes", startup_timeout=60), "slurm"], max_infra_retries=1)
    >>> next_step(p, 0, 0, AppStatus(AppState.PENDING), unstarted_for=61)
    Move(reason='did not start within 60 s on kubernetes', cancel=True)
    >>> next_step(p, 1, 0, AppStatus(AppState.FAILED, msg="NODE_FAIL"), 0)
    Relaunch(reason='infrastructure: NODE_FAIL')
    >>> next_step(p, 1, 1, AppStatus(AppState.FAILED, msg="NODE_FAIL"), 0)
    Settle(reason='infrastructure: NODE_FAIL; no relaunch left (max_infra_retries=1)')
    >>> next_step(p, 1, 0, AppStatus(AppState.FAILED, msg="exited 3"), 0)
    Settle(reason='')
    """
    targets = placement.resolved_targets
    target = targets[target_index]
    last = target_index == len(targets) - 1
    if status is None:
        reason = f"{target.scheduler} no longer knows the app (lost)"
        category: FailureCategory | None = FailureCategory.INFRASTRUCTURE
    elif not has_started(status.state):
        if target.startup_timeout is not None and unstarted_for > target.startup_timeout:
            reason = f"did not start within {target.startup_timeout:g} s on {target.scheduler}"
            if last:
                return Settle(f"{reason}; no target left")
            return Move(reason, cancel=True)
        return Stay()
    elif status.state != AppState.FAILED:
        return Stay() if not status.is_terminal() else Settle("")
    else:
        category = failure_category(status)
        reason = f"{category.value if category else 'failed'}: {status.msg or status.state.name}"
    if category == FailureCategory.STARTUP:
        return Settle(f"{reason}; no target left") if last else Move(reason, cancel=False)
    if category == FailureCategory.INFRASTRUCTURE:
        if relaunches < placement.max_infra_retries:
            return Relaunch(reason)
        return Settle(
            f"{reason}; no relaunch left (max_infra_retries={placement.max_infra_retries})"
        )
    return Settle("")
