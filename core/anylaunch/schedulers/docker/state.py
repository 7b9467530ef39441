"""How the containers of a ``local_docker`` app add up to its state and its description, and
what must be done about it (pure functions of the engine's view: retries, failures, resumes).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anylaunch.schedulers.api import DescribeAppResponse
from anylaunch.schedulers.common.job_metadata import JOB_METADATA_KEYS
from anylaunch.schedulers.common.roles import role_from_record
from anylaunch.schedulers.common.states import aggregate_replica_states, role_statuses
from anylaunch.schedulers.docker.request import (
    _EXITED,
    _KIND_EVENT,
    _KIND_REPLICA,
    LABEL_APP_NAME,
    LABEL_EVENT,
    LABEL_EVENT_DATA,
    LABEL_KIND,
    LABEL_MAX_RETRIES,
    LABEL_REPLICA_ID,
    LABEL_RETRY_POLICY,
    LABEL_ROLE,
    LABEL_ROLE_INDEX,
    LABEL_ROLE_SPEC,
    LABEL_SESSION,
    _describe_exit,
    _parse_time,
)
from anylaunch.specs.api import (
    NONE,
    AppState,
    ReplicaStatus,
    RetryPolicy,
    Role,
)
from anylaunch.specs.secrets import MASK, Redactor, is_secret_env_name

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
    #: the container's environment (inspect only; it holds the real secret values)
    env: dict[str, str] = field(default_factory=dict, repr=False)

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
            env={
                key: value
                for key, _, value in (
                    str(item).partition("=")
                    for item in (attrs.get("Config") or {}).get("Env") or []
                )
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
    """Computes the app's state from its containers (a pure function of the engine's view).

    Each replica container maps to a state of its own (a container ``created`` longer than
    ``start_timeout`` ago and never started counts as failed). Facts only this backend has
    then decide, in order: a recorded final failure (FAILED); every replica succeeded
    (SUCCEEDED, even if a cancel came later); a recorded cancel (CANCELLED); a failed replica
    that a ROLE or APPLICATION retry still covers (RUNNING, and restart its group) or not
    (FAILED, and record it); a retry in progress (RUNNING). Otherwise the generic rule,
    :func:`~anylaunch.schedulers.common.states.aggregate_replica_states`, gives the app's state.
    """
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


def failure_message(trigger: _Container, stderr_tail: list[str]) -> tuple[str, str]:
    """The app's failure message and its structured form (JSON) for the replica that failed
    it for good. The secret env values of the replica are masked in its stderr tail: the
    message is recorded in a label, which anyone who can ``docker inspect`` reads.

    >>> c = _Container("c1", "app-w-0", {LABEL_ROLE: "w", LABEL_MAX_RETRIES: "2"}, "exited", 3,
    ...                env={"HF_TOKEN": "s3cr3t"})
    >>> msg, structured = failure_message(c, ["token s3cr3t refused"])
    >>> msg
    'replica w/0 (container app-w-0) failed with exit code 3 after 2 retries'
    >>> json.loads(structured)["stderr_tail"]
    ['token *** refused']
    """
    redact = Redactor.for_env(trigger.env)
    if trigger.status == "created":
        reason = "never started (its launcher died before starting it)"
        category = "infrastructure"
    else:
        reason = _describe_exit(trigger.exit_code or 0, trigger.oom_killed)
        category = _category(trigger.exit_code or 0, trigger.oom_killed)
    retries = trigger.max_retries
    msg = (
        f"replica {trigger.role}/{trigger.replica_id} (container {trigger.name}) failed "
        f"with {reason}" + (f" after {retries} retries" if retries else "")
    )
    structured = json.dumps(
        {
            "role": trigger.role,
            "replica_id": trigger.replica_id,
            "container": trigger.name,
            "exit_code": trigger.exit_code,
            "message": reason,
            "category": category,
            "stderr_tail": [redact(line) for line in stderr_tail],
        }
    )
    return msg, structured


def _category(exit_code: int, oom_killed: bool) -> str:
    """The failure category of a container's exit (see ``anylaunch.runner.failures``): killed
    by a signal it did not send itself (``docker kill``/``stop``, a daemon restart) is the
    platform's doing; any other non-zero exit is the application's.

    >>> _category(3, False), _category(137, True), _category(137, False)
    ('application', 'out_of_memory', 'infrastructure')
    """
    if oom_killed:
        return "out_of_memory"
    return "infrastructure" if exit_code in (128 + 9, 128 + 15) else "application"


def role_of(container: _Container) -> Role | None:
    """The role a replica container runs, from its role record label; None without one.

    The label is readable by anyone who can ``docker inspect``, so it holds secret env values
    masked; they come back from the container's own env (where the real values live).
    Records of earlier versions (local_cwd's old role spec form, secrets unmasked) read too.

    >>> record = {"name": "w", "image": "busybox", "entrypoint": "sh",
    ...           "env": {"HF_TOKEN": "***", "LR": "0.1"}}
    >>> c = _Container("c1", "app-w-0", {LABEL_ROLE_SPEC: json.dumps(record)}, "running",
    ...                env={"HF_TOKEN": "s3cr3t", "LR": "0.1", "PATH": "/bin"})
    >>> role_of(c).env
    {'HF_TOKEN': 's3cr3t', 'LR': '0.1'}
    """
    if LABEL_ROLE_SPEC not in container.labels:
        return None
    try:
        record = json.loads(container.labels[LABEL_ROLE_SPEC])
        env = record.get("env")
        if isinstance(env, dict):
            record["env"] = {
                key: container.env.get(key, value)
                if value == MASK and is_secret_env_name(key)
                else value
                for key, value in env.items()
            }
        return role_from_record(record)
    except (ValueError, KeyError, TypeError, AttributeError):  # not a record: no role
        return None


def describe_app(
    app_id: str, containers: Sequence[_Container], verdict: _Verdict, docker_host: str
) -> DescribeAppResponse:
    """The app's description from its (inspected) containers and their verdict: replica
    statuses (hostnames are container names), roles, and where the host reaches each
    replica's published ports."""
    replicas = sorted(
        (c for c in containers if c.kind == _KIND_REPLICA),
        key=lambda c: (c.role_index, c.replica_id),
    )
    roles: dict[str, Role] = {}
    for c in replicas:
        if c.role not in roles:
            role = role_of(c)
            if role is not None:
                roles[c.role] = role
    first = replicas[0]
    return DescribeAppResponse(
        app_id=app_id,
        state=verdict.state,
        num_restarts=verdict.num_restarts,
        msg=verdict.msg,
        structured_error_msg=verdict.structured_error_msg,
        ui_url=None,
        metadata={
            "docker_host": docker_host,
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
            **{k: v for k, v in first.labels.items() if k in JOB_METADATA_KEYS},
        },
        roles_statuses=role_statuses(
            ReplicaStatus(
                id=c.replica_id, state=verdict.replica_states[c.id], role=c.role, hostname=c.name
            )
            for c in replicas
        ),
        roles=list(roles.values()),
    )
