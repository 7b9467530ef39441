"""Reading job state from Slurm: ``squeue --json``, ``scontrol show job`` and ``sacct``.

One :class:`SlurmJob` per job record (a plain job, or one component of a heterogeneous job).
:class:`SlurmQuery` answers "what are these apps doing" for many app ids at once, with a
short-lived snapshot shared by every scheduler in the process that talks to the same cluster:

1. ``squeue --json`` lists every job slurmctld still knows (finished ones for ``MinJobAge``);
   Slurm versions without ``--json`` fall back to ``scontrol show job -o`` (same data, text).
2. Jobs slurmctld has forgotten are looked up in accounting with one ``sacct`` call; without
   slurmdbd they are unknown (``None``).

So describing N apps costs one controller call per snapshot (``ttl`` seconds) plus at most one
``sacct`` call, whatever N is.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anylaunch.schedulers.common.arrays import read_array_meta
from anylaunch.schedulers.common.job_metadata import JOB_METADATA_KEYS, OWNER_KEY
from anylaunch.specs.api import NONE, AppState
from anylaunch.specs.array_status import parse_index_ranges
from anylaunch.specs.errors import AnylaunchError, InvalidSpecError

__all__ = [
    "FAILURE_CATEGORIES",
    "SLURM_STATES",
    "SlurmCommandError",
    "SlurmJob",
    "SlurmQuery",
    "app_state",
    "array_task_indices",
    "expand_hostlist",
    "failure_error",
    "get_query",
    "parse_sacct",
    "parse_scontrol",
    "parse_squeue_json",
    "run_slurm",
    "run_slurm_process",
    "split_array_name",
]

#: Every Slurm job state and the AppState it maps to (``REQUEUED``/``SUSPENDED`` wait to run
#: again; ``PREEMPTED``, ``TIMEOUT``, ``NODE_FAIL``, ``OUT_OF_MEMORY``... are failures).
SLURM_STATES: dict[str, AppState] = {
    "PENDING": AppState.PENDING,
    "CONFIGURING": AppState.PENDING,
    "REQUEUED": AppState.PENDING,
    "REQUEUE_FED": AppState.PENDING,
    "REQUEUE_HOLD": AppState.PENDING,
    "RESV_DEL_HOLD": AppState.PENDING,
    "SUSPENDED": AppState.PENDING,
    "STOPPED": AppState.PENDING,
    "RUNNING": AppState.RUNNING,
    "COMPLETING": AppState.RUNNING,
    "SIGNALING": AppState.RUNNING,
    "STAGE_OUT": AppState.RUNNING,
    "RESIZING": AppState.RUNNING,
    "COMPLETED": AppState.SUCCEEDED,
    "CANCELLED": AppState.CANCELLED,
    "REVOKED": AppState.CANCELLED,
    "FAILED": AppState.FAILED,
    "TIMEOUT": AppState.FAILED,
    "NODE_FAIL": AppState.FAILED,
    "PREEMPTED": AppState.FAILED,
    "OUT_OF_MEMORY": AppState.FAILED,
    "BOOT_FAIL": AppState.FAILED,
    "DEADLINE": AppState.FAILED,
    "SPECIAL_EXIT": AppState.FAILED,
}

#: Slurm end states whose cause is known beyond an exit code, and the failure category each
#: declares (``anylaunch.runner.failures`` reads ``"category"`` from the structured error):
#: the platform lost the job (a node failed or did not boot, a higher-priority job preempted
#: it), or the job ran out of memory.
FAILURE_CATEGORIES: dict[str, str] = {
    "NODE_FAIL": "infrastructure",
    "PREEMPTED": "infrastructure",
    "BOOT_FAIL": "infrastructure",
    "OUT_OF_MEMORY": "out_of_memory",
}

_SACCT_FIELDS = "JobIDRaw,JobID,State,ExitCode,NTasks,NodeList,WorkDir,Reason,UID,JobName"
_SACCT_SEP = "\x1f"  # no job field can hold it; JobName (free text) is last anyway
#: How many ids go into one ``sacct -j`` (keeps the command line short).
_SACCT_CHUNK = 500
#: How long a finished job's accounting records are reused.
_ACCOUNTED_TTL_S = 60.0


class SlurmCommandError(AnylaunchError):
    """A Slurm command failed or is missing (the message quotes its error and the fix)."""


def app_state(slurm_state: str) -> AppState:
    """Maps a Slurm job state (as squeue, scontrol or sacct print it) to an AppState.

    >>> app_state("TIMEOUT"), app_state("REQUEUED"), app_state("CANCELLED by 0")
    (<AppState.FAILED: 5>, <AppState.PENDING: 2>, <AppState.CANCELLED: 6>)
    >>> app_state("SOMETHING_NEW")
    <AppState.UNKNOWN: 7>
    """
    base = slurm_state.split(" ", 1)[0].rstrip("+").upper()
    return SLURM_STATES.get(base, AppState.UNKNOWN)


def failure_error(job: SlurmJob) -> str:
    """The structured error of a job that ended in a state of :data:`FAILURE_CATEGORIES`
    (JSON: the category, Slurm's state and reason, the exit code), else ``NONE``.

    >>> failure_error(SlurmJob("7", "7", 0, "a:r", "NODE_FAIL", reason="NodeDown"))
    '{"category": "infrastructure", "slurm_state": "NODE_FAIL", "reason": "NodeDown"}'
    >>> failure_error(SlurmJob("7", "7", 0, "a:r", "FAILED", exit_code=3))
    '<NONE>'
    """
    state = job.state.split(" ", 1)[0].rstrip("+").upper()
    category = FAILURE_CATEGORIES.get(state)
    if category is None:
        return NONE
    error: dict[str, object] = {"category": category, "slurm_state": state}
    if job.reason and job.reason != "None":
        error["reason"] = job.reason
    if job.exit_code:
        error["exit_code"] = job.exit_code
    if job.signal:
        error["signal"] = job.signal
    return json.dumps(error)


def expand_hostlist(hostlist: str) -> list[str]:
    """Expands a Slurm host list (what ``scontrol show hostnames`` prints, without a call).

    >>> expand_hostlist("node[1-3,7],gpu-[08-09],login")
    ['node1', 'node2', 'node3', 'node7', 'gpu-08', 'gpu-09', 'login']
    >>> expand_hostlist("(null)"), expand_hostlist("None assigned")
    ([], [])
    """
    text = hostlist.strip()
    if not text or text in ("(null)", "None assigned", "None"):
        return []
    hosts: list[str] = []
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", text):
        hosts.extend(_expand_one(item.strip()))
    return hosts


def _expand_one(item: str) -> list[str]:
    match = re.search(r"\[([^\]]*)\]", item)
    if match is None:
        return [item] if item else []
    prefix, suffix = item[: match.start()], item[match.end() :]
    out: list[str] = []
    for part in match.group(1).split(","):
        lo, _, hi = part.partition("-")
        if hi and lo.isdigit() and hi.isdigit():
            width = len(lo)
            values = [str(i).zfill(width) for i in range(int(lo), int(hi) + 1)]
        else:
            values = [part]
        for value in values:
            out.extend(_expand_one(prefix + value + suffix))
    return out


@dataclass(frozen=True)
class SlurmJob:
    """One job record: a plain job or one component of a heterogeneous job."""

    job_id: str
    """This record's own job id."""
    leader_id: str
    """The app id: the het job's leader id (the job id itself for a plain job)."""
    offset: int
    """Het component index (0 for a plain job)."""
    name: str
    state: str
    """Slurm's state name, e.g. ``RUNNING``."""
    reason: str = ""
    exit_code: int | None = None
    signal: int | None = None
    restarts: int | None = None
    nodes: str = ""
    workdir: str = ""
    num_tasks: int | None = None
    user_id: int | None = None
    source: str = ""
    """Which command this came from: squeue, scontrol or sacct."""
    array_task: str = ""
    """For a task of a job array: its task id (``"7"``), or the task ids a pending record
    still holds (``"8-19%4"``); empty for other jobs (``leader_id`` is the array's job id)."""
    metadata: Mapping[str, str] = field(default_factory=dict, hash=False)
    """The job metadata anylaunch stamped into the job's comment (decoded)."""

    @property
    def app_state(self) -> AppState:
        return app_state(self.state)


def _num(value: Any) -> int | None:
    """An integer from squeue's JSON: a plain number, or ``{"set": ..., "number": ...}``."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _state_name(value: Any) -> str:
    # a string in data_parser 0.0.38 (Slurm 22.05), a list of flags in later versions
    if isinstance(value, list):
        known = [v for v in value if isinstance(v, str) and v in SLURM_STATES]
        return known[0] if known else (str(value[0]) if value else "UNKNOWN")
    return str(value or "UNKNOWN")


def _exit_status(value: Any) -> tuple[int | None, int | None]:
    """(exit code, signal) from a raw wait status (an int, or a newer Slurm's object)."""
    if isinstance(value, dict) and ("return_code" in value or "signal" in value):
        signal = value.get("signal")
        sig = _num(signal.get("id") if isinstance(signal, dict) else signal)
        return _num(value.get("return_code")), sig or None
    status = _num(value)
    if status is None:
        return None, None
    return (status >> 8) & 0xFF, (status & 0x7F) or None


def comment_metadata(words: Iterable[str]) -> dict[str, str]:
    """The job metadata among the ``key=value`` words of a job's comment (see
    :func:`~anylaunch.schedulers.slurm.request.metadata_comment`), decoded.

    >>> comment_metadata("my run anylaunch/context=%3C%3CNA%3E%3E anylaunch/scheduler=slurm".split())
    {'anylaunch/context': '<<NA>>', 'anylaunch/scheduler': 'slurm'}
    """
    import urllib.parse

    found: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if sep and (key in JOB_METADATA_KEYS or key == OWNER_KEY):
            found[key] = urllib.parse.unquote(value.strip())
    return found


def parse_squeue_json(text: str) -> list[SlurmJob]:
    """Job records from ``squeue --json``.

    >>> jobs = parse_squeue_json('{"jobs": [{"job_id": 5, "het_job_id": 4, '
    ...     '"het_job_offset": 1, "name": "app:ps", "job_state": "FAILED", '
    ...     '"state_reason": "NonZeroExitCode", "exit_code": 768, "nodes": "node2", '
    ...     '"current_working_directory": "/w", "tasks": 1, "restart_cnt": 0, "user_id": 0}]}')
    >>> jobs[0].leader_id, jobs[0].offset, jobs[0].exit_code, jobs[0].app_state.name
    ('4', 1, 3, 'FAILED')
    >>> parse_squeue_json('{"errors": [{"description": "Failed while looking for jobs"}], '
    ...     '"jobs": []}')
    Traceback (most recent call last):
    ...
    anylaunch.schedulers.slurm.query.SlurmCommandError: squeue --json reported: Failed while looking for jobs. Fix: check that slurmctld is up (`scontrol ping`)
    """
    import json

    try:
        data = json.loads(text)
    except ValueError as e:
        raise SlurmCommandError(
            f"squeue --json printed something that is not JSON ({e}): {text[:200]!r}. Fix: "
            "check the Slurm installation (the openapi/data_parser plugins)"
        ) from None
    errors = data.get("errors") if isinstance(data, dict) else None
    if errors:
        # e.g. no controller answers: squeue exits 0 with an empty job list and this
        # ("Failed while looking for jobs"); an empty list must not read as "no such job"
        said = "; ".join(
            str(e.get("description") or e.get("error") or e) if isinstance(e, dict) else str(e)
            for e in errors
        )
        raise SlurmCommandError(
            f"squeue --json reported: {said[:500]}. Fix: check that slurmctld is up "
            "(`scontrol ping`)"
        )
    jobs: list[SlurmJob] = []
    for job in data.get("jobs") or []:
        job_id = _num(job.get("job_id"))
        if job_id is None:
            continue
        het_id = _num(job.get("het_job_id")) or 0
        array_id = _num(job.get("array_job_id")) or 0
        task = _num(job.get("array_task_id"))
        array_task = ""
        if array_id:
            array_task = str(task) if task is not None else str(job.get("array_task_string") or "")
        code, sig = _exit_status(job.get("exit_code"))
        jobs.append(
            SlurmJob(
                job_id=str(job_id),
                leader_id=str(het_id or (array_id if array_task else 0) or job_id),
                offset=(_num(job.get("het_job_offset")) or 0) if het_id else 0,
                name=str(job.get("name") or ""),
                state=_state_name(job.get("job_state")),
                reason=str(job.get("state_reason") or ""),
                exit_code=code,
                signal=sig,
                restarts=_num(job.get("restart_cnt")),
                nodes=str(job.get("nodes") or ""),
                workdir=str(job.get("current_working_directory") or ""),
                num_tasks=_num(job.get("tasks")),
                user_id=_num(job.get("user_id")),
                source="squeue",
                array_task=array_task,
                metadata=comment_metadata(str(job.get("comment") or "").split()),
            )
        )
    return jobs


_SCONTROL_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def _scontrol_fields(line: str) -> dict[str, str]:
    """``Key=Value`` pairs of one ``scontrol show job -o`` line (values may hold spaces)."""
    fields: dict[str, str] = {}
    matches = list(_SCONTROL_KEY.finditer(line))
    for m, nxt in zip(matches, [*matches[1:], None], strict=True):
        end = nxt.start() if nxt is not None else len(line)
        fields.setdefault(m.group(1), line[m.end() : end].strip())
    return fields


def _exit_pair(text: str) -> tuple[int | None, int | None]:
    code, _, sig = text.partition(":")
    return (
        int(code) if code.strip().isdigit() else None,
        (int(sig) or None) if sig.strip().isdigit() else None,
    )


def _int_or_none(text: str | None) -> int | None:
    if text is None:
        return None
    match = re.match(r"\s*(\d+)", text)
    return int(match.group(1)) if match else None


def parse_scontrol(text: str) -> list[SlurmJob]:
    """Job records from ``scontrol show job -o`` (one job per line).

    >>> line = ("JobId=17 HetJobId=16 HetJobOffset=1 JobName=app:ps UserId=me(1000) "
    ...         "JobState=COMPLETED Reason=None Restarts=0 ExitCode=0:0 NodeList=node2 "
    ...         "NumTasks=1 WorkDir=/a dir Comment=x")
    >>> job = parse_scontrol(line)[0]
    >>> job.leader_id, job.offset, job.workdir, job.user_id, job.app_state.name
    ('16', 1, '/a dir', 1000, 'SUCCEEDED')
    """
    jobs: list[SlurmJob] = []
    for line in text.splitlines():
        fields = _scontrol_fields(line)
        if "JobId" not in fields:
            continue
        het_id = fields.get("HetJobId")
        array_id = fields.get("ArrayJobId")
        array_task = fields.get("ArrayTaskId", "") if array_id else ""
        code, sig = _exit_pair(fields.get("ExitCode", ""))
        uid = re.search(r"\((\d+)\)", fields.get("UserId", ""))
        jobs.append(
            SlurmJob(
                job_id=fields["JobId"],
                leader_id=het_id or (array_id if array_task else None) or fields["JobId"],
                offset=_int_or_none(fields.get("HetJobOffset")) or 0,
                name=fields.get("JobName", ""),
                state=fields.get("JobState", "UNKNOWN"),
                reason=fields.get("Reason", ""),
                exit_code=code,
                signal=sig,
                restarts=_int_or_none(fields.get("Restarts")),
                nodes="" if fields.get("NodeList") == "(null)" else fields.get("NodeList", ""),
                workdir=fields.get("WorkDir", ""),
                num_tasks=_int_or_none(fields.get("NumTasks")),
                user_id=int(uid.group(1)) if uid else None,
                source="scontrol",
                array_task=array_task,
                # the comment's key=value words read as fields of their own
                metadata=comment_metadata(f"{k}={v}" for k, v in fields.items()),
            )
        )
    return jobs


def parse_sacct(text: str) -> list[SlurmJob]:
    """Job records from ``sacct -D -n -P --delimiter=<US> -o <_SACCT_FIELDS>``.

    With ``-D`` every attempt of a requeued job is listed: the last one is kept and the
    earlier ones are counted as restarts. Each component's replica count is the task count of
    its first step.

    >>> sep = "\\x1f"
    >>> rows = [
    ...     ["16", "16+0", "REQUEUED", "0:0", "", "node1", "/w", "None", "0", "app:trainer"],
    ...     ["16", "16+0", "FAILED", "3:0", "", "node1", "/w", "NonZeroExitCode", "0", "app:trainer"],
    ...     ["16.0", "16+0.0", "FAILED", "3:0", "2", "node1", "", "", "", "bash"],
    ...     ["17", "16+1", "FAILED", "0:9", "", "node2", "/w", "None", "0", "app:ps"],
    ... ]
    >>> jobs = parse_sacct("\\n".join(sep.join(r) for r in rows))
    >>> [(j.job_id, j.offset, j.restarts, j.num_tasks, j.exit_code, j.signal) for j in jobs]
    [('16', 0, 1, 2, 3, None), ('17', 1, 0, None, 0, 9)]
    """
    order: list[str] = []
    last: dict[str, list[str]] = {}
    requeues: dict[str, int] = {}
    tasks: dict[str, int] = {}
    for line in text.splitlines():
        row = line.split(_SACCT_SEP)
        if len(row) < 10:
            continue
        raw = row[0]
        if "." in raw:  # a step: "16.0" (its JobID is "16+0.0" in a het job)
            parent, _, step = raw.partition(".")
            n = _int_or_none(row[4])
            if step.isdigit() and n is not None:
                tasks.setdefault(parent, n)
            continue
        if raw not in last:
            order.append(raw)
        elif app_state(last[raw][2]) is AppState.PENDING:  # the earlier attempt was requeued
            requeues[raw] = requeues.get(raw, 0) + 1
        last[raw] = row
    jobs: list[SlurmJob] = []
    for raw in order:
        row = last[raw]
        leader, plus, offset = row[1].partition("+")
        array_id, underscore, array_task = row[1].partition("_")  # 16_3, 16_[4-9%2]
        code, sig = _exit_pair(row[3])
        jobs.append(
            SlurmJob(
                job_id=raw,
                leader_id=leader if plus else (array_id if underscore else raw),
                offset=int(offset) if plus and offset.isdigit() else 0,
                name=_SACCT_SEP.join(row[9:]),
                state=row[2],
                reason=row[7],
                exit_code=code,
                signal=sig,
                restarts=requeues.get(raw, 0),
                nodes="" if row[5] == "None assigned" else row[5],
                workdir=row[6],
                num_tasks=tasks.get(raw),
                user_id=_int_or_none(row[8]),
                source="sacct",
                array_task=array_task.strip("[]") if underscore else "",
            )
        )
    return jobs


#: The job name of an array app ends with this tag holding :func:`array_meta` (sacct keeps
#: job names, but not comments unless ``AccountingStoreFlags=job_comment``).
ARRAY_TAG = re.compile(r" \[anylaunch-array ([^\]]*)\]$")


def split_array_name(name: str) -> tuple[str, str | None]:
    """(job name without the array tag, the array's stored meta or None).

    >>> split_array_name("train:trainer [anylaunch-array size=20;ratio=1.0]")
    ('train:trainer', 'size=20;ratio=1.0')
    >>> split_array_name("train:trainer")
    ('train:trainer', None)
    """
    match = ARRAY_TAG.search(name)
    if match is None:
        return name, None
    return name[: match.start()], match.group(1)


def array_task_indices(task: str) -> list[int]:
    """The task ids of one array record (``"7"``, ``"8-19%4"``, ``"[3,5]"``); [] if none.

    >>> array_task_indices("8-10%4"), array_task_indices("7"), array_task_indices("")
    ([8, 9, 10], [7], [])
    """
    if not task or task in ("N/A", "(null)"):
        return []
    try:
        return parse_index_ranges(task)
    except InvalidSpecError:
        return []


def _array_gaps(records: Sequence[SlurmJob]) -> bool:
    """Whether the controller's records of an array miss some of its tasks (tasks that
    ended more than ``MinJobAge`` ago are only in accounting)."""
    if not records or not any(j.array_task for j in records):
        return False
    meta = next((m for j in records if (m := split_array_name(j.name)[1]) is not None), None)
    if meta is None:
        return False
    try:
        parsed = read_array_meta(meta)
    except InvalidSpecError:
        return False
    wanted = set(parsed.selected if parsed.selected is not None else range(parsed.size))
    for job in records:
        wanted.difference_update(array_task_indices(job.array_task))
    return bool(wanted)


def run_slurm(cmd: Sequence[str], timeout: float, stdin: str | None = None) -> str:
    """Runs a Slurm command and returns its stdout.

    Raises:
        SlurmCommandError: the command is missing, timed out or failed (quotes its stderr).
    """
    proc = run_slurm_process(cmd, timeout, stdin)
    if proc.returncode != 0:
        raise SlurmCommandError(
            f"`{' '.join(cmd[:3])}{' ...' if len(cmd) > 3 else ''}` failed (exit code "
            f"{proc.returncode}): {proc.stderr.strip()[:1000] or proc.stdout.strip()[:1000]}"
        )
    return proc.stdout


def run_slurm_process(
    cmd: Sequence[str], timeout: float, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs a Slurm command and returns how it ended, whatever its exit code (for commands
    whose failure is an answer, e.g. ``sbatch --test-only``).

    Raises:
        SlurmCommandError: the command is missing or timed out.
    """
    try:
        return subprocess.run(
            list(cmd), input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError:
        raise SlurmCommandError(
            f"{cmd[0]} not found: the slurm scheduler runs Slurm's commands. Fix: run on a "
            "Slurm login node, or install the Slurm client (e.g. apt-get install slurm-client) "
            "and point SLURM_CONF at the cluster's slurm.conf"
        ) from None
    except subprocess.TimeoutExpired:
        raise SlurmCommandError(
            f"`{' '.join(cmd[:3])} ...` did not answer within {timeout:g}s. Fix: check that "
            "slurmctld is up (`scontrol ping`)"
        ) from None


def _is_job_id(app_id: str) -> bool:
    return isinstance(app_id, str) and app_id.isdigit() and len(app_id) < 20


class SlurmQuery:
    """Job state for many app ids, from one shared, short-lived snapshot of the controller.

    Args:
        ttl: seconds a controller snapshot answers describe calls
        timeout: seconds each Slurm command may take
    """

    def __init__(self, ttl: float = 2.0, timeout: float = 60.0) -> None:
        self.ttl = ttl
        self.timeout = timeout
        #: How many times each command ran (for benchmarks and tests).
        self.calls: dict[str, int] = {"squeue": 0, "scontrol": 0, "sacct": 0}
        self._lock = threading.Lock()
        self._snapshot: dict[str, list[SlurmJob]] = {}
        self._snapshot_at = float("-inf")
        self._max_id = -1
        self._use_json: bool | None = None  # None: not tried yet
        # finished jobs found in accounting change no more once slurmdbd has caught up:
        # remember a few thousand for a minute
        self._accounted: OrderedDict[str, tuple[float, list[SlurmJob]]] = OrderedDict()
        self._accounting_error: str | None = None

    # --- controller ----------------------------------------------------------------------

    def _controller_jobs(self) -> list[SlurmJob]:
        if self._use_json is not False:
            self.calls["squeue"] += 1
            try:
                jobs = parse_squeue_json(run_slurm(["squeue", "--json"], self.timeout))
                self._use_json = True
                return jobs
            except SlurmCommandError:
                # an old Slurm (no --json, or no data_parser plugin): use scontrol from now on,
                # but only if scontrol works, so a down controller is reported as such
                if self._use_json:
                    raise
                jobs = self._scontrol_jobs()
                self._use_json = False
                return jobs
        return self._scontrol_jobs()

    def _scontrol_jobs(self) -> list[SlurmJob]:
        self.calls["scontrol"] += 1
        try:
            text = run_slurm(["scontrol", "show", "job", "-o"], self.timeout)
        except SlurmCommandError as e:
            if "No jobs in the system" in str(e):
                return []
            raise
        return parse_scontrol(text)

    def refresh(self) -> None:
        """Takes a new controller snapshot now."""
        jobs = self._controller_jobs()
        snapshot: dict[str, list[SlurmJob]] = {}
        for job in jobs:
            snapshot.setdefault(job.leader_id, []).append(job)
        for records in snapshot.values():
            records.sort(key=lambda j: j.offset)
        self._snapshot = snapshot
        self._snapshot_at = time.monotonic()
        ids = [int(j.job_id) for j in jobs if j.job_id.isdigit()]
        self._max_id = max(ids, default=-1)

    def snapshot(self, max_age: float | None = None) -> dict[str, list[SlurmJob]]:
        """Every job the controller knows, by app id (a snapshot at most ``max_age`` old)."""
        with self._lock:
            age = time.monotonic() - self._snapshot_at
            if age > (self.ttl if max_age is None else max_age):
                self.refresh()
            return dict(self._snapshot)

    # --- accounting ----------------------------------------------------------------------

    def accounting(self, app_ids: Iterable[str]) -> dict[str, list[SlurmJob]]:
        """Records of ``app_ids`` in accounting (one ``sacct`` per 500 ids); ``{}`` without it."""
        found: dict[str, list[SlurmJob]] = {}
        wanted = [a for a in dict.fromkeys(app_ids) if _is_job_id(a)]
        missing = []
        now = time.monotonic()
        for app_id in wanted:
            cached = self._accounted.get(app_id)
            if cached is not None and now - cached[0] < _ACCOUNTED_TTL_S:
                found[app_id] = cached[1]
            else:
                missing.append(app_id)
        for i in range(0, len(missing), _SACCT_CHUNK):
            chunk = missing[i : i + _SACCT_CHUNK]
            self.calls["sacct"] += 1
            cmd = ["sacct", "-D", "-n", "-P", f"--delimiter={_SACCT_SEP}"]
            cmd += ["-o", _SACCT_FIELDS, "-j", ",".join(chunk)]
            try:
                text = run_slurm(cmd, self.timeout)
            except SlurmCommandError as e:
                self._accounting_error = str(e)  # no slurmdbd: these apps are unknown
                break
            self._accounting_error = None
            by_leader: dict[str, list[SlurmJob]] = {}
            for job in parse_sacct(text):
                by_leader.setdefault(job.leader_id, []).append(job)
            for app_id in chunk:
                records = sorted(by_leader.get(app_id, []), key=lambda j: j.offset)
                if not records:
                    continue
                found[app_id] = records
                # slurmdbd may hold a placeholder (no name, no workdir) for a short job until
                # slurmctld sends its start record (up to a minute later): do not keep that
                if all(j.app_state.is_terminal() and j.workdir for j in records):
                    self._accounted[app_id] = (now, records)
                    if len(self._accounted) > 10_000:
                        self._accounted.popitem(last=False)
        return found

    @property
    def accounting_error(self) -> str | None:
        """Why the last ``sacct`` failed (None if it worked)."""
        return self._accounting_error

    # --- both ----------------------------------------------------------------------------

    def jobs(
        self, app_ids: Sequence[str], submitted_after: Mapping[str, float] | None = None
    ) -> dict[str, list[SlurmJob] | None]:
        """The job records of each app id (None: Slurm does not know it, or not any more).

        A snapshot older than ``ttl`` is refreshed, and so is one that cannot know an id: one
        newer than every job in it, or submitted (``submitted_after[id]``, a monotonic time)
        after it was taken.

        Raises:
            SlurmCommandError: the controller could not be asked.
        """
        submitted_after = submitted_after or {}
        with self._lock:
            now = time.monotonic()
            stale = now - self._snapshot_at > self.ttl
            for app_id in app_ids:
                if stale:
                    break
                if app_id in self._snapshot or not _is_job_id(app_id):
                    continue
                if (
                    int(app_id) > self._max_id
                    or submitted_after.get(app_id, float("-inf")) >= self._snapshot_at
                ):
                    stale = True
            if stale:
                self.refresh()
            snapshot = self._snapshot
            result: dict[str, list[SlurmJob] | None] = {
                app_id: snapshot.get(app_id) for app_id in app_ids
            }
            gone = [a for a, records in result.items() if records is None]
            # arrays whose finished tasks the controller already forgot: the rest of their
            # tasks is in accounting (the same one sacct call)
            partial = [a for a, records in result.items() if records and _array_gaps(records)]
            if gone or partial:
                accounted = self.accounting([*gone, *partial])
                for app_id in gone:
                    if app_id in accounted:
                        result[app_id] = accounted[app_id]
                for app_id in partial:
                    live = result[app_id] or []
                    seen = {j.array_task for j in live}
                    extra = [j for j in accounted.get(app_id, []) if j.array_task not in seen]
                    result[app_id] = [*live, *extra]
        return result


_QUERIES: dict[tuple[str, float], SlurmQuery] = {}
_QUERIES_LOCK = threading.Lock()


def get_query(ttl: float = 2.0) -> SlurmQuery:
    """The process-wide :class:`SlurmQuery` of the cluster ``$SLURM_CONF`` points at."""
    key = (os.environ.get("SLURM_CONF", ""), float(ttl))
    with _QUERIES_LOCK:
        query = _QUERIES.get(key)
        if query is None:
            query = _QUERIES[key] = SlurmQuery(ttl=ttl)
        return query
