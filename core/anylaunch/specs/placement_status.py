"""Where a placed app has run: the history its stable handle's status carries.

A placed app (``Runner.run(app, placement=...)``) runs as a series of attempts, each on one
target; the history lists every target tried, in order, with what happened there: skipped
after a capacity check, or submitted and then moved away from, relaunched after the platform
lost it, or still current.

>>> history = PlacementHistory(
...     attempt=1,
...     entries=(
...         PlacementEntry(0, "kubernetes", None, "skipped", "no: needs 3 CPU, node1 has 2"),
...         PlacementEntry(0, "slurm", "slurm://s/1", "relaunched", "NODE_FAIL"),
...         PlacementEntry(1, "slurm", "slurm://s/2", "current", ""),
...     ),
...     checkpoint_url="file:///ckpt/s/app-1/checkpoint",
... )
>>> history.current.handle
'slurm://s/2'
>>> print(history.describe())
attempt 0 on kubernetes: skipped (no: needs 3 CPU, node1 has 2)
attempt 0 on slurm (slurm://s/1): relaunched (NODE_FAIL)
attempt 1 on slurm (slurm://s/2): current
>>> PlacementHistory.from_dict(history.to_dict()) == history
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from anylaunch.specs.errors import InvalidSpecError

__all__ = ["OUTCOMES", "PlacementEntry", "PlacementHistory"]

#: What happened on a target: not submitted there (capacity "no", or the submission failed),
#: moved away from (a startup failure), relaunched (the platform lost it), the one now
#: followed, or where the placed app ended.
OUTCOMES = ("skipped", "moved", "relaunched", "current", "ended")


@dataclass(frozen=True)
class PlacementEntry:
    """One target tried: ``handle`` is None for a target the app was never submitted to."""

    attempt: int
    scheduler: str
    handle: str | None
    outcome: str
    reason: str

    def describe(self) -> str:
        where = f"{self.scheduler} ({self.handle})" if self.handle else self.scheduler
        why = f" ({self.reason})" if self.reason else ""
        return f"attempt {self.attempt} on {where}: {self.outcome}{why}"


@dataclass(frozen=True)
class PlacementHistory:
    """A placed app's attempts so far (the last entry with a handle is the current one).

    ``next_move`` is set when the current attempt must be left (why), but the process that
    read the status does not drive the app: a driver (a process that launched or attached
    it, e.g. an engine's worker) must make the move. A watcher that cannot move it (Airflow's
    triggerer) hands the app back to such a driver.
    """

    attempt: int
    entries: tuple[PlacementEntry, ...]
    checkpoint_url: str
    next_move: str = ""

    @property
    def current(self) -> PlacementEntry:
        """The entry of the attempt the handle follows now."""
        submitted = [e for e in self.entries if e.handle is not None]
        return submitted[-1] if submitted else self.entries[-1]

    def describe(self) -> str:
        """One line per target tried, oldest first."""
        return "\n".join(entry.describe() for entry in self.entries)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (for XCom, artifacts, metadata)."""
        return {
            "attempt": self.attempt,
            "checkpoint_url": self.checkpoint_url,
            "next_move": self.next_move,
            "entries": [
                {
                    "attempt": e.attempt,
                    "scheduler": e.scheduler,
                    "handle": e.handle,
                    "outcome": e.outcome,
                    "reason": e.reason,
                }
                for e in self.entries
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlacementHistory:
        """Inverse of :meth:`to_dict`.

        Raises:
            InvalidSpecError: ``data`` is not what :meth:`to_dict` writes.
        """
        try:
            entries = tuple(
                PlacementEntry(
                    int(e["attempt"]),
                    str(e["scheduler"]),
                    None if e["handle"] is None else str(e["handle"]),
                    str(e["outcome"]),
                    str(e["reason"]),
                )
                for e in data["entries"]
            )
            return cls(
                int(data["attempt"]),
                entries,
                str(data["checkpoint_url"]),
                str(data.get("next_move", "")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidSpecError(
                "placement",
                type(data).__name__,
                f"is not a placement history dict ({type(e).__name__}: {e})",
                "pass what PlacementHistory.to_dict() returned",
            ) from None
