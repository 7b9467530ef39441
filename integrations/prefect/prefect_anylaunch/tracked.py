"""What an ended app's job tracked and where its record is archived, in Prefect: the task
result gets ``tracker`` (see :func:`anylaunch.tracker.results.tracked`) and ``archive_url``
(the app's record in ``ANYLAUNCH_ARCHIVE_URL``), and a markdown artifact shows both. Reading
the tracker never fails the task (a warning).

>>> print(tracked_markdown("local_cwd://s/a-1", {"metadata": {"lr": 0.1},
...     "artifacts": {"model": {"path": "/tmp/x", "metadata": {}}}}, "/archive/local_cwd/s/a-1"))
### What local_cwd://s/a-1 tracked
<BLANKLINE>
| metadata | value |
|---|---|
| lr | 0.1 |
<BLANKLINE>
| artifact | path | metadata |
|---|---|---|
| model | /tmp/x | {} |
<BLANKLINE>
Archived record (status and every log line): `/archive/local_cwd/s/a-1`
<BLANKLINE>
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from anylaunch.specs.api import AppStatus
from prefect_anylaunch import _prefect

__all__ = ["ended_extras", "tracked_artifact", "tracked_markdown"]


def _cell(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text.replace("|", "\\|").replace("\n", " ")


def tracked_markdown(handle: str, found: Mapping[str, Any] | None, archive_url: str | None) -> str:
    """A markdown artifact's text: the run's metadata and artifacts, and its archived record."""
    parts = [f"### What {handle} tracked\n"]
    if found is None:
        parts.append("Nothing (no tracker configured, or the job tracked nothing).\n")
    else:
        rows = [f"| {_cell(k)} | {_cell(v)} |" for k, v in found.get("metadata", {}).items()]
        parts.append("| metadata | value |\n|---|---|\n" + "\n".join(rows) + "\n")
        arts = [
            f"| {_cell(name)} | {_cell(a.get('path'))} | {_cell(a.get('metadata') or {})} |"
            for name, a in found.get("artifacts", {}).items()
            if isinstance(a, Mapping)
        ]
        parts.append("| artifact | path | metadata |\n|---|---|---|\n" + "\n".join(arts) + "\n")
        if found.get("left_out"):
            parts.append(f"{found['left_out']} more: `anylaunch tracker list metadata {handle}`\n")
    if archive_url:
        parts.append(f"Archived record (status and every log line): `{archive_url}`\n")
    return "\n".join(parts)


def ended_extras(
    handle: str, status: AppStatus | None, redact: Callable[[str], str] = str
) -> dict[str, Any]:
    """``{"tracker": ..., "archive_url": ...}`` of an ended app (each left out when there is
    none); empty for an app that has not ended."""
    if status is None or not status.is_terminal():
        return {}
    from anylaunch.runner.archive import archive_location
    from anylaunch.tracker.results import run_id_of, tracked

    run_id = run_id_of(handle, status)
    extras: dict[str, Any] = {}
    found = tracked(run_id, redact=redact)
    if found is not None:
        extras["tracker"] = found
    url = archive_location(run_id)
    if url is not None:
        extras["archive_url"] = url
    return extras


def tracked_artifact(
    handle: str, app_name: str, status: AppStatus | None, redact: Callable[[str], str] = str
) -> None:
    """Creates the markdown artifact of what the ended app's job tracked and where it is
    archived (nothing when there is neither)."""
    extras = ended_extras(handle, status, redact)
    if not extras:
        return
    _prefect.create_artifact(
        "markdown",
        markdown=tracked_markdown(handle, extras.get("tracker"), extras.get("archive_url")),
        key=_prefect.artifact_key(app_name, "tracker"),
        description=f"what {handle} tracked",
    )
