"""Names, labels, run options and request building of the ``local_docker`` scheduler (no I/O)."""

from __future__ import annotations

import re
import shlex
import signal
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from anylaunch.schedulers.common.app_ids import random_suffix
from anylaunch.schedulers.common.job_metadata import JOB_METADATA_KEYS
from anylaunch.specs.api import AppDef, Role
from anylaunch.specs.errors import (
    AnylaunchError,
    BackendUnreachableError,
    InvalidRunConfigException,
    InvalidSpecError,
)
from anylaunch.specs.secrets import mask_env
from anylaunch.workspace.docker_workspace import (
    DockerWorkspaceOpts,
    WorkspaceImageBuild,
)

_T = TypeVar("_T")

BACKEND = "local_docker"
#: Seconds a container may stay created-but-not-started before it counts as failed (the
#: launcher died between creating and starting it), and before an interrupted restart is
#: finished by another process.
DEFAULT_START_TIMEOUT_S = 30.0

LABEL_APP_ID = "anylaunch.app-id"
LABEL_APP_NAME = "anylaunch.app-name"
LABEL_SESSION = "anylaunch.session"
LABEL_KIND = "anylaunch.kind"  # "replica" or "event"
LABEL_ROLE = "anylaunch.role"
LABEL_ROLE_INDEX = "anylaunch.role-index"
LABEL_REPLICA_ID = "anylaunch.replica-id"
LABEL_ROLE_SPEC = "anylaunch.role-spec"
LABEL_RETRY_POLICY = "anylaunch.retry-policy"
LABEL_MAX_RETRIES = "anylaunch.max-retries"
LABEL_CANCEL_GRACE = "anylaunch.cancel-grace-s"
LABEL_EVENT = "anylaunch.event"  # "cancel", "retry" or "failed"
LABEL_EVENT_DATA = "anylaunch.event-data"  # JSON

_KIND_REPLICA = "replica"
_KIND_EVENT = "event"
_MAX_NAME = 24  # of the app-name part of an app id: container names stay DNS-label sized
_UNSAFE = re.compile(r"[^a-z0-9-]+")
_APP_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_VOLUME_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]+$")
_EXITED = re.compile(r"^Exited \((-?\d+)\)")
_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")
_POLL_MAX_S = 1.0
_ENV_PATTERN = re.compile(r"[^=\x00-\x20\x7f]+")
#: The Docker engine refuses a container memory limit below 6 MiB ("Minimum memory limit
#: allowed is 6MB").
MIN_MEMORY_MB = 6


class DockerSchedulerError(AnylaunchError):
    """The local_docker scheduler could not do what was asked (the engine's reason is quoted)."""


class DockerEngineUnavailableError(DockerSchedulerError, BackendUnreachableError):
    """No Docker engine answers at ``DOCKER_HOST``."""


class DockerImageNotFoundError(DockerSchedulerError):
    """An image a role runs is not in the engine and could not be pulled."""


@dataclass
class DockerOpts(DockerWorkspaceOpts):
    """Run options of the ``local_docker`` scheduler."""

    copy_env: list[str] | None = None
    """Glob patterns of this process's environment variables to copy into every replica, e.g. AWS_*,HF_TOKEN (the role's env and the env option win)."""

    env: dict[str, str] | None = None
    """Environment variables for every replica, e.g. LOGLEVEL:DEBUG (the role's env wins)."""

    privileged: bool = False
    """Run the containers privileged (all devices and capabilities of the host)."""

    cancel_grace_s: float = 5.0
    """Seconds between SIGTERM and SIGKILL when stopping containers (cancel, failure, retry)."""

    init: bool = True
    """Run the engine's init (docker-init) as PID 1: it forwards SIGTERM to the entrypoint, which as PID 1 would ignore it, and reaps zombies."""

    def check(self, app: AppDef) -> None:
        """Raises InvalidRunConfigException (or InvalidSpecError) for what the engine refuses.

        >>> DockerOpts(copy_env=["AWS_*", " "]).check(AppDef("a", [Role("w", "img")]))
        Traceback (most recent call last):
        ...
        anylaunch.specs.errors.InvalidRunConfigException: copy_env=' ' is invalid: is not a variable name pattern (empty, or with '=', a space or a control character). Fix: pass glob patterns of variable names, e.g. AWS_*,HF_TOKEN
        """
        for pattern in self.copy_env or []:
            if not _ENV_PATTERN.fullmatch(pattern):
                raise InvalidRunConfigException(
                    "copy_env",
                    pattern,
                    "is not a variable name pattern (empty, or with '=', a space or a "
                    "control character)",
                    "pass glob patterns of variable names, e.g. AWS_*,HF_TOKEN",
                )
        for role in app.roles:
            mem = role.resource.memMB
            if not role.resource.is_null() and 0 < mem < MIN_MEMORY_MB:
                raise InvalidSpecError(
                    f"Role[{role.name}].resource.memMB",
                    mem,
                    f"the Docker engine's smallest memory limit is {MIN_MEMORY_MB} MiB",
                    f"ask for at least {MIN_MEMORY_MB} MiB (0: no limit)",
                )


