"""The errors of the tracker: none configured, an unknown run, a tracker that cannot load."""

from __future__ import annotations

from anylaunch.specs.errors import AnylaunchError

__all__ = ["NoTrackerError", "TrackerError", "TrackerLoadError", "UnknownRunError"]


class TrackerError(AnylaunchError):
    """Base class of the tracker's errors."""


class NoTrackerError(TrackerError):
    """A tracker is needed (``anylaunch tracker list``) but none is configured.

    >>> print(NoTrackerError())
    no tracker is configured. Fix: name one in the [anylaunch:tracker] section of .anylaunchconfig (e.g. `fs = fsspec`, with `[tracker:fs]` `config = /shared/tracking`), or set ANYLAUNCH_TRACKERS=fsspec and ANYLAUNCH_TRACKER_FSSPEC_CONFIG=/shared/tracking
    """

    def __init__(self) -> None:
        super().__init__(
            "no tracker is configured. Fix: name one in the [anylaunch:tracker] section of "
            ".anylaunchconfig (e.g. `fs = fsspec`, with `[tracker:fs]` `config = "
            "/shared/tracking`), or set ANYLAUNCH_TRACKERS=fsspec and "
            "ANYLAUNCH_TRACKER_FSSPEC_CONFIG=/shared/tracking"
        )


class UnknownRunError(TrackerError, LookupError):
    """The tracker holds nothing for a run id.

    >>> print(UnknownRunError("local_cwd://s/a-1"))
    the tracker has no run 'local_cwd://s/a-1': nothing was recorded for it. Fix: check the id with `anylaunch tracker list jobs` (a job records under its own ANYLAUNCH_JOB_ID, the handle `anylaunch run` printed)
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(
            f"the tracker has no run {run_id!r}: nothing was recorded for it. Fix: check the id "
            "with `anylaunch tracker list jobs` (a job records under its own ANYLAUNCH_JOB_ID, "
            "the handle `anylaunch run` printed)"
        )


class TrackerLoadError(TrackerError):
    """A configured tracker's factory could not be imported, failed, or made no tracker."""

    def __init__(self, factory: str, problem: str, fix: str) -> None:
        self.factory = factory
        super().__init__(f"tracker {factory!r} could not be built: {problem}. Fix: {fix}")
