"""The ``lsf`` scheduler: every replica is an IBM Spectrum LSF job submitted with ``bsub``.

Each replica of each role becomes one job (``bsub -J {app_id}-{role}-{replica}``) whose job
script reaches ``bsub`` on stdin, so no argument is ever interpreted by a shell other than the
quoted script itself. Its job description (``-Jd``) carries the app id, role, replica index,
job count and session, so any process can find the app's jobs with one
``bjobs -a -o ... -json -Jd 'anylaunch app={app_id} *'`` call: describe, list, logs and cancel
keep no local state.

Requests: ``-n`` for ``Resource.cpu``, ``-R "span[hosts=1] rusage[mem={memMB}MB/job]"`` (the
unit is explicit: a bare number means ``LSF_UNIT_FOR_LIMITS``, KB by default), ``-gpu
"num={gpu}"``, ``-q``/``-P`` from the run options. The rank-0 host: the first role's replica 0
writes its host name to ``{jobdir}/{app_id}/rank0_host`` and every other job (submitted with
``-w 'started("{rank 0 job}")'``) reads it into ``$ANYLAUNCH_RANK0_HOST``. ``jobdir`` must
therefore be on a filesystem shared by the submission and execution hosts, as on any HPC
cluster; the replicas' logs are written there too, as
``{jobdir}/{app_id}/{role}/{replica}/{stdout,stderr,combined}.log`` (LSF's own job report goes
to ``lsf.out``/``lsf.err`` next to them).

Images: an empty image or a path (``/...``, ``./...``, ``~...``, ``.``) is a directory on the
shared filesystem that the job runs in; anything else is a container image run with
``docker run`` on the execution host (mounts, ports, ``--shm-size``, ``--gpus``).

A replica that fails (or is killed) fails the app: the first ``describe`` that sees it kills
the app's remaining jobs (LSF does not link separate jobs), so nothing keeps running. POSIX
``sh``, ``mkfifo``, ``mktemp``, ``tee`` and ``awk`` must exist on the execution hosts.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anylaunch.schedulers import local_state as ls
from anylaunch.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    LogQuery,
    Scheduler,
    Stream,
)
from anylaunch.schedulers.file_tail import follow, iter_lines
from anylaunch.schedulers.shared import (
    RANK0_ENV,
    aggregate_replica_states,
    check_no_nul,
    is_secret_env_name,
)
from anylaunch.specs.api import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    BindMount,
    DeviceMount,
    ReplicaStatus,
    Role,
    RoleStatus,
    VolumeMount,
    macros,
    make_app_handle,
)
from anylaunch.specs.errors import (
    AnylaunchError,
    InvalidRunConfigException,
    InvalidSpecError,
)
from anylaunch.specs.runopts import CfgVal, runopts
from anylaunch.specs.structured_opts import StructuredOpts

__all__ = [
    "BJOBS_FIELDS",
    "LSF_STATES",
    "RANK0_ENV",
    "LsfJob",
    "LsfOpts",
    "LsfRequest",
    "LsfScheduler",
    "LsfSchedulerError",
    "LsfSubmitError",
    "app_state",
    "create_scheduler",
    "format_request",
    "job_description",
    "parse_job_description",
    "replica_state",
]

log: logging.Logger = logging.getLogger(__name__)

BACKEND = "lsf"
#: The fields ``bjobs -o ... -json`` is asked for.
BJOBS_FIELDS = (
    "jobid job_name stat exit_code exit_reason exec_host job_description output_file pend_reason"
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
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
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
            f"bsub {shlex.join(job.options)} <<'{_SCRIPT_END}'",
            (job.display_script or job.script).rstrip("\n"),
            _SCRIPT_END,
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
    app_id: str, role: str, replica_id: int, jobs: int, session: str, app_name: str
) -> str:
    """The ``-Jd`` of a replica's job: ``anylaunch app=... role=... replica=... jobs=...``.

    >>> job_description("echo-ab12", "worker", 1, 2, "my session", "echo")
    'anylaunch app=echo-ab12 role=worker replica=1 jobs=2 session=my%20session name=echo'
    """
    return (
        f"{_DESCRIPTION_TAG} app={app_id} role={role} replica={replica_id} jobs={jobs} "
        f"session={_encode(session)} name={_encode(app_name)}"
    )


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


# --- states ------------------------------------------------------------------------------------


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

    @property
    def state(self) -> AppState:
        return replica_state(self.stat, self.exit_reason)

    @property
    def label(self) -> str:
        return f"{self.role}/{self.replica_id} (LSF job {self.job_id})"

    @property
    def log_dir(self) -> str:
        return os.path.dirname(self.output_file)


def _record(raw: Mapping[str, Any]) -> _Record | None:
    desc = parse_job_description(str(raw.get("JOB_DESCRIPTION", "")))
    if desc is None or not raw.get("JOBID"):
        return None
    host = str(raw.get("EXEC_HOST") or "").split(":")[0]
    return _Record(
        job_id=str(raw["JOBID"]),
        stat=str(raw.get("STAT", "")),
        role=desc["role"],
        replica_id=int(desc["replica"]),
        jobs=int(desc["jobs"]) if desc["jobs"].isdigit() else 0,
        app_id=desc["app"],
        session=desc.get("session", ""),
        app_name=desc.get("name", ""),
        exit_code=str(raw.get("EXIT_CODE") or ""),
        exit_reason=str(raw.get("EXIT_REASON") or ""),
        host=host.split("*")[-1],  # "4*hostA" in some outputs
        output_file=str(raw.get("OUTPUT_FILE") or ""),
        pend_reason=str(raw.get("PEND_REASON") or "").strip(),
    )


def _latest(records: Iterable[_Record]) -> list[_Record]:
    """One record per replica (the newest job, if a replica was ever submitted twice)."""
    by_replica: dict[tuple[str, int], _Record] = {}
    for rec in records:
        key = (rec.role, rec.replica_id)
        if key not in by_replica or int(rec.job_id) > int(by_replica[key].job_id):
            by_replica[key] = rec
    return sorted(by_replica.values(), key=lambda r: int(r.job_id))


# --- building the request ----------------------------------------------------------------------


def _is_directory_image(image: str) -> bool:
    return image == "" or image.startswith(("/", ".", "~"))


def _check_path(
    where: str, path: str, fix: str, error: type[InvalidSpecError] = InvalidSpecError
) -> None:
    if _CONTROL.search(path) or "%" in path:
        raise error(
            where,
            path,
            "contains a control character or '%' (LSF expands %J, %I, ... in job paths)",
            fix,
        )


def _validate_opts(opts: LsfOpts) -> None:
    if opts.lsf_queue is not None and not _QUEUE.match(opts.lsf_queue):
        raise InvalidRunConfigException(
            "lsf_queue",
            opts.lsf_queue,
            "is not an LSF queue name (letters, digits, '_' and '-', at most 59)",
            "pass a queue that `bqueues` lists, e.g. normal",
        )
    if opts.project is not None and not _PROJECT.match(opts.project):
        raise InvalidRunConfigException(
            "project",
            opts.project,
            "is not an LSF project name (no spaces, quotes or control characters, at most 511)",
            "pass e.g. my_project",
        )
    if not _SHM.match(opts.shm_size):
        raise InvalidRunConfigException(
            "shm_size", opts.shm_size, "is not a docker size", "pass e.g. 64m or 2g"
        )
    if opts.container_workdir is not None and (
        not opts.container_workdir.startswith("/") or _CONTROL.search(opts.container_workdir)
    ):
        raise InvalidRunConfigException(
            "container_workdir",
            opts.container_workdir,
            "must be an absolute path without control characters",
            "pass e.g. /workspace",
        )
    if opts.jobdir is not None and not opts.jobdir.strip():
        raise InvalidRunConfigException(
            "jobdir", opts.jobdir, "is empty", "pass a directory, e.g. /shared/$USER/anylaunch"
        )


def _resource_options(role: Role) -> list[str]:
    res = role.resource
    options: list[str] = []
    if res.cpu > 0:
        options += ["-n", str(res.cpu)]
    # all slots on one host; memory per job with an explicit unit (bare numbers mean
    # LSF_UNIT_FOR_LIMITS, KB by default, and per-task reservation would multiply it by -n)
    req = "span[hosts=1]"
    if res.memMB > 0:
        req += f" rusage[mem={res.memMB}MB/job]"
    options += ["-R", req]
    if res.gpu > 0:
        options += ["-gpu", f"num={res.gpu}"]
    return options


def _docker_command(role: Role, name: str, env_names: Sequence[str], opts: LsfOpts) -> list[str]:
    where = f"Role[{role.name}]"
    if role.image.startswith("-") or any(c.isspace() for c in role.image):
        raise InvalidSpecError(
            f"{where}.image", role.image, "is not a container image name", "e.g. python:3.11"
        )
    cmd = ["docker", "run", "--rm", f"--name=anylaunch-{name}"]
    if opts.host_network:
        cmd += ["--net=host", "--ipc=host"]
    else:
        for port in sorted(set(role.port_map.values())):
            cmd += ["-p", f"{port}:{port}"]
    cmd.append(f"--shm-size={opts.shm_size}")
    if opts.container_workdir:
        cmd += ["-w", opts.container_workdir]
    for i, mount in enumerate(role.mounts):
        if isinstance(mount, (BindMount, VolumeMount)):
            src = mount.src_path if isinstance(mount, BindMount) else mount.src
            for value in (src, mount.dst_path):
                if "," in value or '"' in value or _CONTROL.search(value):
                    raise InvalidSpecError(
                        f"{where}.mounts[{i}]",
                        value,
                        "contains ',', '\"' or a control character, which docker --mount "
                        "cannot take",
                        "rename the path",
                    )
            kind = "bind" if isinstance(mount, BindMount) else "volume"
            spec = f"type={kind},src={src},dst={mount.dst_path}"
            cmd += ["--mount", spec + (",readonly" if mount.read_only else "")]
        elif isinstance(mount, DeviceMount):
            cmd.append(f"--device={mount.src_path}:{mount.dst_path}:{mount.permissions}")
    res = role.resource
    if res.cpu > 0:
        cmd.append(f"--cpus={res.cpu}")
    if res.memMB > 0:
        cmd.append(f"--memory={res.memMB}m")
    if res.gpu > 0:
        # LSF puts the allocated GPUs in CUDA_VISIBLE_DEVICES; all GPUs are mounted in host
        # order, so passing the variable through keeps the job on its own
        cmd += ["--gpus=all", "-e", "CUDA_VISIBLE_DEVICES"]
    for env_name in env_names:
        cmd += ["-e", env_name]  # the value comes from the job's env, never on a command line
    cmd += [f"--entrypoint={role.entrypoint}", role.image, *role.args]
    return cmd


def _job_script(
    *,
    app_id: str,
    job_name: str,
    role: Role,
    replica_id: int,
    app_dir: str,
    log_dir: str,
    workdir: str | None,
    rank0_name: str | None,
    env: Mapping[str, str],
    command: list[str],
    in_container: bool,
    mask: bool,
) -> str:
    """The POSIX sh job script of one replica (every value shell-quoted)."""
    q = shlex.quote
    assignments = [
        q(f"{k}={'***' if mask and is_secret_env_name(k) else v}") for k, v in env.items()
    ]
    lines = [
        "#!/bin/sh",
        f"# anylaunch app {app_id}: role {role.name}, replica {replica_id} (job {job_name})",
        f"a={q(app_dir)}",
        f"d={q(log_dir)}",
        "# the replica writes to fds 3 and 4: stdout.log and stderr.log get its output as it is,",
        "# combined.log a line at a time (awk writes whole lines, so no line is ever split).",
        "# This shell keeps its own stdout/stderr (LSF's -o/-e files) for its own messages.",
        'f=$(mktemp -d "${TMPDIR:-/tmp}/anylaunch.XXXXXX") || exit 1',
        'mkfifo "$f/o" "$f/e" "$f/co" "$f/ce" || exit 1',
        'LC_ALL=C awk \'{ print; fflush() }\' <"$f/co" >>"$d/combined.log" &',
        'LC_ALL=C awk \'{ print; fflush() }\' <"$f/ce" >>"$d/combined.log" &',
        'tee -a "$d/stdout.log" >"$f/co" <"$f/o" &',
        "t1=$!",
        'tee -a "$d/stderr.log" >"$f/ce" <"$f/e" &',
        "t2=$!",
        'exec 3>"$f/o" 4>"$f/e"',
        "# every pipe is open at both ends now: the directory can go (nothing left behind)",
        'rm -rf "$f"',
    ]
    if rank0_name is None:
        lines += [
            "# rank 0: publish this host for the other replicas",
            "h=$(hostname) || exit 1",
            'printf \'%s\\n\' "$h" >"$a/.rank0_host.$$" && '
            'mv -f "$a/.rank0_host.$$" "$a/rank0_host" || exit 1',
        ]
    else:
        lines += [
            f"# wait for rank 0 (job {rank0_name}) to publish its host",
            "i=0",
            'while [ ! -s "$a/rank0_host" ]; do',
            "  i=$((i + 1))",
            f'  if [ "$i" -gt {RANK0_WAIT_S} ]; then',
            f'    echo "anylaunch: rank 0 (job {rank0_name}) did not write $a/rank0_host '
            f'within {RANK0_WAIT_S}s (is jobdir shared with every execution host?)" >&4',
            "    exit 1",
            "  fi",
            "  sleep 1",
            "done",
            'h=$(cat "$a/rank0_host")',
        ]
    run = " ".join(["env", *assignments, f'"{RANK0_ENV}=$h"', shlex.join(command)])
    to_logs = ">&3 2>&4 3>&- 4>&-"  # the replica does not inherit fds 3 and 4 themselves
    if in_container:
        container = f"anylaunch-{job_name}"
        lines += [
            f"{run} {to_logs} &",
            "p=$!",
            "# a kill (bkill) stops the container too: killing the docker client would not",
            f"trap 'docker kill {q(container)} >/dev/null 2>&1' INT TERM",
            "rc=0",
            'wait "$p" || rc=$?',
            'while kill -0 "$p" 2>/dev/null; do rc=0; wait "$p" || rc=$?; done',
        ]
    else:
        assert workdir is not None
        lines += [
            f"cd {q(workdir)} 2>&4 || exit 1",
            f"{run} {to_logs}",
            "rc=$?",
        ]
    lines += [
        "# close the pipes and wait until the logs are complete; a process the replica left",
        f"# behind may hold them open: stop waiting after {LOG_DRAIN_S}s (LSF ends it anyway)",
        "exec 3>&- 4>&-",
        f'( (sleep {LOG_DRAIN_S}; kill "$t1" "$t2") >/dev/null 2>&1 & )',
        "wait",
        'exit "$rc"',
    ]
    return "\n".join(lines) + "\n"


def _jobdir(opts: LsfOpts) -> str:
    path = os.path.abspath(os.path.expanduser(opts.jobdir or DEFAULT_JOBDIR))
    _check_path(
        "jobdir",
        path,
        "pick a directory without control characters or '%'",
        InvalidRunConfigException,
    )
    return path


def _role_workdir(role: Role, opts: LsfOpts) -> tuple[str | None, str]:
    """The role's working directory (None: it runs in a container) and its img_root."""
    where = f"Role[{role.name}]"
    if not _is_directory_image(role.image):
        return None, opts.container_workdir or ""
    workdir = os.path.abspath(os.path.expanduser(role.image or "."))
    _check_path(f"{where}.image", workdir, "use a directory without '%' in its path")
    if role.mounts:
        raise InvalidSpecError(
            f"{where}.mounts",
            role.mounts,
            "mounts need a container image, and the role's image is a directory",
            "give the role a container image, or drop the mounts (directories on the "
            "shared filesystem are visible as they are)",
        )
    if role.entrypoint.startswith("-") or "=" in role.entrypoint:
        raise InvalidSpecError(
            f"{where}.entrypoint",
            role.entrypoint,
            "starts with '-' or contains '=', which `env` would take as an option or a variable",
            "use the program's path, e.g. ./my=tool as /abs/path/my=tool",
        )
    return workdir, workdir


