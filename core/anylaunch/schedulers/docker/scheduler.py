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
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from anylaunch.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    LogQuery,
    Scheduler,
    Stream,
)
from anylaunch.schedulers.common.capacity import Capacity
from anylaunch.schedulers.docker import arrays, engine, events
from anylaunch.schedulers.docker.capacity import docker_capacity
from anylaunch.schedulers.docker.containers import build_request
from anylaunch.schedulers.docker.logs import follow_container_log, read_container_log
from anylaunch.schedulers.docker.request import (
    _APP_ID,
    _KIND_REPLICA,
    BACKEND,
    DEFAULT_START_TIMEOUT_S,
    LABEL_APP_ID,
    LABEL_APP_NAME,
    LABEL_CANCEL_GRACE,
    LABEL_KIND,
    LABEL_SESSION,
    DockerAppRequest,
    DockerEngineUnavailableError,
    DockerOpts,
    _describe_exit,
    format_request,
)
from anylaunch.schedulers.docker.state import (
    _Container,
    _evaluate,
    _Verdict,
    describe_app,
    failure_message,
)
from anylaunch.specs.api import AppDef, AppDryRunInfo, RetryPolicy
from anylaunch.specs.checks import check_seconds
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.runopts import CfgVal, runopts
from anylaunch.workspace.docker_workspace import DockerWorkspaceMixin

