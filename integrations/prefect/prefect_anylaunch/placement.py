"""Placement in Prefect: the targets an ``AnylaunchJob`` may run on, and how a placed app's
history shows in a task result and in markdown artifacts. The policy (which target, when to
move or relaunch) is the core's (:mod:`anylaunch.runner.placement`).

>>> from anylaunch.specs.api import AppState, AppStatus
>>> from anylaunch.specs.placement_status import PlacementEntry, PlacementHistory
>>> history = PlacementHistory(1, (
...     PlacementEntry(0, "slurm", "slurm://s/1", "relaunched", "infrastructure: NODE_FAIL"),
...     PlacementEntry(1, "slurm", "slurm://s/2", "ended", ""),
... ), "file:///ckpt/s/a-1/checkpoint")
>>> result = placement_result({"state": "SUCCEEDED"}, AppStatus(AppState.SUCCEEDED,
...                           placement=history))
>>> result["attempt"], [e["outcome"] for e in result["placement"]["entries"]]
(1, ['relaunched', 'ended'])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from anylaunch.runner.placement import Placement
from anylaunch.runner.placement_input import placement_from_data
from anylaunch.specs.api import AppHandle, AppStatus
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.placement_status import PlacementHistory
from prefect_anylaunch import _prefect

__all__ = [
    "AnylaunchTarget",
    "check_placement_fields",
    "placement_artifact",
    "placement_markdown",
    "placement_result",
    "targets_markdown",
]


class AnylaunchTarget(BaseModel):
    """One place an ``AnylaunchJob`` may run its app: a scheduler, its run options, and how
    long the app may stay unstarted there before it moves on to the next target.

    >>> AnylaunchTarget(scheduler="slurm", cfg={"partition": "gpu"}).scheduler
    'slurm'
    """

    model_config = ConfigDict(extra="forbid")

    scheduler: str = Field(description="Scheduler name, e.g. kubernetes, slurm, local_cwd.")
    cfg: dict[str, Any] = Field(
        default_factory=dict,
        description="Run options of this target (the settings block's are merged under them "
        "when it names the same scheduler).",
    )
    startup_timeout: float | None = Field(
        default=None,
        description="Seconds the app may stay unstarted here before it moves to the next "
        "target (None: no limit of its own).",
    )


def placement_result(result: dict[str, Any], status: AppStatus) -> dict[str, Any]:
    """``result`` (a status dict) with a placed app's ``attempt`` (the current attempt's
    number, as its ``ANYLAUNCH_ATTEMPT``) and ``placement`` (every target tried, see
    :meth:`~anylaunch.specs.placement_status.PlacementHistory.to_dict`). Unchanged for an app
    that was not placed."""
    if status.placement is None:
        return result
    return {**result, "attempt": status.placement.attempt, "placement": status.placement.to_dict()}


def placement_markdown(
    handle: str, history: PlacementHistory, redact: Callable[[str], str] = str
) -> str:
    """A markdown artifact's text: where a placed app ran, one line per target tried.

    >>> from anylaunch.specs.placement_status import PlacementEntry
    >>> print(placement_markdown("placement://s/a-1", PlacementHistory(0, (
    ...     PlacementEntry(0, "full", None, "skipped", "no: every slot is taken"),
    ...     PlacementEntry(0, "local_cwd", "local_cwd://s/a-2", "current", "")), "/ckpt")))
    ### anylaunch placement of `placement://s/a-1`: attempt 0 (1 attempt)
    <BLANKLINE>
    checkpoint URL (`ANYLAUNCH_CHECKPOINT_URL`): `/ckpt`
    <BLANKLINE>
    ```
    attempt 0 on full: skipped (no: every slot is taken)
    attempt 0 on local_cwd (local_cwd://s/a-2): current
    ```
    <BLANKLINE>
    """
    count = history.attempt + 1
    lines = redact(history.describe()).replace("```", "'''")
    waiting = f"\n\nwaiting for a driver: {redact(history.next_move)}" if history.next_move else ""
    return (
        f"### anylaunch placement of `{handle}`: attempt {history.attempt}"
        f" ({count} attempt{'s' if count != 1 else ''})\n\n"
        f"checkpoint URL (`ANYLAUNCH_CHECKPOINT_URL`): `{redact(history.checkpoint_url)}`"
        f"{waiting}\n\n```\n{lines}\n```\n"
    )


def targets_markdown(app_name: str, placement: Placement, redact: Callable[[str], str]) -> str:
    """The request artifact of a placed app: its targets in order, run options masked.

    >>> from anylaunch.runner.placement import Target
    >>> print(targets_markdown("train", Placement([Target("slurm", {"partition": "gpu"}, 60),
    ...     "local_cwd"], max_infra_retries=2), str))
    ### anylaunch placement request: `train` on 2 targets
    <BLANKLINE>
    max_infra_retries 2; each attempt is dry-run and submitted when it is tried
    <BLANKLINE>
    | # | scheduler | cfg | startup timeout |
    |---|---|---|---|
    | 0 | `slurm` | `partition=gpu` | 60 s |
    | 1 | `local_cwd` | `(defaults)` | none |
    <BLANKLINE>
    """
    rows = []
    for i, target in enumerate(placement.resolved_targets):
        cfg = redact(", ".join(f"{k}={v}" for k, v in sorted((target.cfg or {}).items())))
        cfg = cfg.replace("|", "\\|").replace("`", "'") or "(defaults)"
        timeout = "none" if target.startup_timeout is None else f"{target.startup_timeout:g} s"
        rows.append(f"| {i} | `{target.scheduler}` | `{cfg}` | {timeout} |")
    count = len(rows)
    return (
        f"### anylaunch placement request: `{app_name}` on {count} target"
        f"{'s' if count != 1 else ''}\n\n"
        f"max_infra_retries {placement.max_infra_retries}; each attempt is dry-run and"
        " submitted when it is tried\n\n"
        "| # | scheduler | cfg | startup timeout |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )


def placement_artifact(
    handle: AppHandle, app_name: str, status: AppStatus, redact: Callable[[str], str]
) -> None:
    """Creates the markdown artifact of a placed app's history (a new version of the same
    key at launch and at the end)."""
    assert status.placement is not None
    _prefect.create_artifact(
        "markdown",
        markdown=placement_markdown(handle, status.placement, redact),
        key=_prefect.artifact_key(app_name, "placement"),
        description=f"where {handle} ran: attempt {status.placement.attempt}",
    )


def check_placement_fields(
    targets: object, scheduler: object, cfg: object, max_infra_retries: object, root: object
) -> None:
    """An ``AnylaunchJob`` says where its app runs one way: ``targets`` (with their
    ``max_infra_retries`` and ``checkpoint_root``), or ``scheduler`` and ``cfg``. Called
    before pydantic sees the data (its errors quote the input: a target's cfg may hold a
    secret).

    >>> check_placement_fields(["local_cwd"], "slurm", {}, 0, None)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: AnylaunchJob.scheduler='slurm' is invalid: cannot be given with targets (each target names its scheduler). Fix: set either scheduler (and cfg) or targets
    """
    if targets is None:
        for name, value, unset in (
            ("max_infra_retries", max_infra_retries, 0),
            ("checkpoint_root", root, None),
        ):
            if value != unset:
                raise InvalidSpecError(
                    f"AnylaunchJob.{name}",
                    value,
                    "only applies to a placed app",
                    "set targets too (e.g. targets=['slurm']), or leave it unset",
                )
        return
    placement_from_data("AnylaunchJob", targets, max_infra_retries, root)
    if scheduler is not None:
        raise InvalidSpecError(
            "AnylaunchJob.scheduler",
            scheduler,
            "cannot be given with targets (each target names its scheduler)",
            "set either scheduler (and cfg) or targets",
        )
    if cfg:
        raise InvalidSpecError(
            "AnylaunchJob.cfg",
            "<not shown>",
            "cannot be given with targets (each target has its own cfg)",
            "move the run options into the targets: {'scheduler': ..., 'cfg': {...}}",
        )
