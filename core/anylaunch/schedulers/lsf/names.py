"""Names, run options, the request type and job descriptions of the ``lsf`` scheduler (no I/O)."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from anylaunch.schedulers.api import Stream
from anylaunch.schedulers.common.shell import heredoc
from anylaunch.specs.api import AppState
from anylaunch.specs.errors import AnylaunchError, BackendUnreachableError
from anylaunch.specs.structured_opts import StructuredOpts

BACKEND = "lsf"
#: The fields ``bjobs -o ... -json`` is asked for.
BJOBS_FIELDS = (
    "jobid jobindex job_name stat exit_code exit_reason exec_host job_description output_file "
    "pend_reason"
)
#: What each LSF job status means for a replica.
LSF_STATES: dict[str, AppState] = {
    "PEND": AppState.PENDING,
    "PROV": AppState.PENDING,  # the host is being provisioned
    "WAIT": AppState.PENDING,  # a chunk job waiting for its turn
    "PSUSP": AppState.PENDING,  # held (suspended while pending)
    "RUN": AppState.RUNNING,
    "USUSP": AppState.PENDING,  # suspended by its owner or an admin: not making progress
    "SSUSP": AppState.PENDING,  # suspended by LSF (load, preemption): may resume
    "DONE": AppState.SUCCEEDED,
    "EXIT": AppState.FAILED,
    "UNKWN": AppState.UNKNOWN,  # mbatchd lost contact with the execution host
    "ZOMBI": AppState.UNKNOWN,  # killed while its host was unreachable; becomes EXIT later
}
_SUSPENDED = {
    "PSUSP": "held by its owner or an admin while pending",
    "USUSP": "suspended by its owner or an admin",
    "SSUSP": "suspended by LSF (host load or preemption)",
}
_FINISHED = ("DONE", "EXIT")
#: Exit reasons of a job killed with bkill (by its owner or an admin): a cancel, not a failure.
_KILLED = ("TERM_OWNER", "TERM_ADMIN", "TERM_FORCE_OWNER", "TERM_FORCE_ADMIN")
_DESCRIPTION_TAG = "anylaunch"
_SUBMITTED = re.compile(r"Job <(\d+)> is submitted")
_QUEUE = re.compile(r"^[A-Za-z0-9_-]{1,59}$")
_PROJECT = re.compile(r"^[^\s\x00-\x1f\x7f\"'\\]{1,511}$")
_SHM = re.compile(r"^[0-9]+(\.[0-9]+)?[bkmgtpBKMGTP]?[bB]?$")
_SAFE_CHAR = re.compile(r"[A-Za-z0-9_.-]")
_SCRIPT_END = "ANYLAUNCH_JOB_SCRIPT"
#: Seconds a bsub/bjobs/bkill call may take.
COMMAND_TIMEOUT_S = 60.0
#: Seconds a replica waits for rank 0 to publish its host.
RANK0_WAIT_S = 300
#: Seconds a finished replica waits for its logs to be drained.
LOG_DRAIN_S = 5
DEFAULT_JOBDIR = "~/.anylaunch/lsf"


class LsfSchedulerError(AnylaunchError):
    """An LSF command failed or LSF answered something this scheduler cannot use."""


class LsfUnreachableError(LsfSchedulerError, BackendUnreachableError):
    """LSF could not be asked: its commands are missing or mbatchd did not answer."""


class LsfSubmitError(LsfSchedulerError):
    """A submission failed; the jobs already submitted for the app were killed."""


@dataclass
class LsfOpts(StructuredOpts):
    """Run options of the ``lsf`` scheduler."""

    lsf_queue: str | None = None
    """Queue to submit the jobs to (bsub -q); default: the cluster's default queue."""

    project: str | None = None
    """Project the jobs are charged to (bsub -P); default: the cluster's default project."""

    jobdir: str | None = None
    """Directory on a filesystem shared with the execution hosts for the apps' logs and rendezvous files, as {jobdir}/{app_id}/... (default: ~/.anylaunch/lsf)."""

    container_workdir: str | None = None
    """Working directory inside containers (docker run -w); default: the image's."""

    host_network: bool = False
    """Containers use the host's network and IPC namespaces (docker run --net=host --ipc=host); otherwise the roles' ports are published on the same host ports."""

    shm_size: str = "64m"
    """Size of /dev/shm in containers (docker run --shm-size), e.g. 64m or 2g."""


