"""What a run tracked, read back into a small JSON-able dict (for an engine's XCom, artifact or
metadata).

Every engine shows what its job tracked once the app ended: :func:`tracked` reads it from the
first tracker the launching process is configured with (the one ``anylaunch tracker list``
reads), under the run id the job saw (:func:`run_id_of`: the app's handle, or a placed app's
current attempt). A tracker that cannot be read is a warning, never a failed task.

>>> import tempfile
>>> from anylaunch.tracker.backend.fsspec import FsspecTracker
>>> root = tempfile.mkdtemp()
>>> t = FsspecTracker(root)
>>> t.add_metadata("local_cwd://s/train-1", lr=0.1)
>>> t.add_artifact("local_cwd://s/train-1", "model", "/tmp/x", {"format": "pt"})
>>> env = {"ANYLAUNCH_TRACKERS": "fsspec", "ANYLAUNCH_TRACKER_FSSPEC_CONFIG": root}
>>> out = tracked("local_cwd://s/train-1", environ=env)
>>> out["metadata"], out["artifacts"]
({'lr': 0.1}, {'model': {'path': '/tmp/x', 'metadata': {'format': 'pt'}}})
>>> tracked("local_cwd://s/other-2", environ=env) is None  # tracked nothing
True
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anylaunch.specs.api import AppStatus

__all__ = ["MAX_TRACKED_CHARS", "run_id_of", "tracked"]

logger = logging.getLogger(__name__)

#: The most characters of JSON :func:`tracked` returns (an XCom row, an artifact stay small).
MAX_TRACKED_CHARS = 16_000
#: The most characters of JSON one metadata value or artifact keeps before it is elided.
_MAX_VALUE_CHARS = 2_000


def run_id_of(handle: str, status: AppStatus | None = None) -> str:
    """The run id the job tracked under: its ``ANYLAUNCH_JOB_ID``, i.e. the handle of the app
    as its scheduler runs it; for a placed app (``placement://``), its current attempt's.

    >>> run_id_of("local_cwd://s/train-1")
    'local_cwd://s/train-1'
    """
    history = getattr(status, "placement", None)
    current = getattr(history, "current", None) if history is not None else None
    concrete = getattr(current, "handle", None)
    return str(concrete) if concrete else handle


def _masked(value: object, redact: Callable[[str], str]) -> object:
    """``value`` with ``redact`` applied to every string in it (keys included).

    >>> _masked({"dsn": "pw=hunter2", "n": [1, "hunter2"]}, lambda s: s.replace("hunter2", "***"))
    {'dsn': 'pw=***', 'n': [1, '***']}
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {redact(str(k)): _masked(v, redact) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_masked(v, redact) for v in value]
    return value


def _chars(value: object) -> int:
    return len(json.dumps(value, default=str))


def _elided(value: object) -> object:
    """``value``, or a note of its size when it alone would crowd out the rest."""
    size = _chars(value)
    return value if size <= _MAX_VALUE_CHARS else f"<{size} characters: not shown>"


def _bounded(out: dict[str, Any], limit: int) -> dict[str, Any]:
    """``out`` cut to ``limit`` characters of JSON: its last metadata keys and artifacts
    left out first (``left_out`` counts them; ``anylaunch tracker list`` shows all)."""
    left_out = 0
    while _chars(out) > limit and (out["metadata"] or out["artifacts"]):
        bucket = out["artifacts"] if out["artifacts"] else out["metadata"]
        bucket.pop(next(reversed(bucket)))
        left_out += 1
        out["left_out"] = left_out
    return out


def tracked(
    run_id: str,
    *,
    limit: int = MAX_TRACKED_CHARS,
    environ: Mapping[str, str] | None = None,
    redact: Callable[[str], str] | None = None,
) -> dict[str, Any] | None:
    """What run ``run_id`` tracked, in the first configured tracker: ``{"run_id", "metadata":
    {key: value}, "artifacts": {name: {"path", "metadata"}}, "sources": [{"source_run_id",
    "artifact_name"}]}``, at most ``limit`` characters of JSON (a value over 2000 characters
    is replaced by a note; then the last keys are left out, counted in ``left_out``).

    None when no tracker is configured, the run tracked nothing, or the tracker cannot be
    read (logged as a warning: what a job tracked never fails its task).

    Args:
        run_id: the job's run id (see :func:`run_id_of`)
        limit: the most characters of JSON to return
        environ: the environment that configures the trackers (default: this process's)
        redact: masks the secrets in every string (what a job tracks is its own output)
    """
    from anylaunch.tracker.api import build_trackers
    from anylaunch.tracker.config import configured_trackers

    try:
        if environ is None:
            from anylaunch.runner.config import load_sections

            configured = configured_trackers(load_sections)
        else:
            configured = configured_trackers(None, environ)
        if not configured:
            return None
        first = next(iter(configured))
        tracker = build_trackers({first: configured[first]})[0]
        if not tracker.has_run(run_id):
            return None
        metadata = {str(k): _elided(v) for k, v in tracker.metadata(run_id).items()}
        artifacts = {
            name: _elided({"path": a.path, "metadata": dict(a.metadata or {})})
            for name, a in tracker.artifacts(run_id).items()
        }
        sources = [
            {"source_run_id": s.source_run_id, "artifact_name": s.artifact_name}
            for s in tracker.sources(run_id)
        ][:20]
    except Exception as e:  # any tracker, any failure: the task's outcome does not depend on it
        logger.warning("could not read what run %s tracked: %s: %s", run_id, type(e).__name__, e)
        return None
    out: dict[str, Any] = {
        "run_id": run_id,
        "metadata": metadata,
        "artifacts": artifacts,
        "sources": sources,
    }
    if redact is not None:
        out = {k: v if k == "run_id" else _masked(v, redact) for k, v in out.items()}
    return _bounded(out, limit)