def _replica_env(replica: Role) -> dict[str, str]:
    """The replica's env (macros applied), checked for what a job script cannot carry."""
    where = f"Role[{replica.name}]"
    env = dict(replica.env)
    env.setdefault("PYTHONUNBUFFERED", "1")  # lines reach the logs as they are printed
    env.pop(RANK0_ENV, None)  # set from rank 0's host at run time
    check_no_nul(f"{where}.entrypoint", replica.entrypoint)
    for j, arg in enumerate(replica.args):
        check_no_nul(f"{where}.args[{j}]", arg)
    for key, value in env.items():
        check_no_nul(f"{where}.env[{key!r}]", value, secret=is_secret_env_name(key))
        if key.startswith("-"):
            raise InvalidSpecError(
                f"{where}.env",
                key,
                "starts with '-', which `env` and `docker run -e` take as an option",
                "rename the variable",
            )
    return env


def _build_request(app: AppDef, opts: LsfOpts, session: str) -> LsfRequest:
    app_id = ls.make_app_id(app.name)
    app_dir = os.path.join(_jobdir(opts), app_id)
    total = sum(role.num_replicas for role in app.roles)
    rank0_name = f"{app_id}-{app.roles[0].name}-0"
    jobs: list[LsfJob] = []
    for role in app.roles:
        workdir, img_root = _role_workdir(role, opts)
        if role.max_retries > 0:
            log.warning(
                "the lsf scheduler does not restart replicas: Role[%s].max_retries=%d is ignored",
                role.name,
                role.max_retries,
            )
        for k in range(role.num_replicas):
            name = f"{app_id}-{role.name}-{k}"
            values = macros.Values(
                img_root=img_root, app_id=app_id, replica_id=str(k), rank0_env=RANK0_ENV
            )
            replica = values.apply(role)
            env = _replica_env(replica)
            if workdir is None:
                command = _docker_command(replica, name, [*env, RANK0_ENV], opts)
            else:
                command = [replica.entrypoint, *replica.args]
            log_dir = os.path.join(app_dir, role.name, str(k))
            is_rank0 = not jobs
            options = [
                "-J",
                name,
                "-Jd",
                job_description(app_id, role.name, k, total, session, app.name),
            ]
            if opts.lsf_queue:
                options += ["-q", opts.lsf_queue]
            if opts.project:
                options += ["-P", opts.project]
            options += _resource_options(role)
            options += [
                "-o",
                os.path.join(log_dir, "lsf.out"),
                "-e",
                os.path.join(log_dir, "lsf.err"),
            ]
            options += ["-cwd", workdir or app_dir]
            if not is_rank0:
                options += ["-w", f'started("{rank0_name}")']
            script_args: dict[str, Any] = {
                "app_id": app_id,
                "job_name": name,
                "role": role,
                "replica_id": k,
                "app_dir": app_dir,
                "log_dir": log_dir,
                "workdir": workdir,
                "rank0_name": None if is_rank0 else rank0_name,
                "env": env,
                "command": command,
                "in_container": workdir is None,
            }
            jobs.append(
                LsfJob(
                    role=role.name,
                    replica_id=k,
                    name=name,
                    options=options,
                    log_dir=log_dir,
                    script=_job_script(**script_args, mask=False),
                    display_script=_job_script(**script_args, mask=True),
                )
            )
    return LsfRequest(app_id=app_id, app_name=app.name, session=session, app_dir=app_dir, jobs=jobs)