@dataclass
class LsfJob:
    """One ``bsub`` submission: one replica of one role."""

    role: str
    replica_id: int
    name: str
    #: bsub's options (after ``bsub``); the script comes on stdin.
    options: list[str]
    #: Where the replica's stdout.log, stderr.log and combined.log are written.
    log_dir: str
    #: The job script bsub reads from stdin. Not in repr: its env may hold secrets.
    script: str = field(repr=False)
    #: The script with the values of secret-looking env vars masked (for printing).
    display_script: str = field(default="", repr=False)
    #: For an array: the array indices the job's elements run (element ``i+1`` runs ``i``).
    indices: tuple[int, ...] = ()

    def log_path(self, stream: Stream) -> str:
        """Path of the replica's log of ``stream``."""
        return os.path.join(self.log_dir, f"{stream.value}.log")


@dataclass
class LsfRequest:
    """The native request of ``lsf``: one bsub per replica, rank 0 first."""

    app_id: str
    app_name: str
    session: str
    app_dir: str
    jobs: list[LsfJob]


def format_request(request: LsfRequest) -> str:
    """The request as the shell commands that would submit it (secret env values masked).

    Each job is a ``bsub`` whose options are shell-quoted, with its script as a here-document.

    >>> job = LsfJob("w", 0, "a-1-w-0", ["-J", "a-1-w-0", "-R", "span[hosts=1]"], "/j/a-1/w/0",
    ...              script="env TOKEN=s3cr3t run\\n", display_script="env 'TOKEN=***' run\\n")
    >>> print(format_request(LsfRequest("a-1", "a", "default", "/j/a-1", [job])), end="")
    # lsf app a-1 (name: a, session: default)
    # 1 job(s); logs and rendezvous files in /j/a-1
    <BLANKLINE>
    # role w, replica 0
    bsub -J a-1-w-0 -R 'span[hosts=1]' <<'ANYLAUNCH_JOB_SCRIPT'
    env 'TOKEN=***' run
    ANYLAUNCH_JOB_SCRIPT
    """
    lines = [
        f"# lsf app {request.app_id} (name: {request.app_name}, session: {request.session})",
        f"# {len(request.jobs)} job(s); logs and rendezvous files in {request.app_dir}",
    ]
    for job in request.jobs:
        lines += [
            "",
            f"# role {job.role}, replica {job.replica_id}",
            heredoc(
                f"bsub {shlex.join(job.options)}", job.display_script or job.script, _SCRIPT_END
            ),
        ]
    return "\n".join(lines) + "\n"


# --- job descriptions: how the app's jobs are found again ------------------------------------


def _encode(text: str) -> str:
    """Percent-encodes everything but ``[A-Za-z0-9_.-]`` (no spaces, quotes or ``*``).

    >>> _encode("my app/ü")
    'my%20app%2F%C3%BC'
    """
    return "".join(
        c if _SAFE_CHAR.fullmatch(c) else "".join(f"%{b:02X}" for b in c.encode()) for c in text
    )


def _decode(text: str) -> str:
    """Inverse of :func:`_encode`.

    >>> _decode("my%20app%2F%C3%BC")
    'my app/ü'
    """
    return re.sub(
        r"(?:%[0-9A-Fa-f]{2})+",
        lambda m: bytes.fromhex(m.group(0).replace("%", "")).decode("utf-8", "replace"),
        text,
    )


def job_description(
    app_id: str,
    role: str,
    replica_id: int,
    jobs: int,
    session: str,
    app_name: str,
    metadata: Mapping[str, str] | None = None,
) -> str:
    """The ``-Jd`` of a replica's job: ``anylaunch app=... role=... replica=... jobs=...``,
    then the job's ``metadata`` (its keys as they are, values percent-encoded).

    >>> job_description("echo-ab12", "worker", 1, 2, "my session", "echo", {"k/x": "<<NA>>"})
    'anylaunch app=echo-ab12 role=worker replica=1 jobs=2 session=my%20session name=echo k/x=%3C%3CNA%3E%3E'
    """
    text = (
        f"{_DESCRIPTION_TAG} app={app_id} role={role} replica={replica_id} jobs={jobs} "
        f"session={_encode(session)} name={_encode(app_name)}"
    )
    return "".join([text, *(f" {k}={_encode(v)}" for k, v in (metadata or {}).items())])


def parse_job_description(text: str) -> dict[str, str] | None:
    """Parses :func:`job_description`; None for the description of some other job.

    >>> parse_job_description("anylaunch app=a-1 role=w replica=0 jobs=1 session=s%2F1 name=a")
    {'app': 'a-1', 'role': 'w', 'replica': '0', 'jobs': '1', 'session': 's/1', 'name': 'a'}
    >>> parse_job_description("my own job") is None
    True
    """
    parts = text.split(" ")
    if not parts or parts[0] != _DESCRIPTION_TAG:
        return None
    fields: dict[str, str] = {}
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        if sep:
            fields[key] = _decode(value)
    required = ("app", "role", "replica", "jobs")
    if any(k not in fields for k in required) or not fields["replica"].isdigit():
        return None
    return fields
