"""The audit-log reader of the engine-scale benchmark (harness.audit_*), on log files written
here the way kube-apiserver writes and rotates them (a JSON event per line; a full file renamed
to ``audit-<time>.log`` and a new one started)."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

from tests.benchmarks.engine_scale import harness

ENGINE = "OpenAPI-Generator/36.0.3/python"
NS = "engine-scale-1"


def _event(audit_id: str, verb: str, agent: str = ENGINE, stage: str = "ResponseComplete") -> str:
    received = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return json.dumps(
        {
            "kind": "Event",
            "auditID": audit_id,
            "stage": stage,
            "verb": verb,
            "userAgent": agent,
            "objectRef": {"resource": "pods", "namespace": NS, "apiVersion": "v1"},
            "requestURI": f"/api/v1/namespaces/{NS}/pods",
            "requestReceivedTimestamp": received,
        }
    )


def _append(path: Path, *lines: str) -> None:
    with path.open("a") as f:
        f.writelines(line + "\n" for line in lines)


def _engine(log: Path, mark: harness.AuditMark) -> dict[str, int] | None:
    requests = harness.audit_requests(mark, time.time() + 1, NS)
    return None if requests is None else dict(requests.counts["engine"])


def test_only_requests_after_the_mark_count(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    _append(log, _event("before", "get"))
    mark = harness.audit_mark(log)
    _append(
        log,
        _event("w", "watch", stage="ResponseStarted"),
        _event("g", "get"),
        _event("w", "watch"),
        _event("k", "create", agent="kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19"),
    )
    requests = harness.audit_requests(mark, time.time() + 1, NS)
    assert requests is not None and requests.complete
    assert dict(requests.counts["engine"]) == {"WATCH pods": 1, "GET pods": 1}
    assert dict(requests.counts["control plane"]) == {"POST pods": 1}


def test_a_rotation_during_the_run_loses_nothing(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    old = tmp_path / "audit-2026-11-25T00-00-00.000.log"
    _append(old, _event("older", "get"))
    os.utime(old, (time.time() - 3600, time.time() - 3600))  # rotated long before the run
    _append(log, _event("before", "get"))
    mark = harness.audit_mark(log)
    _append(log, _event("a", "list"))
    log.rename(tmp_path / "audit-2026-11-26T03-00-00.000.log")
    _append(log, _event("b", "get"))
    assert _engine(log, mark) == {"LIST pods": 1, "GET pods": 1}


def test_the_marked_file_rotated_away_is_reported_incomplete(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    _append(log, _event("before", "get"))
    mark = harness.audit_mark(log)
    log.unlink()  # rotated out past --audit-log-maxbackup
    _append(log, _event("b", "get"))
    requests = harness.audit_requests(mark, time.time() + 1, NS)
    assert requests is not None and not requests.complete
    assert harness.client_summary(requests)["audit_log_complete"] is False


def test_no_audit_log_gives_no_count(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    assert _engine(log, harness.audit_mark(log)) is None
    _append(log, _event("stale", "get"))  # an old log the API server no longer writes
    assert _engine(log, harness.audit_mark(log)) is None
    assert harness.client_summary(None) == {"engine_api_requests": None}


def test_a_log_started_after_the_mark_is_read_whole(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    mark = harness.audit_mark(log)  # no log yet
    _append(log, _event("a", "get"), '{"auditID": "cut", "stage": "Resp')
    assert _engine(log, mark) == {"GET pods": 1}
