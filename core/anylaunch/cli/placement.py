"""``anylaunch run``'s placement flags: repeated ``-s`` (ordered targets), a ``-cfg`` per
target, ``--startup-timeout``, ``--max-infra-retries`` and ``--checkpoint-root``."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from anylaunch.specs.errors import InvalidSpecError

__all__ = ["PlacementFlags", "add_placement_arguments", "placement_flags"]


def add_placement_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the placement flags (``-s`` and ``-cfg`` themselves belong to ``run``)."""
    group = parser.add_argument_group(
        "placement",
        "repeat -s to list targets in order: the app runs on the first that can run it now, "
        "moves on when it cannot start there, and is relaunched when the platform loses it "
        "(docs: placement)",
    )
    group.add_argument(
        "--startup-timeout",
        "--startup_timeout",
        dest="startup_timeout",
        metavar="SECONDS",
        default=None,
        help="with several -s: move to the next target when the app has not started within "
        "SECONDS on one",
    )
    group.add_argument(
        "--max-infra-retries",
        "--max_infra_retries",
        dest="max_infra_retries",
        metavar="N",
        default=None,
        help="relaunch the app up to N times when the platform loses it (node lost, "
        "preempted, evicted); each attempt sees $ANYLAUNCH_ATTEMPT",
    )
    group.add_argument(
        "--checkpoint-root",
        "--checkpoint_root",
        dest="checkpoint_root",
        metavar="URL",
        default=None,
        help="fsspec URL for the placement record and $ANYLAUNCH_CHECKPOINT_URL (default: "
        "$ANYLAUNCH_CHECKPOINT_ROOT, else ~/.anylaunch/placements)",
    )


@dataclass(frozen=True)
class PlacementFlags:
    """The placement ``anylaunch run``'s flags ask for, checked."""

    startup_timeout: float | None
    max_infra_retries: int
    checkpoint_root: str | None


def placement_flags(
    args: argparse.Namespace, schedulers: list[str], cfg_strs: list[str]
) -> PlacementFlags | None:
    """The placement the flags ask for (None: a plain run on one scheduler), fully checked.

    Raises:
        InvalidSpecError: a bad value or combination, naming the flag and the fix.
    """
    if len(cfg_strs) not in (1, len(schedulers)):
        raise InvalidSpecError(
            "-cfg",
            len(cfg_strs),
            f"given {len(cfg_strs)} times for {len(schedulers)} schedulers (-s)",
            "give -cfg once per -s, in the same order (or once for a single -s)",
        )
    if len(cfg_strs) == 1 and len(schedulers) > 1 and cfg_strs[0].strip():
        raise InvalidSpecError(
            "-cfg",
            "<not shown>",  # run options may hold credentials
            "is ambiguous with several -s: which target's run options are they?",
            "give -cfg once per -s, in the same order ('' for none)",
        )
    wanted = (
        len(schedulers) > 1
        or args.max_infra_retries is not None
        or args.checkpoint_root is not None
        or args.startup_timeout is not None
    )
    if not wanted:
        return None
    timeout: float | None = None
    if args.startup_timeout is not None:
        try:
            timeout = float(args.startup_timeout)
        except ValueError:
            timeout = float("nan")
        if not timeout > 0 or timeout == float("inf"):
            raise InvalidSpecError(
                "--startup-timeout", args.startup_timeout, "must be seconds > 0", "e.g. 300"
            )
    retries = 0
    if args.max_infra_retries is not None:
        text = str(args.max_infra_retries)
        if not text.isdigit():
            raise InvalidSpecError(
                "--max-infra-retries", text, "must be a whole number >= 0", "e.g. 2"
            )
        retries = int(text)
    return PlacementFlags(timeout, retries, args.checkpoint_root)
