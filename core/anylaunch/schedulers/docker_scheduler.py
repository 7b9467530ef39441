"""The ``local_docker`` scheduler: one container per replica on a Docker engine.

Every app gets its own bridge network; replica ``i`` of role ``r`` runs in the container
``{app_id}-{r}-{i}``, which the other replicas reach by that name (``ANYLAUNCH_RANK0_HOST``
names the first role's replica 0, see ``macros.rank0_env``). All state lives in the engine,
as container labels: any process (a second ``anylaunch status``, an orchestrator's trigger)
can describe, stream logs from, cancel, list and delete an app by its id, and the app keeps
running when the launching process exits.

Retries follow each role's ``RetryPolicy``: ``REPLICA`` uses the engine's ``on-failure``
restart policy (it happens with nobody watching); ``ROLE`` and ``APPLICATION`` restarts are
made by whichever process next describes the app (``Runner.wait`` does, so does
``anylaunch status``). Events that must outlive the caller (a cancel, a retry, the final
failure) are recorded as never-started "event" containers whose unique names make each event
happen once even when several processes watch the app.

The engine is found through ``DOCKER_HOST`` (or the ``docker_host`` argument). Images are not
pulled unless the engine lacks them. The ``docker`` SDK is imported only when the engine is
contacted: dry runs need neither the SDK nor an engine.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import logging
import os
import re
import shlex
import signal
import string
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from anylaunch.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    LogQuery,
    Scheduler,
    Stream,
    split_lines,
    split_lines_iterator,
)
from anylaunch.schedulers.dependencies import require_sdk
from anylaunch.schedulers.shared import (
    RANK0_ENV,
    aggregate_replica_states,
    is_secret_env_name,
    role_from_record,
    role_record,
)
from anylaunch.specs.api import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    BindMount,
    DeviceMount,
    ReplicaStatus,
    RetryPolicy,
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
from anylaunch.workspace.docker_workspace import (
    DockerWorkspaceMixin,
    DockerWorkspaceOpts,
    WorkspaceImageBuild,
    check_image_repo,
)

__all__ = [
    "BACKEND",
    "DEFAULT_START_TIMEOUT_S",
    "DockerAppRequest",
    "DockerContainerRequest",
    "DockerEngineUnavailableError",
    "DockerImageNotFoundError",
    "DockerOpts",
    "DockerScheduler",
    "DockerSchedulerError",
    "create_scheduler",
    "format_request",
    "make_app_id",
]

log: logging.Logger = logging.getLogger(__name__)
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
_ALPHABET = string.ascii_lowercase + string.digits
_UNSAFE = re.compile(r"[^a-z0-9-]+")
_APP_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# [host[:port]/]path[:tag][@digest], or an image id
_IMAGE_REF = re.compile(
    r"^(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-]+[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[0-9a-f]{64})?$|^(?:sha256:)?[0-9a-f]{12,64}$"
)
_VOLUME_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]+$")
_EXITED = re.compile(r"^Exited \((-?\d+)\)")
_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")
_POLL_MAX_S = 1.0


class DockerSchedulerError(AnylaunchError):
    """The local_docker scheduler could not do what was asked (the engine's reason is quoted)."""


class DockerEngineUnavailableError(DockerSchedulerError):
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
    import secrets  # not needed at import time

    cleaned = _UNSAFE.sub("-", app_name.lower()).strip("-")[:_MAX_NAME].strip("-") or "app"
    return f"{cleaned}-{''.join(secrets.choice(_ALPHABET) for _ in range(8))}"


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


def _mask_env(env: Iterable[str]) -> str:
    out = []
    for item in env:
        key, _, value = item.partition("=")
        out.append(f"{key}={'***' if is_secret_env_name(key) else shlex.quote(value)}")
    return " ".join(out)


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
    for c in request.containers:
        config, host = c.config, c.config.get("HostConfig", {})
        lines.append(f"  [{c.role}/{c.replica_id}] container {c.name}, image {config['Image']}")
        lines.append(f"      command: {shlex.join([*config['Entrypoint'], *config['Cmd']])}")
        lines.append(f"      env: {_mask_env(config.get('Env', []))}")
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


# ---------------------------------------------------------------------------------------------
# The engine's view of an app
# ---------------------------------------------------------------------------------------------


@dataclass
class _Container:
    """What describe needs of one container (replica or event)."""

    id: str
    name: str
    labels: dict[str, str]
    status: str  # created, running, paused, restarting, removing, exited, dead
    exit_code: int | None = None
    oom_killed: bool = False
    created: float = 0.0
    started: float = 0.0
    finished: float = 0.0
    restart_count: int = 0
    image_id: str = ""
    #: published ports: ``{"8080/tcp": "127.0.0.1:49153"}``
    ports: dict[str, str] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.labels.get(LABEL_KIND, _KIND_REPLICA)

    @property
    def role(self) -> str:
        return self.labels.get(LABEL_ROLE, "")

    @property
    def replica_id(self) -> int:
        return int(self.labels.get(LABEL_REPLICA_ID, "0"))

    @property
    def role_index(self) -> int:
        return int(self.labels.get(LABEL_ROLE_INDEX, "0"))

    @property
    def policy(self) -> RetryPolicy:
        return RetryPolicy(self.labels.get(LABEL_RETRY_POLICY, RetryPolicy.APPLICATION.value))

    @property
    def max_retries(self) -> int:
        return int(self.labels.get(LABEL_MAX_RETRIES, "0"))

    @property
    def event(self) -> str:
        return self.labels.get(LABEL_EVENT, "")

    @property
    def data(self) -> dict[str, Any]:
        try:
            loaded = json.loads(self.labels.get(LABEL_EVENT_DATA, "{}"))
        except ValueError:
            return {}
        return loaded if isinstance(loaded, dict) else {}

    @property
    def live(self) -> bool:
        return self.status in ("running", "paused", "restarting")

    @classmethod
    def from_inspect(cls, attrs: Mapping[str, Any]) -> _Container:
        state = attrs.get("State") or {}
        return cls(
            id=str(attrs["Id"]),
            name=str(attrs.get("Name", "")).lstrip("/"),
            labels=dict((attrs.get("Config") or {}).get("Labels") or {}),
            status=str(state.get("Status", "")),
            exit_code=state.get("ExitCode"),
            oom_killed=bool(state.get("OOMKilled")),
            created=_parse_time(attrs.get("Created")),
            started=_parse_time(state.get("StartedAt")),
            finished=_parse_time(state.get("FinishedAt")),
            restart_count=int(attrs.get("RestartCount") or 0),
            image_id=str(attrs.get("Image", "")),
            ports={
                port: f"{bound[0]['HostIp']}:{bound[0]['HostPort']}"
                for port, bound in ((attrs.get("NetworkSettings") or {}).get("Ports") or {}).items()
                if bound
            },
        )

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> _Container:
        """From a ``GET /containers/json`` entry (no start/finish times: ``list`` only)."""
        match = _EXITED.match(str(summary.get("Status", "")))
        names = summary.get("Names") or [""]
        return cls(
            id=str(summary["Id"]),
            name=str(names[0]).lstrip("/"),
            labels=dict(summary.get("Labels") or {}),
            status=str(summary.get("State", "")),
            exit_code=int(match[1]) if match else None,
            created=float(summary.get("Created") or 0),
            image_id=str(summary.get("ImageID", "")),
        )


@dataclass
class _Verdict:
    """The app's state as computed from its containers, and what must be done about it."""

    state: AppState
    replica_states: dict[str, AppState]  # by container id
    num_restarts: int
    msg: str = NONE
    structured_error_msg: str = NONE
    #: a failure that retries cover: restart these containers (trigger first in the data)
    retry: tuple[_Container, list[_Container]] | None = None
    #: a final failure to record (the failed container)
    fail: _Container | None = None
    #: containers to stop because the app is over (cancelled or failed)
    stop: list[_Container] = field(default_factory=list)
    #: containers a crashed restarter left stopped: start them
    resume: list[_Container] = field(default_factory=list)


def _evaluate(containers: Sequence[_Container], now: float, start_timeout: float) -> _Verdict:
    """Computes the app's state from its containers (a pure function of the engine's view)."""
    replicas = [c for c in containers if c.kind == _KIND_REPLICA]
    events = [c for c in containers if c.kind == _KIND_EVENT]
    cancelled = any(e.event == "cancel" for e in events)
    failed_event = next((e for e in events if e.event == "failed"), None)
    retries = [e for e in events if e.event == "retry"]
    num_restarts = len(retries) + sum(r.restart_count for r in replicas)

    def last_retry(r: _Container) -> _Container | None:
        covering = [
            e
            for e in retries
            if e.data.get("scope") == "app"
            or (e.data.get("scope") == "role" and e.data.get("role") == r.role)
        ]
        return max(covering, key=lambda e: e.created, default=None)

    states: dict[str, AppState] = {}
    stale: list[_Container] = []  # stopped for a retry, not restarted yet
    for r in replicas:
        retry = last_retry(r)
        if retry is not None and r.started and r.started < retry.created and not r.live:
            stale.append(r)
            states[r.id] = AppState.PENDING
        elif r.status in ("running", "paused"):
            states[r.id] = AppState.RUNNING
        elif r.status == "restarting":
            states[r.id] = AppState.PENDING  # the engine restarts it (REPLICA policy)
        elif r.status == "created":
            never = not r.started and now - r.created > start_timeout
            states[r.id] = AppState.FAILED if never else AppState.PENDING
        elif r.status in ("exited", "dead"):
            states[r.id] = AppState.SUCCEEDED if r.exit_code == 0 else AppState.FAILED
        else:  # "removing": being deleted
            states[r.id] = AppState.CANCELLED

    def verdict(state: AppState, **kwargs: Any) -> _Verdict:
        return _Verdict(state, states, num_restarts, **kwargs)

    live = [r for r in replicas if r.live]
    if failed_event is not None:
        data = failed_event.data
        for r in replicas:
            if r.id != data.get("container_id") and states[r.id] != AppState.SUCCEEDED:
                states[r.id] = AppState.CANCELLED
        return verdict(
            AppState.FAILED,
            msg=str(data.get("msg", "")) or NONE,
            structured_error_msg=str(data.get("structured_error_msg", NONE)),
            stop=live,
        )
    if replicas and all(s == AppState.SUCCEEDED for s in states.values()):
        return verdict(AppState.SUCCEEDED)
    if cancelled:
        for r in replicas:
            if states[r.id] != AppState.SUCCEEDED:
                states[r.id] = AppState.CANCELLED
        return verdict(AppState.CANCELLED, msg="cancelled by request", stop=live)

    failed = [r for r in replicas if states[r.id] == AppState.FAILED]
    if failed:
        trigger = min(failed, key=lambda r: (r.finished or r.created, r.role_index, r.replica_id))
        policy, scope = trigger.policy, "app"
        group = list(replicas)
        if policy == RetryPolicy.ROLE:
            scope, group = "role", [r for r in replicas if r.role == trigger.role]
        used = sum(
            1
            for e in retries
            if e.data.get("scope") == scope
            and (scope == "app" or e.data.get("role") == trigger.role)
        )
        if policy != RetryPolicy.REPLICA and used < trigger.max_retries:
            return verdict(AppState.RUNNING, retry=(trigger, group))
        return verdict(AppState.FAILED, fail=trigger)
    resume = []
    if stale:
        started_retry = max((e.created for e in retries), default=now)
        if now - started_retry > start_timeout:
            resume = stale  # whoever started that retry died before finishing it
    if stale:  # a retry in progress: the app runs on
        return verdict(AppState.RUNNING, resume=resume)
    # no retry or failure decision left to make: the generic rule of the replica states
    return verdict(aggregate_replica_states(states.values()))


# ---------------------------------------------------------------------------------------------
# The scheduler
# ---------------------------------------------------------------------------------------------


class DockerScheduler(DockerWorkspaceMixin, Scheduler[Mapping[str, CfgVal]]):
    """Runs each replica as a container on a Docker engine; the engine holds all state.

    Args:
        session_name: goes into app handles (``local_docker://{session_name}/{app_id}``)
        docker_host: the engine's address (default: ``$DOCKER_HOST``, else the SDK's default
            ``unix:///var/run/docker.sock``)
        start_timeout: seconds a created container may stay unstarted before it counts as
            failed (its launcher died)
        client: a ``docker.DockerClient`` to use instead of connecting
    """

    def __init__(
        self,
        session_name: str,
        docker_host: str | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        client: Any = None,
    ) -> None:
        super().__init__(BACKEND, session_name)
        if docker_host is not None and (not isinstance(docker_host, str) or not docker_host):
            raise InvalidSpecError(
                "docker_host",
                docker_host,
                "must be the engine's address",
                "pass e.g. unix:///var/run/docker.sock or tcp://127.0.0.1:2375",
            )
        if (
            isinstance(start_timeout, bool)
            or not isinstance(start_timeout, (int, float))
            or not start_timeout > 0
        ):
            raise InvalidSpecError(
                "start_timeout", start_timeout, "must be a positive number of seconds", "e.g. 30"
            )
        self._docker_host = docker_host
        self.start_timeout = float(start_timeout)
        self.__client = client

    # --- the engine -----------------------------------------------------------------------

    @property
    def docker_host(self) -> str:
        """The engine's address this scheduler uses."""
        return self._docker_host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"

    def _client(self) -> Any:
        """The Docker SDK client, connected (and the engine checked) on first use.

        Raises:
            MissingDependencyError: the ``docker`` package is not installed.
            DockerEngineUnavailableError: no engine answers at :attr:`docker_host`.
        """
        if self.__client is not None:
            return self.__client
        docker = require_sdk("docker", extra="docker", scheduler=BACKEND)
        try:
            if self._docker_host:
                client = docker.DockerClient(base_url=self._docker_host, version="auto")
            else:
                client = docker.from_env()
            client.api.ping()
        except Exception as e:  # the SDK raises DockerException, requests' or OSError here
            raise DockerEngineUnavailableError(
                f"no Docker engine answers at {self.docker_host} ({e}). Fix: start the engine "
                "(in this project: bash scripts/provision/10-docker.sh) or set DOCKER_HOST to "
                "a running one"
            ) from None
        self.__client = client
        return client

    def _workspace_docker_client(self) -> Any:
        return self._client()

    def close(self) -> None:
        """Closes the connection to the engine (it reconnects when used again)."""
        client, self.__client = self.__client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    # --- dryrun ---------------------------------------------------------------------------

    def _run_opts(self) -> runopts:
        return DockerOpts.as_runopts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Roles without resources are fine: containers then run without limits."""

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        opts = DockerOpts.from_cfg(cfg)
        check_image_repo(opts.image_repo)
        if opts.cancel_grace_s < 0:
            raise InvalidRunConfigException(
                "cancel_grace_s", opts.cancel_grace_s, "must be >= 0", "pass e.g. 5"
            )
        import fnmatch

        base_env: dict[str, str] = {}
        for pattern in opts.copy_env or []:
            base_env.update(
                {k: v for k, v in os.environ.items() if fnmatch.fnmatchcase(k, pattern)}
            )
        for key, value in (opts.env or {}).items():
            if not key or "=" in key or "\x00" in key + value:
                raise InvalidRunConfigException(
                    "env",
                    key,
                    "is not a variable name (or its value holds a NUL byte)",
                    "pass NAME:VALUE pairs whose names have no '='",
                )
            base_env[key] = value

        labels_seen: dict[str, str] = {}
        for role in app.roles:
            label = _role_label(role.name)
            if label in labels_seen:
                raise InvalidSpecError(
                    "AppDef.roles",
                    role.name,
                    f"its container names would clash with those of role {labels_seen[label]!r} "
                    f"(both become {label!r})",
                    "rename one of the roles",
                )
            labels_seen[label] = role.name
            if not _IMAGE_REF.match(role.image):
                raise InvalidSpecError(
                    f"Role[{role.name}].image",
                    role.image,
                    "is not a Docker image reference (local_docker runs each replica in a "
                    "container of this image)",
                    "pass an image such as busybox:latest or registry.example.com/team/app:1",
                )

        app_id = make_app_id(app.name)
        network = app_id
        common = {
            LABEL_APP_ID: app_id,
            LABEL_APP_NAME: app.name,
            LABEL_SESSION: self.session_name,
            LABEL_CANCEL_GRACE: str(float(opts.cancel_grace_s)),
        }
        rank0 = f"{app_id}-{_role_label(app.roles[0].name)}-0"
        containers = []
        for index, role in enumerate(app.roles):
            mounts, devices = _mounts(role)
            for i in range(role.num_replicas):
                name = f"{app_id}-{_role_label(role.name)}-{i}"
                values = macros.Values(
                    img_root="", app_id=app_id, replica_id=str(i), rank0_env=RANK0_ENV
                )
                replica = values.apply(role)
                env = {**base_env, **replica.env, RANK0_ENV: rank0}
                env.setdefault("PYTHONUNBUFFERED", "1")  # lines reach the logs as printed
                labels = {
                    **common,
                    LABEL_KIND: _KIND_REPLICA,
                    LABEL_ROLE: role.name,
                    LABEL_ROLE_INDEX: str(index),
                    LABEL_REPLICA_ID: str(i),
                    LABEL_RETRY_POLICY: role.retry_policy.value,
                    LABEL_MAX_RETRIES: str(role.max_retries),
                    LABEL_ROLE_SPEC: json.dumps(role_record(role), sort_keys=True),
                }
                config = _container_config(
                    replica, name, network, env, labels, mounts, devices, opts
                )
                containers.append(DockerContainerRequest(name, role.name, i, config))
        request = DockerAppRequest(
            app_id=app_id,
            app_name=app.name,
            network=network,
            cancel_grace_s=float(opts.cancel_grace_s),
            containers=containers,
            workspace_builds=self.workspace_builds(app),
            network_labels={**common, LABEL_KIND: "network"},
        )
        return AppDryRunInfo(request, format_request)

    # --- schedule -------------------------------------------------------------------------

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Builds the workspace images (if planned), creates the network and the containers,
        and starts them all at once. Returns the app id.

        Nothing is left behind when a step fails.

        Raises:
            DockerEngineUnavailableError: no engine answers.
            DockerImageNotFoundError: an image is neither in the engine nor pullable.
            WorkspaceBuildError: a workspace image could not be built or pushed.
            DockerSchedulerError: the engine refused a container (its reason is quoted).
        """
        request = dryrun_info.request
        if not isinstance(request, DockerAppRequest):
            raise InvalidSpecError(
                "dryrun_info.request",
                type(request).__name__,
                "is not a local_docker request",
                "create it with the local_docker scheduler's submit_dryrun",
            )
        client = self._client()
        docker = require_sdk("docker", extra="docker", scheduler=BACKEND)
        for line in self.build_workspace_images(request.workspace_builds):
            log.info("workspace: %s", line)
        for image in request.images:
            self._ensure_image(client, image)
        try:
            network_id = client.api.create_network(
                request.network,
                driver="bridge",
                labels=request.network_labels,
                check_duplicate=True,  # scheduling a request twice fails here, not later
            )["Id"]
        except docker.errors.APIError as e:
            raise DockerSchedulerError(
                f"could not create network {request.network} for app {request.app_id}: "
                f"{_engine_error(e)}. Fix: dry-run the app again (for a new app id)"
            ) from e
        created: list[str] = []
        refused: list[tuple[DockerContainerRequest, Exception]] = []
        for current in request.containers:
            try:
                response = client.api.create_container_from_config(
                    current.config, name=current.name
                )
            except docker.errors.APIError as e:
                refused.append((current, e))
                break
            created.append(response["Id"])

        def start(pair: tuple[DockerContainerRequest, str]) -> None:
            try:
                client.api.start(pair[1])
            except docker.errors.APIError as e:
                refused.append((pair[0], e))

        if not refused:
            # starting is the slow part (~0.3 s each): all at once
            _in_parallel(start, list(zip(request.containers, created, strict=True)))
        if refused:
            self._remove(client, created, [network_id])
            current, error = min(refused, key=lambda r: request.containers.index(r[0]))
            raise DockerSchedulerError(
                f"the engine refused container {current.name} (role {current.role!r}, replica "
                f"{current.replica_id}) of app {request.app_id}: {_engine_error(error)}. Fix: "
                "adjust the role (its resources, mounts or devices) to what this engine can run"
            ) from error
        return request.app_id

    def _ensure_image(self, client: Any, image: str) -> None:
        docker = require_sdk("docker", extra="docker", scheduler=BACKEND)
        try:
            client.api.inspect_image(image)
            return
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError as e:
            raise DockerImageNotFoundError(
                f"the engine cannot look up image {image!r}: {_engine_error(e)}. Fix: check the "
                "image reference"
            ) from None
        log.info("image %s is not in the engine; pulling it", image)
        try:
            client.api.pull(image)
            client.api.inspect_image(image)
        except docker.errors.APIError as e:
            raise DockerImageNotFoundError(
                f"image {image!r} is not in the Docker engine at {self.docker_host} and pulling "
                f"it failed: {_engine_error(e)}. Fix: build or load it into the engine (docker "
                "build / docker load / docker import), or make its registry reachable"
            ) from None

    @staticmethod
    def _remove(client: Any, container_ids: Iterable[str], networks: Iterable[str]) -> None:
        docker = require_sdk("docker", extra="docker", scheduler=BACKEND)
        for container_id in container_ids:
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(container_id, force=True, v=True)
        for network in networks:
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_network(network)

    # --- state ----------------------------------------------------------------------------

    def _summaries(self, app_id: str | None = None) -> list[dict[str, Any]]:
        label = LABEL_APP_ID if app_id is None else f"{LABEL_APP_ID}={app_id}"
        found: list[dict[str, Any]] = self._client().api.containers(
            all=True, filters={"label": label}
        )
        return found

    def _inspect_app(self, app_id: str) -> list[_Container]:
        docker = require_sdk("docker", extra="docker", scheduler=BACKEND)
        client = self._client()
        containers = []
        for summary in self._summaries(app_id):
            try:
                containers.append(
                    _Container.from_inspect(client.api.inspect_container(summary["Id"]))
                )
            except docker.errors.NotFound:
                continue  # removed meanwhile
        return containers

    def _stop(self, containers: Sequence[_Container], grace: float) -> None:
        """Stops containers in parallel: SIGTERM, then SIGKILL after ``grace`` seconds."""
        docker = require_sdk("docker", extra="docker", scheduler=BACKEND)
        client = self._client()

        def stop(c: _Container) -> None:
            with contextlib.suppress(docker.errors.APIError):  # gone already: fine
                client.api.stop(c.id, timeout=max(0, round(grace)))

        _in_parallel(stop, containers)

    def _record_event(
        self, app_id: str, name: str, event: str, data: Mapping[str, Any], like: _Container
    ) -> bool:
        """Creates the never-started container that records ``event``; False if it exists.

        Its unique name makes the event happen once, whichever process records it first.
        """
        docker = require_sdk("docker", extra="docker", scheduler=BACKEND)
        labels = {
            k: v
            for k, v in like.labels.items()
            if k in (LABEL_APP_ID, LABEL_APP_NAME, LABEL_SESSION, LABEL_CANCEL_GRACE)
        }
        labels.update(
            {
                LABEL_KIND: _KIND_EVENT,
                LABEL_EVENT: event,
                LABEL_EVENT_DATA: json.dumps(dict(data), sort_keys=True),
            }
        )
        config = {
            # the app's own image (it exists while its containers do); never started
            "Image": like.image_id,
            "Entrypoint": ["/anylaunch-event"],
            "Cmd": [],
            "Labels": labels,
            "HostConfig": {"NetworkMode": "none"},
        }
        try:
            self._client().api.create_container_from_config(config, name=name)
        except docker.errors.APIError as e:
            if e.status_code == 409:
                return False
            raise DockerSchedulerError(
                f"could not record the {event} of app {app_id} in the engine: "
                f"{_engine_error(e)}. Fix: check the engine's health (docker info)"
            ) from e
        return True

    def _act(self, app_id: str, containers: list[_Container], verdict: _Verdict) -> bool:
        """Carries out what the verdict asks (restart, record a failure, stop leftovers).

        Returns True when the engine's view changed and must be read again.
        """
        grace = float(containers[0].labels.get(LABEL_CANCEL_GRACE, "5"))
        if verdict.retry is not None:
            import hashlib

            trigger, group = verdict.retry
            key = hashlib.sha256(f"{trigger.id}:{trigger.finished}".encode()).hexdigest()[:12]
            scope = "role" if trigger.policy == RetryPolicy.ROLE else "app"
            data = {
                "scope": scope,
                "role": trigger.role,
                "replica_id": trigger.replica_id,
                "exit_code": trigger.exit_code,
            }
            if self._record_event(app_id, f"{app_id}.retry.{key}", "retry", data, trigger):
                log.info(
                    "app %s: replica %s/%d failed with %s; restarting its %s",
                    app_id,
                    trigger.role,
                    trigger.replica_id,
                    _describe_exit(trigger.exit_code or 0, trigger.oom_killed),
                    "role" if scope == "role" else "app",
                )
                self._stop([c for c in group if c.live], grace)
                self._start(group)
            return True
        if verdict.fail is not None:
            trigger = verdict.fail
            msg, structured = self._failure_message(trigger)
            data = {
                "container_id": trigger.id,
                "msg": msg,
                "structured_error_msg": structured,
            }
            self._record_event(app_id, f"{app_id}.failed", "failed", data, trigger)
            return True
        if verdict.resume:
            self._start(verdict.resume)
            return True
        if verdict.stop:
            self._stop(verdict.stop, grace)
            return True
        return False

    def _start(self, containers: Sequence[_Container]) -> None:
        docker = require_sdk("docker", extra="docker", scheduler=BACKEND)
        client = self._client()

        def start(c: _Container) -> None:
            try:
                client.api.start(c.id)
            except docker.errors.APIError as e:
                # left stopped: a later describe starts it again (see _Verdict.resume)
                log.warning("could not restart container %s: %s", c.name, _engine_error(e))

        _in_parallel(start, containers)

    def _failure_message(self, trigger: _Container) -> tuple[str, str]:
        if trigger.status == "created":
            reason = "never started (its launcher died before starting it)"
        else:
            reason = _describe_exit(trigger.exit_code or 0, trigger.oom_killed)
        retries = trigger.max_retries
        msg = (
            f"replica {trigger.role}/{trigger.replica_id} (container {trigger.name}) failed "
            f"with {reason}" + (f" after {retries} retries" if retries else "")
        )
        tail: list[str] = []
        with contextlib.suppress(Exception):  # best effort: the message stands without it
            raw = self._client().api.logs(trigger.id, stdout=False, stderr=True, tail=20)
            tail = [line.rstrip("\n") for line in split_lines(raw.decode("utf-8", "replace"))]
        structured = json.dumps(
            {
                "role": trigger.role,
                "replica_id": trigger.replica_id,
                "container": trigger.name,
                "exit_code": trigger.exit_code,
                "message": reason,
                "stderr_tail": tail,
            }
        )
        return msg, structured

    def _view(self, app_id: str) -> tuple[list[_Container], _Verdict] | None:
        """The app's containers and verdict, after doing what the verdict asked (bounded)."""
        if not isinstance(app_id, str) or not _APP_ID.match(app_id):
            return None
        for _ in range(5):
            containers = self._inspect_app(app_id)
            if not any(c.kind == _KIND_REPLICA for c in containers):
                return None
            verdict = _evaluate(containers, time.time(), self.start_timeout)
            if not self._act(app_id, containers, verdict):
                return containers, verdict
        return containers, verdict

    # --- queries --------------------------------------------------------------------------

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """The app's state, restarts, replica statuses (hostnames are container names) and
        roles, read from the engine; None for an unknown app.

        Describing also moves the app along: it restarts replicas a ROLE or APPLICATION
        retry covers, records a final failure and stops what is left of a failed app.
        """
        view = self._view(app_id)
        if view is None:
            return None
        containers, verdict = view
        replicas = sorted(
            (c for c in containers if c.kind == _KIND_REPLICA),
            key=lambda c: (c.role_index, c.replica_id),
        )
        by_role: dict[str, list[ReplicaStatus]] = {}
        roles: dict[str, Role] = {}
        for c in replicas:
            by_role.setdefault(c.role, []).append(
                ReplicaStatus(
                    id=c.replica_id,
                    state=verdict.replica_states[c.id],
                    role=c.role,
                    hostname=c.name,
                )
            )
            if c.role not in roles and LABEL_ROLE_SPEC in c.labels:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    roles[c.role] = role_from_record(json.loads(c.labels[LABEL_ROLE_SPEC]))
        first = replicas[0]
        return DescribeAppResponse(
            app_id=app_id,
            state=verdict.state,
            num_restarts=verdict.num_restarts,
            msg=verdict.msg,
            structured_error_msg=verdict.structured_error_msg,
            ui_url=None,
            metadata={
                "docker_host": self.docker_host,
                "network": app_id,
                "containers": ",".join(c.name for c in replicas),
                # where the host reaches each replica's port_map ports (role/replica:port=addr)
                "ports": ",".join(
                    f"{c.role}/{c.replica_id}:{port}={address}"
                    for c in replicas
                    for port, address in sorted(c.ports.items())
                ),
                "session": first.labels.get(LABEL_SESSION, ""),
                "app_name": first.labels.get(LABEL_APP_NAME, ""),
            },
            roles_statuses=[RoleStatus(role, reps) for role, reps in by_role.items()],
            roles=list(roles.values()),
        )

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """Every app on the engine (any session), oldest first, mostly from one engine call.

        States come from the container list (apps that retried are inspected); unlike
        describe, listing restarts nothing.
        """
        apps: dict[str, list[_Container]] = {}
        for summary in self._summaries():
            container = _Container.from_summary(summary)
            apps.setdefault(container.labels.get(LABEL_APP_ID, ""), []).append(container)
        now = time.time()
        found = []
        for app_id, containers in apps.items():
            replicas = [c for c in containers if c.kind == _KIND_REPLICA]
            if not replicas or not _APP_ID.match(app_id):
                continue
            if any(c.event == "retry" for c in containers):
                # telling a retry in progress from a new failure takes start times, which only
                # inspect has (apps that retried are few)
                containers = self._inspect_app(app_id)
            state = _evaluate(containers, now, self.start_timeout).state
            first = replicas[0]
            session = first.labels.get(LABEL_SESSION, self.session_name)
            found.append(
                (
                    min(c.created for c in replicas),
                    ListAppResponse(
                        app_id=app_id,
                        state=state,
                        app_handle=make_app_handle(self.backend, session, app_id),
                        name=first.labels.get(LABEL_APP_NAME, ""),
                    ),
                )
            )
        return [resp for _, resp in sorted(found, key=lambda item: item[0])]

    # --- control --------------------------------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        """Records the cancel, then stops the app's containers (SIGTERM, SIGKILL after the
        grace period); returns once they stopped."""
        containers = self._inspect_app(app_id)
        replicas = [c for c in containers if c.kind == _KIND_REPLICA]
        if not replicas:
            return
        self._record_event(app_id, f"{app_id}.cancel", "cancel", {}, replicas[0])
        grace = float(replicas[0].labels.get(LABEL_CANCEL_GRACE, "5"))
        self._stop([c for c in replicas if c.live], grace)

    def _delete_existing(self, app_id: str) -> None:
        """Stops the app if it runs, then removes its containers and its network."""
        containers = self._inspect_app(app_id)
        if not containers:
            return
        if any(c.live for c in containers):
            self._cancel_existing(app_id)
        client = self._client()
        networks = [
            n["Id"] for n in client.api.networks(filters={"label": f"{LABEL_APP_ID}={app_id}"})
        ]
        self._remove(client, [c.id for c in self._inspect_app(app_id)], networks)

    # --- logs -----------------------------------------------------------------------------

    def _log_replicas(self, app_id: str) -> dict[str, dict[int, Any]] | None:
        if not (isinstance(app_id, str) and _APP_ID.match(app_id)):
            return None
        replicas = [
            _Container.from_summary(s)
            for s in self._summaries(app_id)
            if (s.get("Labels") or {}).get(LABEL_KIND) == _KIND_REPLICA
        ]
        if not replicas:
            return None
        roles: dict[str, dict[int, Any]] = {}
        for c in replicas:
            roles.setdefault(c.role, {})[c.replica_id] = c
        return roles

    def _replica_log_lines(
        self, app_id: str, role_name: str, k: int, replica: Any, query: LogQuery
    ) -> Iterable[str]:
        """Lines of one replica from the engine: stdout, stderr or both interleaved as
        written; with ``should_tail`` it follows the replica (across its restarts) until the
        app ends."""
        want = {
            "stdout": query.stream in (Stream.STDOUT, Stream.COMBINED),
            "stderr": query.stream in (Stream.STDERR, Stream.COMBINED),
        }
        since_s = query.since.timestamp() if query.since is not None else None
        until_s = query.until.timestamp() if query.until is not None else None
        if query.should_tail:
            return self._follow(app_id, replica.id, want, since_s, until_s)
        return self._read(replica.id, want, since_s, until_s)

    def _read(
        self, container_id: str, want: dict[str, bool], since: float | None, until: float | None
    ) -> Iterable[str]:
        docker = require_sdk("docker", extra="docker", scheduler=BACKEND)
        kwargs: dict[str, Any] = dict(want)
        if since is not None and since > 0:
            kwargs["since"] = float(since)
        if until is not None:
            if until <= 0:
                return []
            kwargs["until"] = float(until)
        try:
            raw = self._client().api.logs(container_id, **kwargs)
        except docker.errors.NotFound:
            return []
        return split_lines(raw.decode("utf-8", "replace"))

    def _follow(
        self,
        app_id: str,
        container_id: str,
        want: dict[str, bool],
        since: float | None,
        until: float | None,
    ) -> Iterator[str]:
        """Follows a replica's log across reconnects and restarts until the app is over.

        Lines come with the engine's timestamps, so a reconnect resumes after the last line
        seen without repeating it.
        """
        docker = require_sdk("docker", extra="docker", scheduler=BACKEND)
        import requests
        import urllib3

        transient = (OSError, requests.exceptions.RequestException, urllib3.exceptions.HTTPError)
        client = self._client()
        last: tuple[str, float] | None = None  # (timestamp text, seconds) of the last line
        delay = 0.05
        while True:
            start = since if last is None else last[1] - 1e-6
            kwargs: dict[str, Any] = dict(want, stream=True, follow=True, timestamps=True)
            if start is not None and start > 0:
                kwargs["since"] = start
            if until is not None and until > 0:
                kwargs["until"] = float(until)
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            try:
                chunks = client.api.logs(container_id, **kwargs)
                for line in split_lines_iterator(decoder.decode(chunk) for chunk in chunks):
                    stamp, _, text = line.partition(" ")
                    seconds = _parse_time(stamp)
                    if last is not None and (seconds, stamp) <= (last[1], last[0]):
                        continue  # already yielded before a reconnect
                    if until is not None and seconds > until:
                        return
                    last = (stamp, seconds)
                    delay = 0.05
                    yield text
            except docker.errors.NotFound:
                return  # the app was deleted
            except transient as e:
                log.debug("log stream of %s broke (%s); reconnecting", container_id, e)
            if until is not None and time.time() > until + 1.0:
                return
            try:
                attrs = client.api.inspect_container(container_id)
            except docker.errors.NotFound:
                return
            running = (attrs.get("State") or {}).get("Status") in ("running", "restarting")
            if not running:
                desc = self.describe(app_id)
                if desc is None or desc.state.is_terminal():
                    return  # the stream ended after the container stopped: all lines are in
            time.sleep(delay)
            delay = min(delay * 2, _POLL_MAX_S)


def _in_parallel(fn: Callable[[_T], None], items: Sequence[_T]) -> None:
    """Calls ``fn`` on every item, several at a time (engine calls wait on the engine, not
    on us); an exception from ``fn`` is raised once all are done."""
    if len(items) <= 1:
        for item in items:
            fn(item)
        return
    from concurrent.futures import ThreadPoolExecutor

    # at most the SDK's connection pool size (10), so no connection is opened and discarded
    with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
        list(pool.map(fn, items))


def _engine_error(e: Exception) -> str:
    return str(getattr(e, "explanation", None) or e)


def _mounts(role: Role) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The role's mounts as the engine's ``Mounts`` and ``Devices`` (checked on this host)."""
    where = f"Role[{role.name}].mounts"
    mounts: list[dict[str, Any]] = []
    devices: list[dict[str, str]] = []
    for m in role.mounts:
        dst = m.dst_path
        if not dst.startswith("/"):
            raise InvalidSpecError(
                where, dst, "the path in the container must be absolute", "start it with '/'"
            )
        if isinstance(m, BindMount):
            src = os.path.abspath(os.path.expanduser(m.src_path))
            if not os.path.exists(src):
                raise InvalidSpecError(
                    where,
                    m.src_path,
                    "the bind mount's host path does not exist",
                    "create it, or mount an existing path",
                )
            mounts.append({"Type": "bind", "Source": src, "Target": dst, "ReadOnly": m.read_only})
        elif isinstance(m, VolumeMount):
            if not _VOLUME_NAME.match(m.src):
                raise InvalidSpecError(
                    where,
                    m.src,
                    "is not a volume name",
                    "use letters, digits, '_', '.', '-' (a host path needs type=bind)",
                )
            mounts.append(
                {"Type": "volume", "Source": m.src, "Target": dst, "ReadOnly": m.read_only}
            )
        elif isinstance(m, DeviceMount):
            if not os.path.exists(m.src_path):
                raise InvalidSpecError(
                    where,
                    m.src_path,
                    "the device does not exist on this host",
                    "mount an existing device",
                )
            devices.append(
                {
                    "PathOnHost": m.src_path,
                    "PathInContainer": dst,
                    "CgroupPermissions": m.permissions,
                }
            )
    return mounts, devices


