"""How ``bjobs`` records of an app read as replica and app states (no I/O)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from anylaunch.schedulers.common.job_metadata import JOB_METADATA_KEYS, OWNER_KEY
from anylaunch.schedulers.common.states import aggregate_replica_states
from anylaunch.schedulers.lsf.names import (
    _KILLED,
    LSF_STATES,
    parse_job_description,
)
from anylaunch.specs.api import AppState


def replica_state(stat: str, exit_reason: str = "") -> AppState:
    """The state of a replica whose LSF job has status ``stat``.

    An EXIT caused by ``bkill`` (exit reason TERM_OWNER or TERM_ADMIN) is a cancel.

    >>> replica_state("RUN"), replica_state("SSUSP"), replica_state("ZOMBI")
    (<AppState.RUNNING: 3>, <AppState.PENDING: 2>, <AppState.UNKNOWN: 7>)
    >>> replica_state("EXIT", "TERM_OWNER: job killed by owner")
    <AppState.CANCELLED: 6>
    >>> replica_state("EXIT", "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit")
    <AppState.FAILED: 5>
    """
    state = LSF_STATES.get(stat, AppState.UNKNOWN)
    if state == AppState.FAILED and exit_reason.startswith(_KILLED):
        return AppState.CANCELLED
    return state


def app_state(states: Iterable[AppState]) -> AppState:
    """The state of an app from its replicas' states: the shared rule
    (:func:`aggregate_replica_states`), one job per replica.

    >>> app_state([AppState.SUCCEEDED, AppState.RUNNING])
    <AppState.RUNNING: 3>
    >>> app_state([AppState.CANCELLED, AppState.FAILED, AppState.RUNNING])
    <AppState.FAILED: 5>
    >>> app_state([AppState.SUCCEEDED, AppState.SUCCEEDED])
    <AppState.SUCCEEDED: 4>
    >>> app_state([AppState.UNKNOWN, AppState.RUNNING])  # one host unreachable (UNKWN)
    <AppState.RUNNING: 3>
    """
    return aggregate_replica_states(states)


@dataclass
class _Record:
    """One job of an app, as bjobs reports it."""

    job_id: str
    stat: str
    role: str
    replica_id: int
    jobs: int
    app_id: str
    session: str
    app_name: str
    exit_code: str
    exit_reason: str
    host: str
    output_file: str
    pend_reason: str
    array: str = ""
    """An array element's stored array facts (its replica id is its array index)."""
    metadata: Mapping[str, str] = field(default_factory=dict)
    """The job metadata (and owner) anylaunch stamped into the job's description, decoded."""

    @property
    def state(self) -> AppState:
        return replica_state(self.stat, self.exit_reason)

    @property
    def label(self) -> str:
        return f"{self.role}/{self.replica_id} (LSF job {self.job_id})"

    @property
    def log_dir(self) -> str:
        if self.array:  # {role dir}/lsf-%I.out: each index's logs in {role dir}/{index}
            return os.path.join(os.path.dirname(self.output_file), str(self.replica_id))
        return os.path.dirname(self.output_file)


def _record(raw: Mapping[str, Any]) -> _Record | None:
    desc = parse_job_description(str(raw.get("JOB_DESCRIPTION", "")))
    if desc is None or not raw.get("JOBID"):
        return None
    host = str(raw.get("EXEC_HOST") or "").split(":")[0]
    job_id, _, bracket = str(raw["JOBID"]).partition("[")  # 12[3] with LSB_BJOBS_DISPLAY_ENH
    replica_id = int(desc["replica"])
    array = desc.get("array", "")
    if array:  # an element: LSF's index is 1-based
        index = _element_index(str(raw.get("JOBINDEX") or ""), bracket, str(raw.get("JOB_NAME")))
        if index is None:
            return None
        replica_id = index - 1
    return _Record(
        job_id=job_id,
        stat=str(raw.get("STAT", "")),
        role=desc["role"],
        replica_id=replica_id,
        jobs=int(desc["jobs"]) if desc["jobs"].isdigit() else 0,
        app_id=desc["app"],
        session=desc.get("session", ""),
        app_name=desc.get("name", ""),
        exit_code=str(raw.get("EXIT_CODE") or ""),
        exit_reason=str(raw.get("EXIT_REASON") or ""),
        host=host.split("*")[-1],  # "4*hostA" in some outputs
        output_file=str(raw.get("OUTPUT_FILE") or ""),
        pend_reason=str(raw.get("PEND_REASON") or "").strip(),
        array=array,
        metadata={k: v for k, v in desc.items() if k in JOB_METADATA_KEYS or k == OWNER_KEY},
    )


def _element_index(jobindex: str, bracket: str, name: str) -> int | None:
    """An array element's (1-based) LSF index: ``JOBINDEX``, else from ``JOBID[IDX]`` or
    the element's name ``name[IDX]``.

    >>> _element_index("8", "", "a[8]"), _element_index("", "8]", ""), _element_index("", "", "a[8]")
    (8, 8, 8)
    """
    for text in (jobindex, bracket.rstrip("]"), name.rpartition("[")[2].rstrip("]")):
        if text.strip().isdigit() and int(text) > 0:
            return int(text)
    return None


def _latest(records: Iterable[_Record]) -> list[_Record]:
    """One record per replica (the newest job, if a replica was ever submitted twice)."""
    by_replica: dict[tuple[str, int], _Record] = {}
    for rec in records:
        key = (rec.role, rec.replica_id)
        if key not in by_replica or int(rec.job_id) > int(by_replica[key].job_id):
            by_replica[key] = rec
    return sorted(by_replica.values(), key=lambda r: int(r.job_id))
