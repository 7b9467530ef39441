"""Names, run options and the request of the ``local_cwd`` scheduler: per-replica commands, env, log paths and GPUs (no I/O)."""

from __future__ import annotations

import logging
import os
import shlex
import string
import subprocess
from dataclasses import dataclass, field
from typing import Any

from anylaunch.schedulers.common.roles import RANK0_ENV
from anylaunch.specs.api import (
    Role,
    macros,
)
from anylaunch.specs.errors import (
    AnylaunchError,
)
from anylaunch.specs.secrets import is_secret_env_name
from anylaunch.specs.structured_opts import StructuredOpts

log: logging.Logger = logging.getLogger(__name__)

BACKEND = "local_cwd"
_SUPERVISOR_MODULE = "anylaunch.schedulers.local.supervisor"
#: How long ``schedule`` waits for the supervisor to confirm it started.
DEFAULT_START_TIMEOUT_S = 30.0


class LocalSchedulerError(AnylaunchError):
    """The local scheduler could not do what was asked (e.g. its supervisor did not start)."""


@dataclass
class LocalOpts(StructuredOpts):
    """Run options of the ``local_cwd`` scheduler."""

    log_dir: str | None = None
    """Directory for replica logs, as {log_dir}/{app_id}/{role}/{replica}/{stdout,stderr,combined}.log (default: inside the app's state directory, removed with the app)."""

    prepend_cwd: bool = False
    """Prepend the working directory to the replicas' PATH (binaries there win over PATH); by default it is appended."""

    auto_set_cuda_visible_devices: bool = False
    """Give each replica its own CUDA_VISIBLE_DEVICES: the visible GPUs are split between replicas by their Resource.gpu (a no-op without GPUs)."""

    cancel_grace_s: float = 5.0
    """Seconds between SIGTERM and SIGKILL when cancelling, or stopping replicas for a retry."""


@dataclass
class LocalReplicaRequest:
    """How one replica is started: command, environment overrides, directory and log files."""

    role: str
    replica_id: int
    cmd: list[str]
    cwd: str
    stdout_log: str
    stderr_log: str
    combined_log: str
    #: Set on top of the launching process's environment. Not in repr: it may hold secrets.
    env: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass
class LocalRoleRequest:
    """The replicas of one role and its retry settings."""

    name: str
    max_retries: int
    retry_policy: str
    replicas: list[LocalReplicaRequest]
    #: The role as given (before macros), so describe() can return it.
    spec: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class LocalAppRequest:
    """The native request of ``local_cwd``: everything the supervisor needs to run the app."""

    app_id: str
    app_name: str
    app_dir: str
    log_dir: str
    prepend_cwd: bool
    cancel_grace_s: float
    roles: list[LocalRoleRequest]
    #: An array app's record (see :mod:`anylaunch.schedulers.local.arrays`); None otherwise.
    array: dict[str, Any] | None = field(default=None, repr=False)
    #: The job's metadata (:mod:`anylaunch.schedulers.common.job_metadata`): kept in the
    #: app's state dir, returned by describe().
    metadata: dict[str, str] = field(default_factory=dict)


def format_request(request: LocalAppRequest) -> str:
    """Readable form of a request: each replica's command shell-quoted, secret values masked.

    >>> rep = LocalReplicaRequest("w", 0, ["echo", "a b"], "/work", "/l/o", "/l/e", "/l/c",
    ...                           env={"API_TOKEN": "s3cr3t", "LR": "0.1"})
    >>> req = LocalAppRequest("x-1", "x", "/state/x-1", "/l", False, 5.0,
    ...                       [LocalRoleRequest("w", 0, "APPLICATION", [rep])])
    >>> print(format_request(req))
    local_cwd app x-1 (name: x)
      state dir: /state/x-1
      log dir: /l
      role w: 1 replica(s), max_retries=0, retry_policy=APPLICATION
        [0] echo 'a b'
            cwd: /work (appended to PATH)
            env: API_TOKEN=*** LR=0.1
            logs: /l/c (combined), /l/o (stdout), /l/e (stderr)
    """
    where = "prepended to" if request.prepend_cwd else "appended to"
    lines = [
        f"local_cwd app {request.app_id} (name: {request.app_name})",
        f"  state dir: {request.app_dir}",
        f"  log dir: {request.log_dir}",
    ]
    if request.metadata:
        lines.append("  metadata: " + " ".join(f"{k}={v}" for k, v in request.metadata.items()))
    for role in request.roles:
        lines.append(
            f"  role {role.name}: {len(role.replicas)} replica(s), "
            f"max_retries={role.max_retries}, retry_policy={role.retry_policy}"
        )
        for rep in role.replicas:
            env = " ".join(
                f"{k}={'***' if is_secret_env_name(k) else shlex.quote(v)}"
                for k, v in sorted(rep.env.items())
            )
            lines += [
                f"    [{rep.replica_id}] {shlex.join(rep.cmd)}",
                f"        cwd: {rep.cwd} ({where} PATH)",
                f"        env: {env}",
                f"        logs: {rep.combined_log} (combined), {rep.stdout_log} (stdout), "
                f"{rep.stderr_log} (stderr)",
            ]
    return "\n".join(lines)


