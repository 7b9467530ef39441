"""What the ``kubernetes`` and ``kubernetes_mcad`` schedulers share:
:class:`KubernetesSchedulerBase`, which submits, describes, lists, cancels, deletes and reads
the logs of apps made of labelled objects, for both.

Rank-0 discovery without DNS: the rank-0 replica's ``ANYLAUNCH_RANK0_HOST`` comes from its own
pod IP (downward API ``status.podIP``); the other replicas get the rank-0 pod's DNS name
(``{host}.{service}``, which needs cluster DNS) or, with ``rank0_host=pod_ip`` (the
``kubernetes`` scheduler's default mode only), the rank-0 pod's IP, which ``schedule`` waits for
before it creates the other replicas.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timezone
from typing import Any, ClassVar

from anylaunch.schedulers.api import (
    CANCEL_REQUESTED,
    DescribeAppResponse,
    ListAppResponse,
    LogQuery,
    Scheduler,
    Stream,
)
from anylaunch.schedulers.common.changes import ChangeFeed
from anylaunch.schedulers.common.job_metadata import JOB_METADATA_KEYS
from anylaunch.schedulers.common.roles import check_image_ref, role_from_record
from anylaunch.schedulers.kubernetes.client import (
    KubeClient,
    KubernetesApiError,
)
from anylaunch.schedulers.kubernetes.hold import is_held
from anylaunch.schedulers.kubernetes.logs import pod_log_lines
from anylaunch.schedulers.kubernetes.names import (
    _CREATING_GRACE_S,
    ANNOTATION_CANCELLED,
    ANNOTATION_STOPPED,
    LABEL_APP_ID,
    LABEL_MANAGED_BY,
    LABEL_MODE,
    LABEL_REPLICA_ID,
    LABEL_ROLE,
    LABEL_SCHEDULER,
    MANAGED_BY,
    KubernetesCommonOpts,
    dns_label,
    opts_from_cfg,
    parse_app_id,
)
from anylaunch.schedulers.kubernetes.pods import PodOptions
from anylaunch.schedulers.kubernetes.queries import app_views, find_record, wait_rank0_ip
from anylaunch.schedulers.kubernetes.record import (
    CONFIGMAP,
    cancel_record,
    record_configmap,
    record_data,
    record_payload,
)
from anylaunch.schedulers.kubernetes.request import (
    KubernetesRequest,
    ReplicaPod,
    fill_rank0_ip,
    replica_pods,
)
from anylaunch.schedulers.kubernetes.state import (
    AppView,
    ReplicaView,
    app_verdict,
    describe_response,
)
from anylaunch.schedulers.kubernetes.watch import KubeWatch, OwnWrite, acquire, release
from anylaunch.specs.api import AppDef, AppDryRunInfo, AppState, Role
from anylaunch.specs.errors import AnylaunchError, InvalidSpecError
from anylaunch.specs.runopts import CfgVal, runopts
from anylaunch.workspace.docker_workspace import DockerWorkspaceMixin

__all__ = [
    "KubernetesSchedulerBase",
    "utc_now",
]

log: logging.Logger = logging.getLogger(__name__)


class KubernetesSchedulerBase(DockerWorkspaceMixin, Scheduler[Mapping[str, CfgVal]], abc.ABC):
    """describe / list / cancel / delete / logs for apps made of labelled objects.

    Workspaces are Docker images (:class:`DockerWorkspaceMixin`): built on the Docker engine
    of ``DOCKER_HOST`` at submission and pushed to ``image_repo`` when set (without it, the
    nodes must share that engine, as the local test cluster's kubelet does).

    Subclasses name themselves (``backend_name``) and their options (``opts_class``), render
    the objects (:meth:`_render`), name the workload kinds of each mode
    (:meth:`_workload_kinds`) and derive replica states from them (:meth:`_replicas`).

    Args:
        session_name: goes into app handles
        client: a ready :class:`KubeClient` (default: loaded from kubeconfig on first use)
        kubeconfig: kubeconfig path (default: ``$KUBECONFIG``, then ``~/.kube/config``)
        context: kubeconfig context (default: the current one)
    """

    #: See Args; the registry's factory passes these on.
    factory_kwargs = ("client", "kubeconfig", "context")
    #: The scheduler's name (in app handles and labels).
    backend_name: ClassVar[str]
    opts_class: type[KubernetesCommonOpts] = KubernetesCommonOpts
    #: (apiVersion, kind) of the objects that may hold an app record (see
    #: :mod:`~anylaunch.schedulers.kubernetes.record`): the ConfigMap first.
    record_kinds: ClassVar[tuple[tuple[str, str], ...]] = (CONFIGMAP,)
    #: Kubernetes interleaves a container's stdout and stderr in one log.
    log_streams = (Stream.COMBINED,)
    request_type = KubernetesRequest
    #: Whose ``V1Pod`` overlays apply to the pods, in order.
    pod_overlay_namespaces: ClassVar[tuple[str, ...]] = ("kubernetes",)

    def __init__(
        self,
        session_name: str,
        client: KubeClient | None = None,
        kubeconfig: str | None = None,
        context: str | None = None,
    ) -> None:
        super().__init__(self.backend_name, session_name)
        if client is not None and not isinstance(client, KubeClient):
            raise InvalidSpecError(
                "client", type(client).__name__, "is not a KubeClient", "pass KubeClient(api)"
            )
        self._kube = client
        self._kubeconfig = kubeconfig
        self._context = context
        # whom a shared watch acts as: a given client is its own (it may carry its own
        # credentials or transport); loaded ones are as their kubeconfig file (``$KUBECONFIG``
        # as it is now, as the client will load it) and context say
        config_file = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        self._identity = (
            f"client:{id(client)}"
            if client is not None
            else f"kubeconfig:{config_file}:{context or ''}"
        )
        self._watch: KubeWatch | None = None
        self._watch_lock = threading.Lock()

    def client(self) -> KubeClient:
        """The API client (loaded from kubeconfig on first use)."""
        if self._kube is None:
            self._kube = KubeClient.from_config(self._kubeconfig, self._context)
        return self._kube

    def _shared_watch(self) -> KubeWatch:
        """The process-wide watch of this scheduler's objects (started on first use)."""
        with self._watch_lock:
            if self._watch is None:
                self._watch = acquire(
                    self.client(), self._selector(), self._identity, self.record_kinds
                )
            return self._watch

    def change_feed(self) -> ChangeFeed:
        """The process-wide feed of this scheduler's app changes, from a shared list+watch
        of its objects (see :mod:`~anylaunch.schedulers.kubernetes.watch`); describes are
        served from its cache from then on while it is healthy."""
        return self._shared_watch().feed

    def close(self) -> None:
        """Releases the shared watch (stopped when its last user releases it)."""
        with self._watch_lock:
            watch, self._watch = self._watch, None
        if watch is not None:
            release(watch)
        super().close()

    def _run_opts(self) -> runopts:
        return self.opts_class.as_runopts()

    def _selector(self) -> str:
        return f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_SCHEDULER}={self.backend}"

    # --- hooks ------------------------------------------------------------------------

    @abc.abstractmethod
    def _render(self, app: AppDef, opts: Any) -> KubernetesRequest:
        """The request for ``app`` with the parsed and checked run options (an instance of
        ``opts_class``); no I/O."""

    @abc.abstractmethod
    def _workload_kinds(self, mode: str) -> list[tuple[str, str]]:
        """(apiVersion, kind) of the objects an app of ``mode`` is made of (besides its
        record); the first is the one whose status drives the app's."""

    @abc.abstractmethod
    def _replicas(
        self, view: AppView, roles: Sequence[Role], role_labels: Mapping[str, str]
    ) -> tuple[AppState | None, list[ReplicaView], str]:
        """(app state if the workload says it, replicas, message) of one app."""

    def _stop_remaining(self, namespace: str, view: AppView, failed: str) -> None:
        """Stops the replicas still running in a FAILED app (hook: default nothing)."""

    # --- submission -------------------------------------------------------------------

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Every role needs resources and a container image (not the default ``.``)."""
        super()._validate(app, scheduler, cfg)
        for role in app.roles:
            check_image_ref(role, self.backend)

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        """Renders the request offline; with ``validate_spec`` the API server checks it."""
        opts = opts_from_cfg(self.opts_class, cfg)
        request = self._render(app, opts)
        request.workspace_builds = self.workspace_builds(app)
        if opts.validate_spec:
            self.validate_request(request)
        return AppDryRunInfo(request, str)

    def _replica_pods(
        self,
        app: AppDef,
        opts: KubernetesCommonOpts,
        name: str,
        labels: Mapping[str, str],
        rank0_host: str,
        subdomain: str | None = None,
        scheduler_name: str | None = None,
    ) -> Iterator[ReplicaPod]:
        """The pod of every replica of app ``name`` in the options' namespace, with this
        scheduler's pod overlays (see
        :func:`~anylaunch.schedulers.kubernetes.request.replica_pods`)."""
        return replica_pods(
            app,
            app_id=f"{opts.namespace}:{name}",
            labels=labels,
            options=PodOptions.from_opts(opts, scheduler_name=scheduler_name),
            rank0_host=rank0_host,
            overlay_namespaces=self.pod_overlay_namespaces,
            subdomain=subdomain,
        )

    def _record_payload(self, app: AppDef, mode: str) -> str:
        """The app record (:func:`record_payload`) of an app submitted by this scheduler."""
        return record_payload(app, scheduler=self.backend, mode=mode, session=self.session_name)

    def _record(
        self, app: AppDef, mode: str, namespace: str, name: str, labels: Mapping[str, str]
    ) -> dict[str, Any]:
        """The app record as a ConfigMap (:func:`record_configmap`)."""
        payload = self._record_payload(app, mode)
        return record_configmap(payload, namespace=namespace, name=name, labels=labels)

    def _recorded_request(
        self,
        app: AppDef,
        mode: str,
        labels: Mapping[str, str],
        workload: dict[str, Any],
        embedded: list[dict[str, Any]],
    ) -> KubernetesRequest:
        """The request of an app made of one ``workload`` object (which names the app and its
        namespace) and the objects it creates (``embedded``, checked by dry runs only), with
        its record ConfigMap created first."""
        name, namespace = workload["metadata"]["name"], workload["metadata"]["namespace"]
        return KubernetesRequest(
            scheduler=self.backend,
            mode=mode,
            namespace=namespace,
            name=name,
            objects=[self._record(app, mode, namespace, name, labels), workload],
            embedded_objects=embedded,
        )

    def _is_own_request(self, request: object) -> bool:
        """A :class:`KubernetesRequest` made by this scheduler (both schedulers make them)."""
        return isinstance(request, KubernetesRequest) and request.scheduler == self.backend

    def validate_request(self, request: KubernetesRequest) -> None:
        """Has the API server validate every object, embedded ones included (a server-side
        dry run).

        Raises:
            KubernetesValidationError: an object was rejected (with the server's message).
        """
        client = self.client()
        for obj in [*request.objects, *request.embedded_objects]:
            client.create(obj, request.namespace, dry_run=True)

    @staticmethod
    def needs_preflight(request: KubernetesRequest) -> bool:
        """Whether ``schedule`` has the API server dry-run the objects before creating any.

        Only where a rejection would come too late to undo cheaply: after workspace images
        were built, after rank 0 already runs (its IP is waited for), or never (objects a
        custom resource creates later, which its schema does not check). Otherwise the
        creates themselves are the validation, and a rejected one rolls back the others:
        the same outcome at half the API writes (which count when hundreds of tasks start).

        >>> from anylaunch.schedulers.kubernetes.request import KubernetesRequest
        >>> plain = KubernetesRequest("kubernetes", "jobs", "ns", "app", objects=[])
        >>> KubernetesSchedulerBase.needs_preflight(plain)
        False
        >>> plain.rank0_pod_ip = True
        >>> KubernetesSchedulerBase.needs_preflight(plain)
        True
        """
        return bool(request.workspace_builds or request.embedded_objects or request.rank0_pod_ip)

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Creates the request's objects in order; nothing is left behind when one is
        rejected (the objects already created are deleted again).

        Requests whose rejection would come after costly or running work (see
        :meth:`needs_preflight`) are validated server-side first.

        Raises:
            KubernetesValidationError: the server rejected an object (its message quoted).
            KubernetesSchedulerError: the cluster is unreachable or refused the request.
        """
        request: KubernetesRequest = self._own_request(dryrun_info)
        if self.needs_preflight(request):
            self.validate_request(request)
        for line in self.build_workspace_images(request.workspace_builds):
            log.info("workspace: %s", line)
        client = self.client()
        created: list[dict[str, Any]] = []
        try:
            for i, obj in enumerate(request.objects):
                if request.rank0_pod_ip and i == request.rank0_index + 1:
                    fill_rank0_ip(request.objects[i:], wait_rank0_ip(client, request))
                client.create(obj, request.namespace)
                created.append(obj)
        except BaseException:
            for obj in reversed(created):
                try:
                    client.delete(
                        obj["apiVersion"],
                        obj["kind"],
                        request.namespace,
                        obj["metadata"]["name"],
                        "Background",
                    )
                except AnylaunchError as cleanup_error:
                    log.warning("could not remove %s: %s", obj["metadata"]["name"], cleanup_error)
            raise
        return request.app_id

    # --- queries ----------------------------------------------------------------------

    def _views(self, namespace: str, names: Sequence[str] | None) -> dict[str, AppView]:
        """Records, workloads and pods of the given apps (all of this scheduler's apps in the
        namespace if ``names`` is None): once a waiter asked for the :meth:`change_feed`, from
        the shared watch's cache while it is healthy (apps it has not seen yet are listed),
        else in a bounded number of list calls."""
        watch = self._watch
        cached = None if watch is None else watch.views(namespace, names, self._workload_kinds)
        if cached is None or names is None:
            if cached is not None:
                return cached
            return self._listed_views(namespace, names)
        missing = [n for n in names if n not in cached]
        if missing:  # created since the watch last heard (or unknown): ask the API server
            cached.update(self._listed_views(namespace, missing))
        return cached

    def _listed_views(self, namespace: str, names: Sequence[str] | None) -> dict[str, AppView]:
        """:meth:`_views` from the API server (list calls)."""
        return app_views(
            self.client(),
            namespace,
            self._selector(),
            names,
            self._workload_kinds,
            self.record_kinds,
        )

    def _find_record(self, namespace: str, name: str) -> AppView | None:
        """The app's record from the API server (a view without workload or pods)."""
        return find_record(self.client(), namespace, self._selector(), name, self.record_kinds)

    def _describe_view(self, namespace: str, view: AppView) -> DescribeAppResponse:
        """One app's description from its record, workload and pods (see
        :func:`~anylaunch.schedulers.kubernetes.state.app_verdict` for how its state is
        decided). A FAILED app's remaining replicas are stopped once (``_stop_remaining``)."""
        data = record_data(view.record)
        name = view.app
        roles = [role_from_record(r) for r in data.get("roles", [])]
        role_labels: dict[str, str] = data.get("role_labels", {})
        annotations = view.record["metadata"].get("annotations") or {}
        workload_state, replicas, msg = self._replicas(view, roles, role_labels)
        created = float(data.get("created", 0))
        state, msg = app_verdict(
            workload_state,
            replicas,
            msg,
            cancelled=ANNOTATION_CANCELLED in annotations,
            workload_gone=not view.workloads and time.time() - created > _CREATING_GRACE_S,
        )
        if state == AppState.FAILED and ANNOTATION_STOPPED not in annotations:
            self._stop_remaining(namespace, view, msg)
        metadata = {
            "namespace": namespace,
            "name": name,
            "mode": view.mode,
            "session": str(data.get("session", "")),
        }
        record_labels = view.record["metadata"].get("labels") or {}
        metadata.update({k: v for k, v in record_labels.items() if k in JOB_METADATA_KEYS})
        if ANNOTATION_CANCELLED in annotations:
            metadata[CANCEL_REQUESTED] = "true"
        return describe_response(
            f"{namespace}:{name}", state, msg, replicas, roles, role_labels, metadata
        )

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """The app's state, replicas (with pending reasons and exit codes) and roles, from
        three list calls (record, workload, pods); None for an unknown app."""
        return self.describe_many([app_id])[app_id]

    def describe_many(self, app_ids: Sequence[str]) -> dict[str, DescribeAppResponse | None]:
        """Describes many apps with three list calls per namespace (label selector ``in``).

        Raises:
            KubernetesUnreachableError: no cluster is configured or it did not answer, also
                for an id no app could have (so "unknown" always means the cluster said so).
        """
        self.client()
        out: dict[str, DescribeAppResponse | None] = dict.fromkeys(app_ids)
        by_namespace: dict[str, list[str]] = {}
        for app_id in app_ids:
            parsed = parse_app_id(app_id)
            if parsed is not None:
                by_namespace.setdefault(parsed[0], []).append(parsed[1])
        for namespace, names in by_namespace.items():
            views = self._views(namespace, sorted(set(names)))
            for name, view in views.items():
                out[f"{namespace}:{name}"] = self._describe_view(namespace, view)
        return out

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """This scheduler's apps in ``cfg['namespace']`` (default ``default``), oldest first."""
        namespace = str((cfg or {}).get("namespace") or "default")
        found: list[tuple[float, ListAppResponse]] = []
        for name, view in self._views(namespace, None).items():
            desc = self._describe_view(namespace, view)
            data = record_data(view.record)
            session = str(data.get("session") or self.session_name)
            entry = self._list_entry(desc.app_id, desc.state, str(data.get("name", name)), session)
            found.append((float(data.get("created", 0)), entry))
        return self._oldest_first(found)

    # --- control ----------------------------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        """Marks the app's record cancelled (in its ConfigMap, written from the record its
        workload carries if it has none yet), then deletes the workload (propagation
        Background: the garbage collector removes the pods)."""
        parsed = parse_app_id(app_id)
        if parsed is None:
            return
        namespace, name = parsed
        client = self.client()
        mark = {ANNOTATION_CANCELLED: utc_now()}
        with self._own_write(namespace, name) as write:
            record = client.patch(*CONFIGMAP, namespace, name, {"metadata": {"annotations": mark}})
            if record is None:
                view = self._find_record(namespace, name)
                if view is None:
                    return
                record = self._create_or_mark(
                    namespace, cancel_record(view.record, namespace, mark)
                )
            if record is None:  # deleted meanwhile
                return
            write.done(record["metadata"].get("resourceVersion"))
        mode = record["metadata"].get("labels", {}).get(LABEL_MODE, "")
        self._delete_workloads(namespace, name, mode)

    def _create_or_mark(self, namespace: str, configmap: dict[str, Any]) -> Any:
        """Creates a record ConfigMap; if one was created meanwhile (a concurrent cancel),
        adds this one's annotations to it instead."""
        client = self.client()
        try:
            return client.create(configmap, namespace)
        except KubernetesApiError as e:
            if e.status != 409:
                raise
        meta = configmap["metadata"]
        patch = {"metadata": {"annotations": meta.get("annotations") or {}}}
        return client.patch(*CONFIGMAP, namespace, meta["name"], patch)

    def _delete_workloads(self, namespace: str, name: str, mode: str) -> None:
        client = self.client()
        selector = f"{self._selector()},{LABEL_APP_ID}={name}"
        for api_version, kind in self._workload_kinds(mode):
            for obj in client.list(api_version, kind, namespace, selector):
                # a Job held for the archive stays until its record is written: Foreground
                # has the garbage collector stop its pods now (Background would wait for it)
                propagation = "Foreground" if is_held(obj) else "Background"
                client.delete(api_version, kind, namespace, obj["metadata"]["name"], propagation)

    def _delete_existing(self, app_id: str) -> None:
        """Deletes the workload (Background propagation) and the record ConfigMap, if any."""
        parsed = parse_app_id(app_id)
        if parsed is None:
            return
        namespace, name = parsed
        client = self.client()
        view = self._find_record(namespace, name)
        with self._own_write(namespace, name) as write:
            self._delete_workloads(namespace, name, "" if view is None else view.mode)
            client.delete(*CONFIGMAP, namespace, name, "Background")
            write.done(deleted=True)

    def _own_write(self, namespace: str, name: str) -> AbstractContextManager[OwnWrite]:
        """Around a write to an app record: this process reads it back from the API server
        until the shared watch (if any) has delivered it."""
        watch = self._watch
        if watch is None:
            return contextlib.nullcontext(OwnWrite())
        return watch.own_write(namespace, name)

    def delete(self, app_id: str) -> None:
        """Deletes the app (its workload, pods and record); a no-op for an unknown app."""
        if parse_app_id(app_id) is not None:
            self._delete_existing(app_id)

    # --- logs -------------------------------------------------------------------------

    def _record_view(self, namespace: str, name: str) -> AppView | None:
        """The app's record: from the watch's cache when it holds it, else from the API."""
        cached, view = (False, None) if self._watch is None else self._watch.record(namespace, name)
        if not cached or view is None:
            view = self._find_record(namespace, name)
        return view

    def _log_replicas(self, app_id: str) -> dict[str, dict[int, Any]] | None:
        parsed = parse_app_id(app_id)
        view = None if parsed is None else self._record_view(*parsed)
        if parsed is None or view is None:
            return None
        return self._replicas_of_record(parsed[0], parsed[1], view)

    def _replicas_of_record(
        self, namespace: str, name: str, view: AppView
    ) -> dict[str, dict[int, Any]]:
        """Each role's replicas, by replica id, as the app's record lists them."""
        data = record_data(view.record)
        labels = data.get("role_labels", {})
        replicas: dict[str, dict[int, Any]] = {}
        for role in data.get("roles", []):
            role_label = labels.get(role["name"], dns_label(role["name"], 20))
            replicas[role["name"]] = {
                k: (namespace, name, role_label) for k in range(int(role["num_replicas"]))
            }
        return replicas

    def _replica_log_lines(
        self, app_id: str, role_name: str, k: int, replica: Any, query: LogQuery
    ) -> Iterable[str]:
        """Lines of one replica from its pod's log (the newest attempt): every container of
        the pod, or with ``should_tail`` the role's container followed until the app ends
        (see :func:`~anylaunch.schedulers.kubernetes.logs.pod_log_lines`)."""
        namespace, name, role_label = replica
        selector = (
            f"{self._selector()},{LABEL_APP_ID}={name},{LABEL_ROLE}={role_label},"
            f"{LABEL_REPLICA_ID}={k}"
        )

        def is_over() -> bool:
            desc = self.describe(app_id)
            return desc is None or desc.state.is_terminal()

        watch = self._watch
        labels = {LABEL_APP_ID: name, LABEL_ROLE: role_label, LABEL_REPLICA_ID: str(k)}

        def find_pods() -> list[dict[str, Any]]:
            pods = None if watch is None else watch.pods(namespace, labels)
            if pods is None:
                pods = self.client().list("v1", "Pod", namespace, selector)
            return pods

        return pod_log_lines(
            self.client(),
            namespace,
            selector,
            role_label,
            query.since,
            query.until,
            query.should_tail,
            is_over,
            find_pods,
        )


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