@dataclass
class DockerContainerRequest:
    """One replica: its container name and the engine's create body (``POST /containers/create``)."""

    name: str
    role: str
    replica_id: int
    #: the create body; not in repr: its Env may hold secrets
    config: dict[str, Any] = field(repr=False)


@dataclass
class DockerAppRequest:
    """The native request of ``local_docker``: a network, its containers, workspace builds."""

    app_id: str
    app_name: str
    network: str
    cancel_grace_s: float
    containers: list[DockerContainerRequest]
    workspace_builds: list[WorkspaceImageBuild] = field(default_factory=list)
    #: labels of the per-app network
    network_labels: dict[str, str] = field(default_factory=dict)
    #: an array's: start only this many containers (the first); its runner starts the rest
    start_first: int | None = None

    @property
    def images(self) -> list[str]:
        """The distinct images the containers run, in order."""
        return list(dict.fromkeys(c.config["Image"] for c in self.containers))


def make_app_id(app_name: str) -> str:
    """Returns ``{app name as a DNS label}-{8 random lowercase alphanumerics}``.

    >>> app_id = make_app_id("My Train_v2")
    >>> app_id[:12], len(app_id)
    ('my-train-v2-', 20)
    """
    cleaned = _UNSAFE.sub("-", app_name.lower()).strip("-")[:_MAX_NAME].strip("-") or "app"
    return f"{cleaned}-{random_suffix()}"


def app_labels(
    app_id: str, app_name: str, session_name: str, cancel_grace_s: float
) -> dict[str, str]:
    """The labels every container and the network of an app carry."""
    return {
        LABEL_APP_ID: app_id,
        LABEL_APP_NAME: app_name,
        LABEL_SESSION: session_name,
        LABEL_CANCEL_GRACE: str(float(cancel_grace_s)),
    }


def replica_labels(
    labels: Mapping[str, str], role: Role, role_index: int, replica_id: int, record: str
) -> dict[str, str]:
    """The labels of a replica's container: the app's (``labels``) and what describe reads
    back of the replica (its role, indexes, retry policy and the role's ``record``).

    >>> app = app_labels("a-1", "a", "demo", 5)
    >>> labels = replica_labels(app, Role("w", "img"), 0, 2, "{}")
    >>> labels[LABEL_APP_ID], labels[LABEL_KIND], labels[LABEL_REPLICA_ID]
    ('a-1', 'replica', '2')
    """
    return {
        **labels,
        LABEL_KIND: _KIND_REPLICA,
        LABEL_ROLE: role.name,
        LABEL_ROLE_INDEX: str(role_index),
        LABEL_REPLICA_ID: str(replica_id),
        LABEL_RETRY_POLICY: role.retry_policy.value,
        LABEL_MAX_RETRIES: str(role.max_retries),
        LABEL_ROLE_SPEC: record,
    }


def _role_label(role_name: str) -> str:
    """The role's part of container names (a DNS label; role names may hold ``_`` and ``.``)."""
    return _UNSAFE.sub("-", role_name.lower()).strip("-") or "role"


def _describe_exit(code: int, oom_killed: bool = False) -> str:
    """Human form of a container's exit code.

    >>> _describe_exit(3), _describe_exit(143), _describe_exit(137, oom_killed=True)
    ('exit code 3', 'exit code 143 (SIGTERM)', 'exit code 137 (SIGKILL: out of memory)')
    """
    text = f"exit code {code}"
    if 128 < code < 128 + 65:
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            name = f"signal {code - 128}"
        text += f" ({name}{': out of memory' if oom_killed else ''})"
    elif oom_killed:
        text += " (out of memory)"
    return text


