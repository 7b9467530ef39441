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

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from anylaunch.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    LogQuery,
    Scheduler,
    Stream,
    split_lines,
)
from anylaunch.schedulers.dependencies import require_sdk
from anylaunch.schedulers.docker_containers import (
    _container_config,
    _mounts,
)
from anylaunch.schedulers.docker_logs import follow_container_log, read_container_log
from anylaunch.schedulers.docker_request import (
    _APP_ID,
    _KIND_EVENT,
    _KIND_REPLICA,
    _T,
    BACKEND,
    DEFAULT_START_TIMEOUT_S,
    LABEL_APP_ID,
    LABEL_APP_NAME,
    LABEL_CANCEL_GRACE,
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
    DockerAppRequest,
    DockerContainerRequest,
    DockerEngineUnavailableError,
    DockerImageNotFoundError,
    DockerOpts,
    DockerSchedulerError,
    _describe_exit,
    _role_label,
    format_request,
    make_app_id,
)
from anylaunch.schedulers.docker_state import (
    _Container,
    _evaluate,
    _Verdict,
)
from anylaunch.schedulers.shared import (
    RANK0_ENV,
    check_image_ref,
    role_from_record,
    role_record,
)
from anylaunch.specs.api import (
    AppDef,
    AppDryRunInfo,
    ReplicaStatus,
    RetryPolicy,
    Role,
    RoleStatus,
    macros,
    make_app_handle,
)
from anylaunch.specs.errors import (
    InvalidRunConfigException,
    InvalidSpecError,
)
from anylaunch.specs.runopts import CfgVal, runopts
from anylaunch.workspace.docker_workspace import (
    DockerWorkspaceMixin,
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
            check_image_ref(role, BACKEND)

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
        client = self._client()
        if query.should_tail:

            def over() -> bool:
                desc = self.describe(app_id)
                return desc is None or desc.state.is_terminal()

            return follow_container_log(client, replica.id, want, since_s, until_s, over)
        return read_container_log(client, replica.id, want, since_s, until_s)


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
