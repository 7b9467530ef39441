"""Tracking what a job did: its metadata, artifacts and sources (lineage), per run.

TorchX's tracker API with ``torchx`` read as ``anylaunch``. A job gets its run with
:meth:`AppRun.run_from_env` and records into every tracker its launcher configured::

    from anylaunch.tracker import AppRun

    run = AppRun.run_from_env()          # the run id is the job's handle
    run.add_metadata(lr=0.1, epochs=3)   # JSON data: str, finite numbers, bools, lists, dicts
    run.add_artifact("model", "s3://bucket/model.pt", {"format": "torchscript"})
    run.add_source("s3://bucket/data/v2", artifact_name="dataset")

The launcher names the trackers in ``.anylaunchconfig`` (``[anylaunch:tracker]`` and
``[tracker:<name>] config``) or with ``ANYLAUNCH_TRACKERS`` and
``ANYLAUNCH_TRACKER_<NAME>_CONFIG`` (see :mod:`anylaunch.tracker.config`); the runner hands
them to every role of every app it launches. ``anylaunch tracker list jobs|metadata|artifacts``
reads them back. A backend is a :class:`~anylaunch.tracker.api.TrackerBase`: the built-in
``fsspec`` one (:mod:`anylaunch.tracker.backend.fsspec`), or a plugin registered with
``@register.tracker()`` (see :mod:`anylaunch.plugins`).

>>> run = AppRun.run_from_env()  # outside a job: tracks nothing
>>> run.job_id()
'<UNDEFINED>'
"""

from __future__ import annotations

from anylaunch.lazy import lazy_getattr

TYPE_CHECKING = False
if TYPE_CHECKING:
    from anylaunch.tracker.api import (
        AppRun,
        AppRunTrackableSource,
        TrackerArtifact,
        TrackerBase,
        TrackerSource,
    )

_LAZY = {
    "anylaunch.tracker.api": (
        "AppRun",
        "AppRunTrackableSource",
        "TrackerArtifact",
        "TrackerBase",
        "TrackerSource",
    ),
}

__all__ = [
    "AppRun",
    "AppRunTrackableSource",
    "TrackerArtifact",
    "TrackerBase",
    "TrackerSource",
    "app_run_from_env",
]

__getattr__ = lazy_getattr(__name__, _LAZY)


def app_run_from_env() -> AppRun:
    """``AppRun.run_from_env()``: the run of the job this process belongs to."""
    from anylaunch.tracker.api import AppRun

    return AppRun.run_from_env()


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
