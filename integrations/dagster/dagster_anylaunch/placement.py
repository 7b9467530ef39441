"""Placement in Dagster: the targets a resource or a step may place its app on, which of the
resource's and the step's settings win, and how a placed app's history shows as metadata. The
policy (which target, when to move or relaunch) is the core's
(:mod:`anylaunch.runner.placement`).

>>> from anylaunch.specs.placement_status import PlacementEntry, PlacementHistory
>>> meta = placement_metadata(PlacementHistory(1, (
...     PlacementEntry(0, "local_cwd", "local_cwd://d/a-1", "relaunched", "infrastructure: lost"),
...     PlacementEntry(1, "local_cwd", "local_cwd://d/a-2", "ended", ""),
... ), "/ckpt/d/a/checkpoint"))
>>> meta["anylaunch/attempt"].value, meta["anylaunch/placement"].data["entries"][0]["outcome"]
(1, 'relaunched')
"""

# No `from __future__ import annotations` here: Dagster reads AnylaunchTarget's field
# annotations at runtime to build its config schema.

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dagster as dg
from pydantic import Field

from anylaunch.runner.placement import Placement
from anylaunch.runner.placement_input import placement_from_data, target_as_data
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.placement_status import PlacementHistory

__all__ = [
    "ATTEMPT_KEY",
    "PLACEMENT_KEY",
    "AnylaunchTarget",
    "check_one_way",
    "placement_metadata",
    "step_placement",
    "targets_as_config",
    "targets_text",
]

#: Metadata key of a placed app's history (every target tried, JSON).
PLACEMENT_KEY = "anylaunch/placement"
#: Metadata key of the attempt a placed app ended with (0: the first).
ATTEMPT_KEY = "anylaunch/attempt"


class AnylaunchTarget(dg.Config):
    """One place a step's app may run: a scheduler, its run options, and how long the app
    may stay unstarted there before it moves on to the next target. In Python a plain
    scheduler name stands for ``AnylaunchTarget(scheduler=name)``.

    >>> AnylaunchTarget(scheduler="slurm", cfg={"partition": "gpu"}).cfg
    {'partition': 'gpu'}
    """

    scheduler: str = Field(description="Scheduler name, e.g. kubernetes, slurm, local_cwd.")
    cfg: dict[str, Any] = Field(
        default_factory=dict,
        description="Run options of this target (the resource's cfg is merged under them when "
        "the target is on the resource's scheduler).",
    )
    startup_timeout: float | None = Field(
        default=None,
        description="Seconds the app may stay unstarted here before it moves to the next "
        "target (None: no limit of its own).",
    )


def targets_as_config(owner: str, value: object) -> list[dict[str, Any]] | None:
    """``value`` (scheduler names, mappings, AnylaunchTargets or core Targets) checked and
    written as config data (None stays None); errors name ``{owner}.targets[i]...``.

    >>> targets_as_config("AnylaunchResource", ["local_cwd"])
    [{'scheduler': 'local_cwd', 'cfg': {}, 'startup_timeout': None}]
    """
    if value is None:
        return None
    placement = placement_from_data(owner, value)
    return [target_as_data(t) for t in placement.resolved_targets]


def step_placement(
    owner: str,
    targets: Sequence[Any] | None,
    max_infra_retries: int,
    checkpoint_root: str | None,
    base_scheduler: str,
    base_cfg: Mapping[str, Any],
) -> Placement:
    """The placement a step launches with. A target on ``base_scheduler`` (the resource's)
    gets ``base_cfg`` (the resource's run options) under its own: run options belong to
    their scheduler.

    >>> p = step_placement("Op", ["slurm", "local_cwd"], 1, None, "local_cwd", {"log_dir": "/l"})
    >>> [(t.scheduler, t.cfg) for t in p.resolved_targets], p.max_infra_retries
    ([('slurm', {}), ('local_cwd', {'log_dir': '/l'})], 1)
    """
    data = targets_as_config(owner, targets) or []
    for target in data:
        if target["scheduler"] == base_scheduler:
            target["cfg"] = {**base_cfg, **target["cfg"]}
    return placement_from_data(owner, data, max_infra_retries, checkpoint_root)


def _named(owner: str, name: str) -> str:
    return f"{owner}.{name}" if owner else name


def check_one_way(
    owner: str,
    targets: object,
    scheduler: object,
    cfg: object,
    placed_only: Mapping[str, bool] | None = None,
) -> None:
    """``targets``, or ``scheduler`` and ``cfg``: one way to say where the app runs; the
    fields of ``placed_only`` that are set (``{name: is_set}``) need ``targets``.

    >>> check_one_way("AnylaunchOpConfig", ["local_cwd"], "slurm", {})
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: AnylaunchOpConfig.scheduler='slurm' is invalid: cannot be given with targets (each target names its scheduler). Fix: set either scheduler (and cfg) or targets
    >>> check_one_way("Res", None, None, {}, {"max_infra_retries": True})
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Res.max_infra_retries='<set>' is invalid: only applies with targets. Fix: set targets too (e.g. [{scheduler: slurm}]), or leave it unset
    """
    if targets is None:
        for name, is_set in (placed_only or {}).items():
            if is_set:
                raise InvalidSpecError(
                    _named(owner, name),
                    "<set>",
                    "only applies with targets",
                    "set targets too (e.g. [{scheduler: slurm}]), or leave it unset",
                )
        return
    if scheduler is not None:
        raise InvalidSpecError(
            _named(owner, "scheduler"),
            scheduler,
            "cannot be given with targets (each target names its scheduler)",
            "set either scheduler (and cfg) or targets",
        )
    if cfg:
        raise InvalidSpecError(
            _named(owner, "cfg"),
            "<not shown>",
            "cannot be given with targets (each target has its own cfg)",
            "move the run options into the targets: {'scheduler': ..., 'cfg': {...}}",
        )


def placement_metadata(
    history: PlacementHistory, mask: Callable[[str], str] = str
) -> dict[str, dg.MetadataValue]:
    """A placed app's metadata: ``anylaunch/placement`` (every target tried, JSON) and
    ``anylaunch/attempt`` (the attempt it ended with, as its ``ANYLAUNCH_ATTEMPT``)."""
    data = history.to_dict()
    data["next_move"] = mask(data["next_move"])
    data["entries"] = [{**e, "reason": mask(e["reason"])} for e in data["entries"]]
    return {
        PLACEMENT_KEY: dg.MetadataValue.json(data),
        ATTEMPT_KEY: dg.MetadataValue.int(history.attempt),
    }


def targets_text(placement: Placement, mask: Callable[[str], str] = str) -> str:
    """The placement request as the step's log says it (run options masked).

    >>> from anylaunch.runner.placement import Target
    >>> print(targets_text(Placement([Target("slurm", {"partition": "gpu"}, 60), "local_cwd"])))
    placement on 2 targets (max_infra_retries 0):
      [0] slurm cfg: partition=gpu; startup timeout 60 s
      [1] local_cwd cfg: (defaults)
    """
    lines = [
        f"placement on {len(placement.resolved_targets)} targets"
        f" (max_infra_retries {placement.max_infra_retries}):"
    ]
    for i, target in enumerate(placement.resolved_targets):
        cfg = ", ".join(f"{k}={v}" for k, v in sorted((target.cfg or {}).items()))
        timeout = (
            f"; startup timeout {target.startup_timeout:g} s" if target.startup_timeout else ""
        )
        lines.append(f"  [{i}] {target.scheduler} cfg: {mask(cfg) or '(defaults)'}{timeout}")
    return "\n".join(lines)