def _parse_time(value: str | None) -> float:
    """Seconds since the epoch of an engine timestamp (RFC 3339, nanoseconds); 0 for none.

    >>> _parse_time("2024-01-02T03:04:05.5Z"), _parse_time("0001-01-01T00:00:00Z")
    (1704164645.5, 0.0)
    """
    import calendar

    match = _TIME.match(value or "")
    if match is None or match[1].startswith("0001-"):
        return 0.0
    seconds = calendar.timegm(time.strptime(match[1], "%Y-%m-%dT%H:%M:%S"))
    if match[3] != "Z":
        sign = 1 if match[3][0] == "+" else -1
        seconds -= sign * (int(match[3][1:3]) * 3600 + int(match[3][4:6]) * 60)
    return seconds + (int(match[2]) / 10 ** len(match[2]) if match[2] else 0.0)


def _env_text(env: Iterable[str]) -> str:
    """A container's ``NAME=value`` env list as shown to humans: secret values masked (bare),
    the others shell-quoted.

    >>> _env_text(["API_TOKEN=s3cr3t", "MSG=hello world"])
    "API_TOKEN=*** MSG='hello world'"
    """
    values = {key: value for key, _, value in (item.partition("=") for item in env)}
    masked = mask_env(values)
    return " ".join(
        f"{key}={shown if shown != values[key] else shlex.quote(shown)}"
        for key, shown in masked.items()
    )


def format_request(request: DockerAppRequest) -> str:
    """Readable form of a request: each container's command, env (secrets masked), limits,
    mounts and ports, and the workspace build/push plan.

    >>> config = {"Image": "busybox:latest", "Entrypoint": ["sh"], "Cmd": ["-c", "echo hi"],
    ...           "Env": ["API_TOKEN=s3cr3t", "LR=0.1"], "HostConfig": {"NanoCpus": 10**9}}
    >>> req = DockerAppRequest("x-1", "x", "x-1", 5.0,
    ...                        [DockerContainerRequest("x-1-w-0", "w", 0, config)])
    >>> print(format_request(req))
    local_docker app x-1 (name: x) on network x-1
      [w/0] container x-1-w-0, image busybox:latest
          command: sh -c 'echo hi'
          env: API_TOKEN=*** LR=0.1
          limits: cpus=1
    """
    lines = [
        f"local_docker app {request.app_id} (name: {request.app_name}) on network {request.network}"
    ]
    for build in request.workspace_builds:
        for i, text in enumerate(build.summary().splitlines()):
            lines.append(f"  {'workspace: ' if i == 0 else '           '}{text}")
    labels = request.containers[0].config.get("Labels", {}) if request.containers else {}
    if metadata := {k: labels[k] for k in JOB_METADATA_KEYS if k in labels}:
        lines.append("  metadata: " + " ".join(f"{k}={v}" for k, v in metadata.items()))
    for c in request.containers:
        config, host = c.config, c.config.get("HostConfig", {})
        lines.append(f"  [{c.role}/{c.replica_id}] container {c.name}, image {config['Image']}")
        lines.append(f"      command: {shlex.join([*config['Entrypoint'], *config['Cmd']])}")
        lines.append(f"      env: {_env_text(config.get('Env', []))}")
        limits = []
        if host.get("NanoCpus"):
            limits.append(f"cpus={host['NanoCpus'] / 1e9:g}")
        if host.get("Memory"):
            limits.append(f"memory={host['Memory'] >> 20}MiB")
        for request_ in host.get("DeviceRequests") or []:
            limits.append(f"gpus={request_['Count']}")
        if host.get("Privileged"):
            limits.append("privileged")
        if limits:
            lines.append(f"      limits: {' '.join(limits)}")
        mounts = [
            f"{m['Type']} {m['Source']}:{m['Target']}{' (ro)' if m.get('ReadOnly') else ''}"
            for m in host.get("Mounts") or []
        ]
        mounts += [
            f"device {d['PathOnHost']}:{d['PathInContainer']} ({d['CgroupPermissions']})"
            for d in host.get("Devices") or []
        ]
        if mounts:
            lines.append(f"      mounts: {', '.join(mounts)}")
        if host.get("PortBindings"):
            ports = ", ".join(f"{p} -> 127.0.0.1:(any free port)" for p in host["PortBindings"])
            lines.append(f"      ports: {ports}")
        policy = host.get("RestartPolicy") or {}
        if policy.get("Name") == "on-failure":
            lines.append(f"      restart: on failure, up to {policy['MaximumRetryCount']} times")
    return "\n".join(lines)
