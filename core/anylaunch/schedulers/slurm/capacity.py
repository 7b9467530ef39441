"""Whether Slurm can start an app now: ``sbatch --test-only`` with the app's very script.

``sbatch --test-only`` asks the controller where and when it would start the job, without
making one (no job record, nothing in ``squeue``). Slurm answers on stderr:

- ``sbatch: Job 7465 to start at 2026-11-28T03:21:31 using 1 processors on nodes node1 in
  partition debug`` (a heterogeneous job: ``... using 3 processors on node1``; an array: the
  first task's start), exit 0;
- ``allocation failure: Requested node configuration is not available`` (or another
  ``sbatch: error: ...``), exit 1: no node of the partition can ever take the request.

A start within :data:`START_MARGIN_S` seconds is a ``yes``; a later one means the nodes the
job needs are busy (it would wait in the queue), which placement reads as ``no`` for "can it
run now", with the expected start in the answer. A refusal is a ``no`` in Slurm's words. A
controller that cannot be reached raises (the runner turns that into ``unknown``).
"""

from __future__ import annotations

import re
import subprocess
from datetime import datetime

from anylaunch.schedulers.common.capacity import CanRun, Capacity
from anylaunch.schedulers.slurm.query import SlurmCommandError, run_slurm_process
from anylaunch.specs.api import AppDef
from anylaunch.specs.errors import BackendUnreachableError

__all__ = ["START_MARGIN_S", "TEST_ONLY_CMD", "asked", "parse_test_only", "run_test_only"]

#: A job Slurm would start within this many seconds counts as startable now (the controller
#: rounds to the second and may place it in its next scheduling pass).
START_MARGIN_S = 60.0
#: Asks the controller about the script on stdin without submitting it.
TEST_ONLY_CMD = ("sbatch", "--test-only")
_WILL_RUN = re.compile(
    r"Job (?P<id>\d+) to start at (?P<start>\S+) using (?P<cpus>\d+) processors on "
    r"(?:nodes )?(?P<nodes>\S+)(?: in partition (?P<partition>\S+))?"
)
# the controller could not be asked: no verdict about the app (the runner says unknown)
_UNREACHABLE = re.compile(
    r"unable to contact slurm controller|socket timed out|zero bytes were transmitted|"
    r"communication connection failure|standby mode|slurm_persist_conn|connection refused",
    re.IGNORECASE,
)


def parse_test_only(
    returncode: int, stderr: str, now: datetime, margin_s: float = START_MARGIN_S
) -> Capacity:
    """The answer of one ``sbatch --test-only`` (its exit code and stderr) at ``now`` (an
    aware datetime).

    >>> from datetime import timezone
    >>> now = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc).astimezone()
    >>> line = "sbatch: Job 7 to start at {} using 2 processors on nodes node1 in partition debug"
    >>> parse_test_only(0, line.format(now.strftime("%Y-%m-%dT%H:%M:%S")), now).can_run
    <CanRun.YES: 'yes'>
    >>> late = parse_test_only(0, line.format("2099-01-01T00:00:00"), now)
    >>> late.can_run, late.expected_start.year
    (<CanRun.NO: 'no'>, 2099)
    >>> print(parse_test_only(1, "allocation failure: Requested node configuration is not "
    ...                       "available", now).reason)
    Slurm refuses the request: allocation failure: Requested node configuration is not available

    Raises:
        BackendUnreachableError: the controller could not be asked.
        SlurmCommandError: sbatch said something this parser does not know.
    """
    text = "; ".join(line.strip() for line in stderr.splitlines() if line.strip())
    if returncode != 0:
        if _UNREACHABLE.search(text):
            raise BackendUnreachableError(
                "slurm",
                f"`sbatch --test-only` could not reach the controller: {text[:1000]}",
                "check that slurmctld is up (`scontrol ping`) and that SLURM_CONF points at "
                "the cluster's slurm.conf",
            )
        return Capacity(
            CanRun.NO, f"Slurm refuses the request: {text[:1000] or 'no reason given'}", calls=1
        )
    match = _WILL_RUN.search(stderr)
    if match is None:
        raise SlurmCommandError(
            f"`sbatch --test-only` printed no start time: {text[:1000]!r}. Fix: check the "
            "cluster's job_submit plugins and sbatch defaults (SBATCH_* env vars)"
        )
    try:
        # sbatch prints its own local time, without a zone
        start = datetime.fromisoformat(match["start"]).astimezone()
    except ValueError:
        raise SlurmCommandError(
            f"`sbatch --test-only` printed a start time that is not one: {match['start']!r}"
        ) from None
    where = f"{match['cpus']} CPU(s) on {match['nodes']}"
    if match["partition"]:
        where += f" in partition {match['partition']}"
    wait = (start - now).total_seconds()
    if wait <= margin_s:
        return Capacity(CanRun.YES, f"Slurm would start it now: {where}", start, calls=1)
    return Capacity(
        CanRun.NO,
        f"Slurm would start it only in {wait:.0f}s, at {start.isoformat(timespec='seconds')}"
        f" on {where}: the resources it needs are busy until then",
        start,
        calls=1,
    )


def asked(app: AppDef) -> str:
    """What each role asks for, to go with Slurm's refusal (which names no role).

    >>> from anylaunch.specs import Resource, Role
    >>> asked(AppDef("a", [Role("w", "", num_replicas=2, resource=Resource(64, 0, 512))]))
    'w: 2 replica(s) of 64 CPU, 512 MB, 0 GPU'
    """
    return "; ".join(
        f"{role.name}: {role.num_replicas} replica(s) of {max(role.resource.cpu, 0):g} CPU, "
        f"{max(role.resource.memMB, 0)} MB, {max(role.resource.gpu, 0)} GPU"
        for role in app.roles
    )


def run_test_only(script: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Runs ``sbatch --test-only`` with ``script`` on stdin (no job is made).

    Raises:
        SlurmCommandError: sbatch is missing or did not answer in time.
    """
    return run_slurm_process(TEST_ONLY_CMD, timeout, stdin=script)
