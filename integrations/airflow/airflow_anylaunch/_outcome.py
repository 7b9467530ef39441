"""What an ended app leaves in XCom besides its status: its per-index outcomes (``array``), its
placement history (``placement``), what its job tracked (``tracker``: see
:func:`anylaunch.tracker.results.tracked`, bounded) and where its record is archived
(``archive_url``, read by the "anylaunch archive" extra link).

No Airflow imports: the operator and the sensor share these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from airflow_anylaunch._arrays import push_array
from airflow_anylaunch._placement import push_placement

__all__ = ["XCOM_ARCHIVE_URL", "XCOM_TRACKER", "push_outcome", "run_id_in"]

#: The XCom key of what the app's job tracked (metadata, artifacts, sources).
XCOM_TRACKER = "tracker"
#: The XCom key of the URL of the app's record in the archive (``ANYLAUNCH_ARCHIVE_URL``).
XCOM_ARCHIVE_URL = "archive_url"
_ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")


def run_id_in(result: Mapping[str, Any]) -> str:
    """The run id the job tracked under, from a status dict: the app's handle, or a placed
    app's current attempt's (the last entry of its history with a handle).

    >>> run_id_in({"app_handle": "local_cwd://s/a-1"})
    'local_cwd://s/a-1'
    >>> run_id_in({"app_handle": "placement://s/a", "placement": {"entries": [
    ...     {"handle": "local_cwd://s/a-1", "outcome": "moved"},
    ...     {"handle": "local_cwd://s/a-2", "outcome": "ended"}]}})
    'local_cwd://s/a-2'
    """
    placement = result.get("placement")
    entries = placement.get("entries") if isinstance(placement, Mapping) else None
    for entry in reversed(entries or []):
        if isinstance(entry, Mapping) and entry.get("handle"):
            return str(entry["handle"])
    return str(result.get("app_handle") or "")


def push_outcome(
    context: Any,
    result: Mapping[str, Any] | None,
    redact: Callable[[str], str] | None = None,
) -> None:
    """Pushes what an app's status dict ``result`` says beyond its state: its array and
    placement outcomes and, once it ended, what its job tracked (secrets masked by
    ``redact``) and its archive URL. Reading the tracker never fails the task (a warning in
    the task log)."""
    push_array(context, result)
    push_placement(context, result)
    if result is None or result.get("state") not in _ENDED:
        return
    from anylaunch.runner.archive import archive_location
    from anylaunch.tracker.results import tracked

    run_id, ti = run_id_in(result), context.get("ti")
    if not run_id or ti is None:  # no task instance (a bare poke): nowhere to push
        return
    found = tracked(run_id, redact=redact)
    if found is not None:
        ti.xcom_push(key=XCOM_TRACKER, value=found)
    url = archive_location(run_id)
    if url is not None:
        ti.xcom_push(key=XCOM_ARCHIVE_URL, value=url)
