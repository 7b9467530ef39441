"""What an ended app's job tracked and where its record is archived, as Dagster metadata:
``anylaunch/tracker/<key>`` per metadata value, ``anylaunch/artifact/<name>`` per artifact
(its path), ``anylaunch/archive_url`` (the app's record in ``ANYLAUNCH_ARCHIVE_URL``). Read
with :func:`anylaunch.tracker.results.tracked`; a tracker that cannot be read is a warning,
never a failed step.

>>> meta = tracker_entries({"metadata": {"lr": 0.1, "tag": "a"},
...                         "artifacts": {"model": {"path": "/tmp/x", "metadata": {}}}})
>>> {k: type(v).__name__ for k, v in meta.items()}
{'anylaunch/tracker/lr': 'FloatMetadataValue', 'anylaunch/tracker/tag': 'TextMetadataValue', 'anylaunch/artifact/model': 'PathMetadataValue'}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import dagster as dg

from anylaunch.specs.api import AppHandle, AppStatus

__all__ = ["TRACKER_PREFIX", "tracked_metadata", "tracker_entries"]

#: The prefix of the metadata keys of what a job tracked.
TRACKER_PREFIX = "anylaunch/tracker/"


def _value(value: object, mask: Callable[[str], str]) -> dg.MetadataValue:
    if isinstance(value, bool):
        return dg.MetadataValue.bool(value)
    if isinstance(value, int):
        return dg.MetadataValue.int(value)
    if isinstance(value, float):
        return dg.MetadataValue.float(value)
    if isinstance(value, str):
        return dg.MetadataValue.text(mask(value))
    if value is None:
        return dg.MetadataValue.null()
    import json

    return dg.MetadataValue.json(json.loads(mask(json.dumps(value))))


def tracker_entries(
    found: Mapping[str, Any], mask: Callable[[str], str] = str
) -> dict[str, dg.MetadataValue]:
    """Metadata entries of a :func:`~anylaunch.tracker.results.tracked` dict (values masked)."""
    meta = {f"{TRACKER_PREFIX}{k}": _value(v, mask) for k, v in found.get("metadata", {}).items()}
    for name, artifact in found.get("artifacts", {}).items():
        path = artifact.get("path") if isinstance(artifact, Mapping) else None
        meta[f"anylaunch/artifact/{name}"] = (
            dg.MetadataValue.path(mask(str(path))) if path else _value(artifact, mask)
        )
    if found.get("left_out"):
        meta["anylaunch/tracker_left_out"] = dg.MetadataValue.int(int(found["left_out"]))
    return meta


def tracked_metadata(
    handle: AppHandle, status: AppStatus | None, mask: Callable[[str], str] = str
) -> dict[str, dg.MetadataValue]:
    """The metadata of what an ended app's job tracked, and its archive URL (empty for an
    app that has not ended, without a tracker or an archive)."""
    if status is None or not status.is_terminal():
        return {}
    from anylaunch.runner.archive import archive_location
    from anylaunch.tracker.results import run_id_of, tracked

    run_id = run_id_of(handle, status)
    found = tracked(run_id, redact=mask)
    meta = tracker_entries(found) if found is not None else {}
    url = archive_location(run_id)
    if url is not None:
        meta["anylaunch/archive_url"] = (
            dg.MetadataValue.url(url) if "://" in url else dg.MetadataValue.path(url)
        )
    return meta