# --- the scheduler -----------------------------------------------------------------------------


class LsfScheduler(Scheduler[Mapping[str, CfgVal]]):
    """Runs each replica as an LSF job; describes, lists, cancels and reads logs through
    ``bjobs``, ``bkill`` and the shared job directory.

    Args:
        session_name: goes into app handles (``lsf://{session_name}/{app_id}``)
    """

    log_timestamps = False  # LSF output files carry no timestamps

    def __init__(self, session_name: str) -> None:
        super().__init__(BACKEND, session_name)

    # --- LSF commands ---------------------------------------------------------------------

    @staticmethod
    def _command(name: str) -> str:
        exe = shutil.which(name)
        if exe is None:
            raise LsfSchedulerError(
                f"`{name}` was not found on PATH. Fix: run on an LSF submission host, or "
                "source LSF's profile.lsf so that bsub, bjobs and bkill are on PATH"
            )
        return exe

    def _run(self, argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                argv,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
                stdin=None if stdin is not None else subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as e:
            raise LsfSchedulerError(
                f"`{shlex.join(argv[:1] + argv[1:3])} ...` did not answer within "
                f"{COMMAND_TIMEOUT_S:.0f}s. Fix: check that LSF's mbatchd is reachable (`lsid`)"
            ) from e
        except OSError as e:
            raise LsfSchedulerError(f"could not run {argv[0]}: {e}") from e

    def _bjobs(self, description_pattern: str) -> list[_Record]:
        """The jobs (finished ones too) whose description matches ``description_pattern``."""
        argv = [
            self._command("bjobs"),
            "-a",
            "-o",
            BJOBS_FIELDS,
            "-json",
            "-Jd",
            description_pattern,
        ]
        proc = self._run(argv)
        out = proc.stdout.strip()
        if out.startswith("{"):
            import json  # only needed here: keeps the module's import cheap

            try:
                data = json.loads(out)
            except ValueError as e:
                raise LsfSchedulerError(f"bjobs printed invalid JSON ({e}): {out[:500]}") from e
            raw = data.get("RECORDS") if isinstance(data, dict) else None
            if not isinstance(raw, list):
                raise LsfSchedulerError(f"bjobs printed JSON without RECORDS: {out[:500]}")
            records = [_record(r) for r in raw if isinstance(r, dict) and "ERROR" not in r]
            return [r for r in records if r is not None]
        err = proc.stderr.strip()
        if (
            "No job found" in err
            or "No unfinished job found" in err
            or (proc.returncode == 0 and not out)
        ):
            return []
        raise LsfSchedulerError(
            f"`{shlex.join(argv)}` failed (exit {proc.returncode}): {err or out}. "
            "Fix: check that LSF is reachable (`lsid`, `bjobs`)"
        )

    def _app_records(self, app_id: str) -> list[_Record]:
        return [r for r in self._bjobs(f"{_DESCRIPTION_TAG} app={app_id} *") if r.app_id == app_id]

    def _all_records(self) -> dict[str, list[_Record]]:
        by_app: dict[str, list[_Record]] = {}
        for rec in self._bjobs(f"{_DESCRIPTION_TAG} app=*"):
            by_app.setdefault(rec.app_id, []).append(rec)
        return by_app

    def _bkill(self, job_ids: Sequence[str]) -> None:
        """Kills jobs; a job that already finished (or is gone) is not an error."""
        if not job_ids:
            return
        argv = [self._command("bkill"), *job_ids]
        proc = self._run(argv)
        if proc.returncode == 0:
            return
        problems = [
            line
            for line in proc.stderr.splitlines()
            if line.strip()
            and "already finished" not in line
            and "No matching job found" not in line
        ]
        if problems:
            raise LsfSchedulerError(
                f"`{shlex.join(argv)}` failed (exit {proc.returncode}): {' '.join(problems)}"
            )

    # --- dryrun and schedule --------------------------------------------------------------

    def _run_opts(self) -> runopts:
        return LsfOpts.as_runopts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Roles without resources are fine: the job then takes LSF's defaults (one slot)."""

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        opts = LsfOpts.from_cfg(cfg)
        _validate_opts(opts)
        return AppDryRunInfo(_build_request(app, opts, self.session_name), format_request)

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Submits every job (rank 0 first) and returns the app id.

        All or nothing: when a bsub fails, the jobs already submitted are killed before the
        error is raised.

        Raises:
            LsfSubmitError: a bsub failed (the message quotes LSF's answer); the app was rolled
                back.
            LsfSchedulerError: the request was already scheduled, or LSF is unreachable.
        """
        request = dryrun_info.request
        if not isinstance(request, LsfRequest):
            raise InvalidSpecError(
                "dryrun_info.request",
                type(request).__name__,
                "is not an lsf request",
                "create it with the lsf scheduler's submit_dryrun",
            )
        bsub = self._command("bsub")
        if self._app_records(request.app_id):
            raise LsfSchedulerError(
                f"app {request.app_id} was already scheduled. Fix: dry-run the app again to get "
                "a new app id"
            )
        for job in request.jobs:
            os.makedirs(job.log_dir, exist_ok=True)
            for stream in Stream:  # empty logs up front: log_iter works from the start
                with open(job.log_path(stream), "ab"):
                    pass
        submitted: list[str] = []
        try:
            failure = self._submit_jobs(bsub, request.jobs, submitted)
        except BaseException:  # interrupted (e.g. Ctrl-C): never leave half an app running
            self._rollback(request.app_id, submitted)
            raise
        if failure is not None:
            i, problem = failure
            job = request.jobs[i]
            rollback = self._rollback(request.app_id, submitted)
            raise LsfSubmitError(
                f"submitting app {request.app_id} failed at job {i + 1} of "
                f"{len(request.jobs)} ({job.name}, role {job.role} replica {job.replica_id}): "
                f"{problem}. {rollback} Fix: correct what LSF rejected (see the bsub commands "
                "with --dryrun) and run the app again"
            )
        return request.app_id

    def _submit_jobs(
        self, bsub: str, jobs: Sequence[LsfJob], submitted: list[str]
    ) -> tuple[int, str] | None:
        """Runs one bsub per job in order, appending each job id to ``submitted``; stops at
        the first failure and returns its index and LSF's answer."""
        for i, job in enumerate(jobs):
            try:
                proc = self._run([bsub, *job.options], stdin=job.script)
            except LsfSchedulerError as e:
                return i, str(e)
            match = _SUBMITTED.search(proc.stdout)
            if proc.returncode != 0 or match is None:
                answer = (proc.stderr.strip() or proc.stdout.strip() or "(no output)")[-2000:]
                return i, f"bsub exited with {proc.returncode}: {answer}"
            submitted.append(match.group(1))
        return None

    def _rollback(self, app_id: str, submitted: list[str]) -> str:
        """Kills the app's submitted jobs; returns what happened, for the error message."""
        ids = list(submitted)
        try:  # a bsub that timed out may still have submitted its job: look the app up
            ids += [r.job_id for r in self._app_records(app_id) if r.job_id not in ids]
        except LsfSchedulerError as e:
            log.warning("could not look up the jobs of %s to roll back: %s", app_id, e)
        if not ids:
            return "No job of the app had been submitted."
        try:
            self._bkill(ids)
        except LsfSchedulerError as e:
            return (
                f"Rolling back FAILED: the jobs {', '.join(ids)} may still run ({e}); "
                f"kill them with `bkill {' '.join(ids)}`."
            )
        return f"The {len(ids)} job(s) already submitted were killed ({', '.join(ids)})."

    # --- queries --------------------------------------------------------------------------

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """The app's state and per-replica statuses from one ``bjobs`` call; None if LSF has
        no job of the app (never submitted, or forgotten after CLEAN_PERIOD).

        A failed or killed replica fails (or cancels) the app and this kills its other jobs.
        """
        if not ls.is_valid_app_id(app_id):
            return None
        return self._describe(app_id, self._app_records(app_id))

    def describe_many(self, app_ids: Sequence[str]) -> dict[str, DescribeAppResponse | None]:
        """Describes several apps with a single ``bjobs`` call."""
        if len(app_ids) <= 1:
            return {app_id: self.describe(app_id) for app_id in app_ids}
        by_app = self._all_records()
        return {app_id: self._describe(app_id, by_app.get(app_id, [])) for app_id in app_ids}

    def _describe(self, app_id: str, records: list[_Record]) -> DescribeAppResponse | None:
        if not records:
            return None
        jobs = _latest(records)
        state = app_state(r.state for r in jobs)
        live = [r for r in jobs if r.stat not in _FINISHED]
        if state in (AppState.FAILED, AppState.CANCELLED) and live:
            try:  # LSF does not link the jobs: stop the others so nothing keeps running
                self._bkill([r.job_id for r in live])
            except LsfSchedulerError as e:
                log.warning("could not kill the remaining jobs of %s: %s", app_id, e)
        by_role: dict[str, list[ReplicaStatus]] = {}
        for rec in sorted(jobs, key=lambda r: (int(r.job_id), r.replica_id)):  # rank 0 first
            by_role.setdefault(rec.role, []).append(
                ReplicaStatus(
                    id=rec.replica_id,
                    state=rec.state,
                    role=rec.role,
                    hostname=rec.host,
                    structured_error_msg=(
                        f"exit code {rec.exit_code or '?'}"
                        + (f" ({rec.exit_reason})" if rec.exit_reason else "")
                        if rec.state == AppState.FAILED
                        else NONE
                    ),
                )
            )
        expected = max(r.jobs for r in jobs)
        app_dir = os.path.dirname(os.path.dirname(jobs[0].log_dir)) if jobs[0].log_dir else ""
        return DescribeAppResponse(
            app_id=app_id,
            state=state,
            num_restarts=0,
            msg=_message(state, jobs, expected) or NONE,
            structured_error_msg=NONE,
            metadata={
                "app_dir": app_dir,
                "lsf_jobs": " ".join(f"{r.role}/{r.replica_id}={r.job_id}" for r in jobs),
            },
            roles_statuses=[RoleStatus(role, reps) for role, reps in by_role.items()],
        )

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """Every anylaunch app that LSF still knows, oldest first (``cfg`` is ignored)."""
        apps = []
        for app_id, records in self._all_records().items():
            jobs = _latest(records)
            apps.append(
                (
                    min(int(r.job_id) for r in jobs),
                    ListAppResponse(
                        app_id=app_id,
                        state=app_state(r.state for r in jobs),
                        app_handle=make_app_handle(self.backend, jobs[0].session, app_id),
                        name=jobs[0].app_name,
                    ),
                )
            )
        return [resp for _, resp in sorted(apps, key=lambda item: item[0])]

    # --- control --------------------------------------------------------------------------

    def cancel(self, app_id: str) -> None:
        """Kills every job of the app that has not finished (``bkill``); returns at once.

        A no-op for an unknown or finished app. The app ends CANCELLED once LSF has ended
        the jobs (SIGINT and SIGTERM, then SIGKILL after JOB_TERMINATE_INTERVAL).
        """
        if not ls.is_valid_app_id(app_id):
            return
        live = [r.job_id for r in _latest(self._app_records(app_id)) if r.stat not in _FINISHED]
        self._bkill(live)

    def _cancel_existing(self, app_id: str) -> None:
        self.cancel(app_id)

    # --- logs -----------------------------------------------------------------------------

    def _log_replicas(self, app_id: str) -> dict[str, dict[int, Any]] | None:
        records = _latest(self._app_records(app_id)) if ls.is_valid_app_id(app_id) else []
        if not records:
            return None
        replicas: dict[str, dict[int, Any]] = {}
        for rec in records:
            replicas.setdefault(rec.role, {})[rec.replica_id] = rec
        return replicas

    def _replica_log_lines(
        self, app_id: str, role_name: str, k: int, replica: Any, query: LogQuery
    ) -> Iterable[str]:
        """Lines of one replica, read from the job directory (which must be reachable from
        this host): stdout, stderr or both interleaved. With ``should_tail`` it follows the
        log until the app ended and the log is drained."""
        log_dir = replica.log_dir
        if not log_dir or not os.path.isdir(log_dir):
            raise InvalidSpecError(
                "jobdir",
                log_dir,
                f"the log directory of {role_name}/{k} is not visible on this host",
                "read the logs on a host that shares the job directory with the cluster",
            )
        path = os.path.join(log_dir, f"{query.stream.value}.log")
        return self._read_log(app_id, path, query.should_tail)

    def _read_log(self, app_id: str, path: str, should_tail: bool) -> Iterator[str]:
        last_check = [0.0, False]  # ask LSF at most once a second while following

        def is_done() -> bool:
            now = time.monotonic()
            if now - float(last_check[0]) >= 1.0:
                records = _latest(self._app_records(app_id))
                last_check[:] = [now, all(r.stat in _FINISHED for r in records)]
            return bool(last_check[1])

        chunks = follow(path, 0, is_done if should_tail else None, check_every=1.0)
        for _, raw in iter_lines(chunks):
            yield raw.decode("utf-8", "replace")


def _message(state: AppState, jobs: list[_Record], expected: int) -> str:
    """A one-line explanation of the app's state for people."""
    parts: list[str] = []
    failed = [r for r in jobs if r.state == AppState.FAILED]
    cancelled = [r for r in jobs if r.state == AppState.CANCELLED]
    if failed:
        parts += [
            f"replica {r.label} exited with code {r.exit_code or '?'}"
            + (f" ({r.exit_reason})" if r.exit_reason else "")
            + f"; its stderr is in {os.path.join(r.log_dir, 'stderr.log')}"
            for r in failed
        ]
    if cancelled:
        parts.append("killed: " + ", ".join(r.label for r in cancelled))
    if state in (AppState.FAILED, AppState.CANCELLED) and any(
        r.stat not in _FINISHED for r in jobs
    ):
        parts.append("the app's other jobs are being killed")
    for r in jobs:
        if r.stat in _SUSPENDED:
            parts.append(f"replica {r.label} is {_SUSPENDED[r.stat]}")
        elif r.stat == "UNKWN":
            parts.append(f"LSF lost contact with the host of replica {r.label} (UNKWN)")
        elif r.stat == "ZOMBI":
            parts.append(
                f"replica {r.label} was killed while its host was unreachable (ZOMBI); LSF "
                "ends it once the host answers"
            )
        elif r.stat in ("PEND", "PROV", "WAIT") and state == AppState.PENDING and r.pend_reason:
            parts.append(f"replica {r.label} is pending: {r.pend_reason}")
    if len(jobs) < expected:
        parts.append(f"LSF knows {len(jobs)} of the app's {expected} jobs")
    return "; ".join(parts)


def create_scheduler(session_name: str, **kwargs: Any) -> LsfScheduler:
    """Creates the ``lsf`` scheduler (the registry's factory); other keyword arguments are
    ignored.

    >>> create_scheduler("demo").backend
    'lsf'
    """
    return LsfScheduler(session_name)