def _container_config(
    role: Role,
    name: str,
    network: str,
    env: Mapping[str, str],
    labels: Mapping[str, str],
    mounts: list[dict[str, Any]],
    devices: list[dict[str, str]],
    opts: DockerOpts,
) -> dict[str, Any]:
    """The engine's create body for one replica (``role`` has its macros substituted)."""
    for key, value in env.items():
        if "\x00" in value:
            raise InvalidSpecError(
                f"Role[{role.name}].env[{key!r}]",
                "<value>",
                "contains a NUL byte, which no environment value can carry",
                "remove the NUL byte",
            )
    host: dict[str, Any] = {
        "NetworkMode": network,
        "Privileged": bool(opts.privileged),
        "Init": bool(opts.init),
    }
    resource = role.resource
    if not resource.is_null():
        if resource.cpu > 0:
            host["NanoCpus"] = int(resource.cpu * 1_000_000_000)
        if resource.memMB > 0:
            host["Memory"] = int(resource.memMB) << 20
        if resource.gpu > 0:
            host["DeviceRequests"] = [
                {
                    "Driver": "",
                    "Count": resource.gpu,
                    "DeviceIDs": None,
                    "Capabilities": [["gpu"]],
                    "Options": {},
                }
            ]
    if mounts:
        host["Mounts"] = mounts
    if devices:
        host["Devices"] = devices
    exposed: dict[str, dict[str, Any]] = {}
    if role.port_map:
        for port in role.port_map.values():
            exposed[f"{port}/tcp"] = {}
        # published on the loopback interface only, each to a free port the engine picks
        host["PortBindings"] = {p: [{"HostIp": "127.0.0.1", "HostPort": ""}] for p in exposed}
    if role.retry_policy == RetryPolicy.REPLICA and role.max_retries > 0:
        host["RestartPolicy"] = {"Name": "on-failure", "MaximumRetryCount": role.max_retries}
    config: dict[str, Any] = {
        "Image": role.image,
        "Entrypoint": [role.entrypoint],
        "Cmd": list(role.args),
        "Env": [f"{k}={v}" for k, v in env.items()],
        "Labels": dict(labels),
        "HostConfig": host,
    }
    if len(name) <= 63:
        config["Hostname"] = name
    if exposed:
        config["ExposedPorts"] = exposed
    return config


def create_scheduler(session_name: str, **kwargs: Any) -> DockerScheduler:
    """Creates the ``local_docker`` scheduler (the registry's factory).

    Accepts ``docker_host``, ``start_timeout`` and ``client``; other keyword arguments are
    ignored. Nothing connects to the engine until it is needed.

    >>> create_scheduler("demo").backend
    'local_docker'
    """
    return DockerScheduler(
        session_name,
        docker_host=kwargs.get("docker_host"),
        start_timeout=kwargs.get("start_timeout", DEFAULT_START_TIMEOUT_S),
        client=kwargs.get("client"),
    )