def assign_gpus(gpus_per_replica: list[int], devices: list[str]) -> list[str | None]:
    """Splits ``devices`` between replicas in order; each takes as many as it requests.

    Returns each replica's CUDA_VISIBLE_DEVICES (None: leave unset). Nothing is assigned when
    there are no devices or fewer than requested.

    >>> assign_gpus([2, 0, 1], ["0", "1", "2", "3"])
    ['0,1', None, '2']
    >>> assign_gpus([1, 1], [])
    [None, None]
    """
    total = sum(max(g, 0) for g in gpus_per_replica)
    if not devices or total == 0:
        return [None] * len(gpus_per_replica)
    if total > len(devices):
        log.warning(
            "not setting CUDA_VISIBLE_DEVICES: the replicas request %d GPUs, %d are visible",
            total,
            len(devices),
        )
        return [None] * len(gpus_per_replica)
    assigned: list[str | None] = []
    start = 0
    for gpus in gpus_per_replica:
        if gpus <= 0:
            assigned.append(None)
            continue
        assigned.append(",".join(devices[start : start + gpus]))
        start += gpus
    return assigned


def _visible_gpus() -> list[str]:
    """GPU ids this process may use: $CUDA_VISIBLE_DEVICES, else ``nvidia-smi -L``, else none."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip()]
    import shutil

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run(
            [exe, "-L"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [
        str(i) for i, _ in enumerate(line for line in out.splitlines() if line.startswith("GPU"))
    ]


def _replica_request(
    role: Role, i: int, app_id: str, img_root: str, log_root: str, gpu: str | None
) -> LocalReplicaRequest:
    """Replica ``i`` of ``role``: macros substituted, rank-0 host and GPUs in its env."""
    # what macros.Values.apply(role) substitutes (args and env), without its deep copy of the
    # role, and only where there is a "$" at all
    mapping: dict[str, Any] | None = None

    def substitute(text: str) -> str:
        nonlocal mapping
        if "$" not in text:
            return text
        if mapping is None:
            values = macros.Values(
                img_root=img_root, app_id=app_id, replica_id=str(i), rank0_env=RANK0_ENV
            )
            mapping = values.to_dict()
        return string.Template(text).safe_substitute(mapping)

    args = [substitute(arg) for arg in role.args]
    env = {key: substitute(value) for key, value in role.env.items()}
    env[RANK0_ENV] = "localhost"
    env.setdefault("PYTHONUNBUFFERED", "1")  # lines reach the logs as they are printed
    if gpu is not None and "CUDA_VISIBLE_DEVICES" not in role.env:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    rep_dir = os.path.join(log_root, role.name, str(i))
    return LocalReplicaRequest(
        role=role.name,
        replica_id=i,
        cmd=[role.entrypoint, *args],
        cwd=img_root,
        stdout_log=os.path.join(rep_dir, "stdout.log"),
        stderr_log=os.path.join(rep_dir, "stderr.log"),
        combined_log=os.path.join(rep_dir, "combined.log"),
        env=env,
    )


def check_creatable_dir(field: str, path: str) -> None:
    """Rejects a directory that cannot exist or be written: an existing non-directory, a
    path below a file, or an ancestor this user may not write into. Creates nothing (a
    dryrun has no side effects).

    >>> check_creatable_dir("log_dir", "/tmp/anylaunch-logs/new/sub")
    >>> check_creatable_dir("log_dir", "/etc/hostname/logs")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidRunConfigException: log_dir='/etc/hostname/logs' is invalid: cannot be created: /etc/hostname is a file. Fix: pass a directory path (it is created if missing)
    """
    from anylaunch.specs.errors import InvalidRunConfigException

    target = os.path.abspath(os.path.expanduser(path))
    probe = target
    while not os.path.lexists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    problem = None
    if not os.path.isdir(probe):
        problem = (
            "is not a directory" if probe == target else f"cannot be created: {probe} is a file"
        )
    elif not os.access(probe, os.W_OK | os.X_OK):
        problem = f"{probe} is not writable by this user"
    if problem is not None:
        raise InvalidRunConfigException(
            field, path, problem, "pass a directory path (it is created if missing)"
        )