__all__ = [
    "DockerScheduler",
    "create_scheduler",
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

    request_type = DockerAppRequest
    #: an array runs under one app: a detached runner starts the next index as one ends
    #: (:mod:`~anylaunch.schedulers.docker.arrays`)
    supports_arrays = True
    #: Nothing connects to the engine until it is needed.
    factory_kwargs = ("docker_host", "start_timeout", "client")

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
        self._docker_host = docker_host
        self.start_timeout = check_seconds("start_timeout", start_timeout, positive=True)
        self.__client = client
        self._feed: events.DockerEventFeed | None = None
        self._feed_lock = threading.Lock()

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
        if self.__client is None:
            self.__client = engine.connect(self._docker_host, self.docker_host)
        return self.__client

    def _workspace_docker_client(self) -> Any:
        return self._client()

    def change_feed(self) -> events.DockerEventFeed:
        """The process-wide feed of the engine's app changes: one stream of its container
        events, shared by every scheduler of the same :attr:`docker_host`
        (:mod:`~anylaunch.schedulers.docker.events`); released by :meth:`close`. The feed
        has its own connection to :attr:`docker_host` (also when a ``client`` was given).
        Drivers that cannot get it (see ``anylaunch.runner.wake.scheduler_change_feed``)
        poll on their interval instead.

        Raises:
            MissingDependencyError: the ``docker`` package is not installed.
            DockerEngineUnavailableError: no engine answers at :attr:`docker_host`.
        """
        with self._feed_lock:
            feed = self._feed
            if feed is None or not feed.usable:
                self._feed = None
                if feed is not None:
                    events.release(feed)
                feed = self._feed = events.acquire(
                    self.docker_host, lambda: engine.connect(self._docker_host, self.docker_host)
                )
            return feed

    def close(self) -> None:
        """Closes the connection to the engine (it reconnects when used again) and releases
        the change feed (stopped once no scheduler of the engine uses it)."""
        with self._feed_lock:
            feed, self._feed = self._feed, None
        if feed is not None:
            events.release(feed)
        client, self.__client = self.__client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    # --- dryrun and schedule --------------------------------------------------------------

    def _run_opts(self) -> runopts:
        return DockerOpts.as_runopts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Roles without resources are fine: containers then run without limits."""

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        opts = DockerOpts.from_cfg(cfg)
        opts.check(app)
        request = build_request(app, opts, self.session_name, self.workspace_builds(app))
        return AppDryRunInfo(request, format_request)

    def _check_capacity(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> Capacity:
        """Whether all the containers fit the engine's host at once: its CPUs and memory
        (and GPUs where it lists them) from one ``docker info``
        (:mod:`~anylaunch.schedulers.docker.capacity`); an array by one index. Connecting
        first (a scheduler's first engine call) adds the ping and version calls.

        Raises:
            DockerEngineUnavailableError: no engine answers.
        """
        calls = 1 if self.__client is not None else 3  # /_ping and /version to connect
        client = self._client()
        try:
            info = client.info()
        except Exception as e:  # the SDK raises APIError, requests' errors or OSError
            raise DockerEngineUnavailableError(
                "local_docker",
                f"the engine at {self.docker_host} did not answer docker info "
                f"({engine.engine_error(e)})",
                "check the engine (`docker info`)",
            ) from None
        return docker_capacity(app, info, calls)

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
        request: DockerAppRequest = self._own_request(dryrun_info)
        client = self._client()
        for line in self.build_workspace_images(request.workspace_builds):
            log.info("workspace: %s", line)
        for image in request.images:
            engine.ensure_image(client, image, self.docker_host)
        engine.create_app(client, request)
        if request.start_first is not None and request.start_first < len(request.containers):
            try:
                arrays.start_runner(self.docker_host, request)
            except BaseException:
                engine.remove_app(client, request.app_id)  # all or nothing
                raise
        return request.app_id

    def _retry_indices(self, app_id: str, indices: Sequence[int]) -> str:
        """Schedules a new array app that runs ``indices`` of array app ``app_id`` again:
        the same role, size, parameters, ratio and run options. All or nothing (see
        :meth:`schedule`).

        Raises:
            UnknownAppException: no such app.
            InvalidSpecError: the app is not an array, or an index is out of its range.
        """
        found = self._array_view(app_id)
        if found is None:
            from anylaunch.specs.errors import UnknownAppException

            if self.describe(app_id) is not None:
                raise InvalidSpecError("app_id", app_id, "is not an array app", "retry arrays only")
            raise UnknownAppException(f"{self.backend}://{self.session_name}/{app_id}")
        _, first = found
        app, opts = arrays.retry_app(self._client(), app_id, [first], indices)
        return self.schedule(self.submit_dryrun(app, opts.to_cfg()))

    def _array_view(self, app_id: str) -> tuple[list[_Container], _Container] | None:
        """An array app's containers (list entries: one engine call, plus an inspect of
        each running one) and its first index container inspected; None when ``app_id`` is
        no array app."""
        if not isinstance(app_id, str) or not _APP_ID.match(app_id):
            return None
        client = self._client()
        containers = [_Container.from_summary(s) for s in engine.summaries(client, app_id)]
        if not arrays.is_array(containers):
            return None
        # the list lags the engine's events (a "die" is announced before the list shows the
        # exit): the live ones, at most the array's limit, are inspected for their true state
        live = [i for i, c in enumerate(containers) if c.live]

        def refresh(i: int) -> None:
            with contextlib.suppress(Exception):  # removed meanwhile: keep the list entry
                containers[i] = _Container.from_inspect(
                    client.api.inspect_container(containers[i].id)
                )

        engine.in_parallel(refresh, live)
        first = min((c for c in containers if c.kind == _KIND_REPLICA), key=lambda c: c.replica_id)
        try:
            return containers, _Container.from_inspect(client.api.inspect_container(first.id))
        except Exception:  # removed meanwhile: the list entry still tells the state
            return containers, first

    # --- the app's state ------------------------------------------------------------------

    def _inspect_app(self, app_id: str) -> list[_Container]:
        return engine.inspect_app(self._client(), app_id)

    def _act(self, app_id: str, containers: list[_Container], verdict: _Verdict) -> bool:
        """Carries out what the verdict asks (restart, record a failure, stop leftovers).

        Returns True when the engine's view changed and must be read again.
        """
        client = self._client()
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
            name = f"{app_id}.retry.{key}"
            if engine.record_event(client, app_id, name, "retry", data, trigger):
                log.info(
                    "app %s: replica %s/%d failed with %s; restarting its %s",
                    app_id,
                    trigger.role,
                    trigger.replica_id,
                    _describe_exit(trigger.exit_code or 0, trigger.oom_killed),
                    scope,
                )
                engine.stop(client, [c for c in group if c.live], grace)
                engine.start(client, group)
            return True
        if verdict.fail is not None:
            trigger = verdict.fail
            msg, structured = failure_message(trigger, engine.stderr_tail(client, trigger.id))
            data = {"container_id": trigger.id, "msg": msg, "structured_error_msg": structured}
            engine.record_event(client, app_id, f"{app_id}.failed", "failed", data, trigger)
            return True
        if verdict.resume:
            engine.start(client, verdict.resume)
            return True
        if verdict.stop:
            engine.stop(client, verdict.stop, grace)
            return True
        return False

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
        array = self._array_view(app_id)
        if array is not None:  # an array's status: one container list, nothing to act on
            return arrays.describe_array(app_id, array[0], array[1], self.docker_host)
        view = self._view(app_id)
        if view is None:
            return None
        containers, verdict = view
        return describe_app(app_id, containers, verdict, self.docker_host)

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """Every app on the engine (any session), oldest first, mostly from one engine call.

        States come from the container list (apps that retried are inspected); unlike
        describe, listing restarts nothing.
        """
        apps: dict[str, list[_Container]] = {}
        for summary in engine.summaries(self._client()):
            container = _Container.from_summary(summary)
            apps.setdefault(container.labels.get(LABEL_APP_ID, ""), []).append(container)
        now = time.time()
        found = []
        for app_id, containers in apps.items():
            replicas = [c for c in containers if c.kind == _KIND_REPLICA]
            if not replicas or not _APP_ID.match(app_id):
                continue
            if arrays.is_array(containers):
                first = min(replicas, key=lambda c: c.replica_id)
                state = arrays.describe_array(app_id, containers, first, "").state
                entry = self._list_entry(
                    app_id,
                    state,
                    first.labels.get(LABEL_APP_NAME, ""),
                    first.labels.get(LABEL_SESSION, self.session_name),
                )
                found.append((min(c.created for c in replicas), entry))
                continue
            if any(c.event == "retry" for c in containers):
                # telling a retry in progress from a new failure takes start times, which only
                # inspect has (apps that retried are few)
                containers = self._inspect_app(app_id)
            state = _evaluate(containers, now, self.start_timeout).state
            first = replicas[0]
            session = first.labels.get(LABEL_SESSION, self.session_name)
            name = first.labels.get(LABEL_APP_NAME, "")
            entry = self._list_entry(app_id, state, name, session)
            found.append((min(c.created for c in replicas), entry))
        return self._oldest_first(found)

    # --- control --------------------------------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        """Records the cancel, then stops the app's containers (SIGTERM, SIGKILL after the
        grace period); returns once they stopped."""
        replicas = [c for c in self._inspect_app(app_id) if c.kind == _KIND_REPLICA]
        if not replicas:
            return
        client = self._client()
        engine.record_event(client, app_id, f"{app_id}.cancel", "cancel", {}, replicas[0])
        grace = float(replicas[0].labels.get(LABEL_CANCEL_GRACE, "5"))
        engine.stop(client, [c for c in replicas if c.live], grace)

    def _delete_existing(self, app_id: str) -> None:
        """Stops the app if it runs, then removes its containers and its network."""
        containers = self._inspect_app(app_id)
        if not containers:
            return
        if any(c.live for c in containers):
            self._cancel_existing(app_id)
        engine.remove_app(self._client(), app_id)

    # --- logs -----------------------------------------------------------------------------

    def _log_replicas(self, app_id: str) -> dict[str, dict[int, Any]] | None:
        if not (isinstance(app_id, str) and _APP_ID.match(app_id)):
            return None
        return self._group_replicas(
            _Container.from_summary(s)
            for s in engine.summaries(self._client(), app_id)
            if (s.get("Labels") or {}).get(LABEL_KIND) == _KIND_REPLICA
        )

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


def create_scheduler(session_name: str, **kwargs: Any) -> DockerScheduler:
    """Creates the ``local_docker`` scheduler (the registry's factory; see ``factory_kwargs``).

    >>> create_scheduler("demo").backend
    'local_docker'
    """
    return DockerScheduler.from_kwargs(session_name, kwargs)
