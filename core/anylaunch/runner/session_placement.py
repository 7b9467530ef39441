"""What a session does for a placed app (``placement://`` handle): says each move once, and
tells its log readers which attempt to follow.

>>> from anylaunch.specs import AppState, AppStatus
>>> from anylaunch.specs.placement_status import PlacementEntry, PlacementHistory
>>> def status(*entries):
...     return AppStatus(AppState.RUNNING, placement=PlacementHistory(
...         entries[-1].attempt, entries, "file:///ckpt"))
>>> follow = AttemptFollower()
>>> first = PlacementEntry(0, "kubernetes", "kubernetes://s/a", "current", "")
>>> follow.notes(status(first)), follow.moved(status(first))
([(20, 'attempt 0 on kubernetes (kubernetes://s/a): current')], False)
>>> moved = PlacementEntry(0, "kubernetes", "kubernetes://s/a", "moved", "ImagePullBackOff")
>>> second = PlacementEntry(1, "slurm", "slurm://s/7", "current", "")
>>> follow.notes(status(moved, second))
[(30, 'attempt 0 on kubernetes (kubernetes://s/a): moved (ImagePullBackOff)'), (20, 'attempt 1 on slurm (slurm://s/7): current')]
>>> follow.moved(status(moved, second)), follow.reader_handle("placement://s/x", status(second))
(True, 'slurm://s/7')
"""

from __future__ import annotations

import logging

from anylaunch.specs.api import AppStatus
from anylaunch.specs.placement_status import PlacementEntry

__all__ = ["AttemptFollower"]


class AttemptFollower:
    """Follows a placed app's history from one status to the next (no I/O)."""

    def __init__(self) -> None:
        self._told: list[PlacementEntry] = []
        self._attempt: int | None = None

    def notes(self, status: AppStatus | None) -> list[tuple[int, str]]:
        """The history lines not said yet (an entry is said again when its outcome changes):
        a move or relaunch is a WARNING, the rest INFO."""
        if status is None or status.placement is None:
            return []
        entries = list(status.placement.entries)
        new = [e for i, e in enumerate(entries) if i >= len(self._told) or self._told[i] != e]
        self._told = entries
        return [
            (
                logging.WARNING if e.outcome in ("moved", "relaunched") else logging.INFO,
                e.describe(),
            )
            for e in new
        ]

    def moved(self, status: AppStatus | None) -> bool:
        """True once per new attempt after the first: the readers of the old one are done."""
        if status is None or status.placement is None:
            return False
        attempt, self._attempt = self._attempt, status.placement.attempt
        return attempt is not None and attempt != status.placement.attempt

    @staticmethod
    def reader_handle(handle: str, status: AppStatus | None) -> str:
        """The handle the log readers read: a placed app's current attempt."""
        if status is None or status.placement is None:
            return handle
        return status.placement.current.handle or handle
