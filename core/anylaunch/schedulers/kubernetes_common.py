"""What the ``kubernetes`` and ``kubernetes_mcad`` schedulers share.

- Naming and labels: every object of an app carries ``anylaunch.io/app-id`` (and role/replica
  labels), so one list call by label selector serves a whole app (or many apps).
- The app *record*: a ConfigMap named after the app holding what ``describe`` needs to rebuild
  the roles, and the cancellation mark. It outlives a cancel (which deletes the workload), so a
  cancelled app still describes as CANCELLED until it is deleted.
- Pod rendering from a Role (resources, env with field refs, mounts, ``/dev/shm``, ports, node
  selector, service account, priority class, pull policy) and overlays with a blocklist.
- The REST client is :class:`~anylaunch.schedulers.kubernetes_client.KubeClient` (plain dict
  objects, validated by the API server as sent; re-exported here).
- Pod status → replica state, pending reasons, exit codes, and pod log streaming.
- :class:`KubernetesSchedulerBase`: describe/list/cancel/delete/log_iter for both schedulers.

Rank-0 discovery without DNS: the rank-0 replica's ``ANYLAUNCH_RANK0_HOST`` comes from its own
pod IP (downward API ``status.podIP``); the other replicas get the rank-0 pod's DNS name
(``{host}.{service}``, which needs cluster DNS) or, with ``rank0_host=pod_ip`` (the
``kubernetes`` scheduler's default mode only), the rank-0 pod's IP, which ``schedule`` waits for
before it creates the other replicas.
"""

from __future__ import annotations

import abc
import json
import logging
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from anylaunch.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    LogQuery,
    Scheduler,
    Stream,
    split_lines_iterator,
)
from anylaunch.schedulers.kubernetes_client import (
    KubeClient,
    KubernetesApiError,
    KubernetesSchedulerError,
    KubernetesValidationError,
)
from anylaunch.schedulers.kubernetes_names import (
    _CREATING_GRACE_S,
    _SELECTOR_CHUNK,
    ANNOTATION_CANCELLED,
    ANNOTATION_STOPPED,
    LABEL_APP_ID,
    LABEL_MANAGED_BY,
    LABEL_MODE,
    LABEL_REPLICA_ID,
    LABEL_ROLE,
    LABEL_SCHEDULER,
    MANAGED_BY,
    POD_OVERLAY_BLOCKLIST,
    RECORD_KEY,
    KubernetesCommonOpts,
    dns_label,
    field_ref,
    make_app_name,
    parse_app_id,
)
from anylaunch.schedulers.kubernetes_names import (
    _FIELD_REF as _FIELD_REF,
)
from anylaunch.schedulers.kubernetes_names import (
    _NOT_DNS as _NOT_DNS,
)
from anylaunch.schedulers.kubernetes_names import (
    _NOT_LABEL as _NOT_LABEL,
)
from anylaunch.schedulers.kubernetes_names import (
    _PULL_POLICIES as _PULL_POLICIES,
)
from anylaunch.schedulers.kubernetes_names import (
    _ROLE_CONTAINER_FIELDS as _ROLE_CONTAINER_FIELDS,
)
from anylaunch.schedulers.kubernetes_names import (
    _SHM_VOLUME as _SHM_VOLUME,
)
from anylaunch.schedulers.kubernetes_names import (  # re-exported: the module's old public path
    LABEL_APP_NAME as LABEL_APP_NAME,
)
from anylaunch.schedulers.kubernetes_names import (
    LABEL_ROLE_INDEX as LABEL_ROLE_INDEX,
)
from anylaunch.schedulers.kubernetes_names import (
    label_value as label_value,
)
from anylaunch.schedulers.kubernetes_names import (
    opts_from_cfg as opts_from_cfg,
)
from anylaunch.schedulers.kubernetes_names import (
    role_dns_names as role_dns_names,
)
from anylaunch.schedulers.kubernetes_pods import (  # re-exported: the module's old public path
    PodOptions as PodOptions,
)
from anylaunch.schedulers.kubernetes_pods import (
    _env_var as _env_var,
)
from anylaunch.schedulers.kubernetes_pods import (
    apply_overlays as apply_overlays,
)
from anylaunch.schedulers.kubernetes_pods import (
    apply_pod_overlays,
    container_resources,
    role_to_pod,
)
from anylaunch.schedulers.kubernetes_pods import (
    port_name as port_name,
)
from anylaunch.schedulers.kubernetes_pods import (
    replica_role as replica_role,
)
from anylaunch.schedulers.kubernetes_request import (
    RANK0_IP_PLACEHOLDER,
    KubernetesRequest,
    format_request,
)
from anylaunch.schedulers.kubernetes_request import (  # re-exported: the module's old public path
    _mask_env as _mask_env,
)
from anylaunch.schedulers.kubernetes_request import (
    app_labels as app_labels,
)
from anylaunch.schedulers.kubernetes_request import (
    record_configmap as record_configmap,
)
from anylaunch.schedulers.kubernetes_state import (  # re-exported: the module's old public path
    _NORMAL_WAITING as _NORMAL_WAITING,
)
from anylaunch.schedulers.kubernetes_state import (
    AppView,
    ReplicaView,
    app_state_of,
    newest,
    pending_reason,
    pod_replica_state,
)
from anylaunch.schedulers.kubernetes_state import (
    _replica_key as _replica_key,
)
from anylaunch.schedulers.kubernetes_state import (
    _terminated_message as _terminated_message,
)
from anylaunch.schedulers.kubernetes_state import (
    group_by_replica as group_by_replica,
)
from anylaunch.schedulers.shared import (
    RANK0_ENV,
    role_from_record,
)
from anylaunch.specs.api import (
    NONE,
    AppDryRunInfo,
    AppState,
    ReplicaStatus,
    Role,
    RoleStatus,
    make_app_handle,
)
from anylaunch.specs.errors import (
    AnylaunchError,
    InvalidSpecError,
)
from anylaunch.specs.runopts import CfgVal, runopts
from anylaunch.workspace.docker_workspace import DockerWorkspaceMixin

__all__ = [
    "LABEL_APP_ID",
    "LABEL_MANAGED_BY",
    "LABEL_REPLICA_ID",
    "LABEL_ROLE",
    "POD_OVERLAY_BLOCKLIST",
    "RANK0_ENV",
    "KubeClient",
    "KubernetesApiError",
    "KubernetesCommonOpts",
    "KubernetesRequest",
    "KubernetesSchedulerBase",
    "KubernetesSchedulerError",
    "KubernetesValidationError",
    "apply_pod_overlays",
    "container_resources",
    "dns_label",
    "field_ref",
    "format_request",
    "make_app_name",
    "parse_app_id",
    "pod_replica_state",
    "role_to_pod",
]

log: logging.Logger = logging.getLogger(__name__)


def _record_data(record: Mapping[str, Any]) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(record.get("data", {}).get(RECORD_KEY, "{}"))
    except ValueError:
        data = {}
    return data


def _in_selector(base: str, key: str, values: Sequence[str]) -> str:
    return f"{base},{key} in ({','.join(values)})"


class KubernetesSchedulerBase(DockerWorkspaceMixin, Scheduler[Mapping[str, CfgVal]], abc.ABC):
    """describe / list / cancel / delete / log_iter for apps made of labelled objects.

    Workspaces are Docker images (:class:`DockerWorkspaceMixin`): built on the Docker engine
    of ``DOCKER_HOST`` at submission and pushed to ``image_repo`` when set (without it, the
    nodes must share that engine, as the local test cluster's kubelet does).

    Subclasses render the objects (``_submit_dryrun``), name the workload kinds of each mode
    (:meth:`_workload_kinds`) and derive replica states from them (:meth:`_replicas`).

    Args:
        backend: scheduler name
        session_name: goes into app handles
        client: a ready :class:`KubeClient` (default: loaded from kubeconfig on first use)
        kubeconfig: kubeconfig path (default: ``$KUBECONFIG``, then ``~/.kube/config``)
        context: kubeconfig context (default: the current one)
    """

    opts_class: type[KubernetesCommonOpts] = KubernetesCommonOpts
    log_streams = (Stream.COMBINED,)

    def __init__(
        self,
        backend: str,
        session_name: str,
        client: KubeClient | None = None,
        kubeconfig: str | None = None,
        context: str | None = None,
    ) -> None:
        super().__init__(backend, session_name)
        if client is not None and not isinstance(client, KubeClient):
            raise InvalidSpecError(
                "client", type(client).__name__, "is not a KubeClient", "pass KubeClient(api)"
            )
        self._kube = client
        self._kubeconfig = kubeconfig
        self._context = context

    def client(self) -> KubeClient:
        """The API client (loaded from kubeconfig on first use)."""
        if self._kube is None:
            self._kube = KubeClient.from_config(self._kubeconfig, self._context)
        return self._kube

    def _run_opts(self) -> runopts:
        return self.opts_class.as_runopts()

    def _selector(self) -> str:
        return f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_SCHEDULER}={self.backend}"

    # --- hooks ------------------------------------------------------------------------

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

    def _check_request(self, dryrun_info: AppDryRunInfo[Any]) -> KubernetesRequest:
        request = dryrun_info.request
        if not isinstance(request, KubernetesRequest) or request.scheduler != self.backend:
            raise InvalidSpecError(
                "dryrun_info.request",
                type(request).__name__,
                f"is not a {self.backend} request",
                f"create it with the {self.backend} scheduler's submit_dryrun",
            )
        return request

    def validate_request(self, request: KubernetesRequest) -> None:
        """Has the API server validate every object, embedded ones included (a server-side
        dry run).

        Raises:
            KubernetesValidationError: an object was rejected (with the server's message).
        """
        client = self.client()
        for obj in [*request.objects, *request.embedded_objects]:
            client.create(obj, request.namespace, dry_run=True)

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Validates every object server-side, then creates them in order.

        Nothing is left behind when validation fails; if a later create fails, the objects
        already created are deleted again.

        Raises:
            KubernetesValidationError: the server rejected an object (its message quoted).
            KubernetesSchedulerError: the cluster is unreachable or refused the request.
        """
        request = self._check_request(dryrun_info)
        self.validate_request(request)
        for line in self.build_workspace_images(request.workspace_builds):
            log.info("workspace: %s", line)
        client = self.client()
        created: list[dict[str, Any]] = []
        try:
            for i, obj in enumerate(request.objects):
                if request.rank0_pod_ip and i == request.rank0_index + 1:
                    ip = self._wait_rank0_ip(request)
                    for later in request.objects[i:]:
                        _replace_placeholder(later, ip)
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

    def _wait_rank0_ip(self, request: KubernetesRequest) -> str:
        """Polls the rank-0 pod until it has an IP (``rank0_host=pod_ip``)."""
        rank0 = request.objects[request.rank0_index]
        labels = rank0["metadata"]["labels"]
        selector = ",".join(
            f"{k}={labels[k]}" for k in (LABEL_APP_ID, LABEL_ROLE, LABEL_REPLICA_ID)
        )
        deadline = time.monotonic() + request.rank0_timeout
        delay = 0.1
        while True:
            pods = self.client().list("v1", "Pod", request.namespace, selector)
            pod = newest(pods)
            ip = (pod or {}).get("status", {}).get("podIP")
            if ip:
                return str(ip)
            if time.monotonic() > deadline:
                reason = pending_reason(pod) if pod else "its pod was not created"
                raise KubernetesSchedulerError(
                    f"the rank-0 pod of {request.app_id} got no IP within "
                    f"{request.rank0_timeout:g}s ({reason or 'pending'}); the other replicas "
                    "were not created. Fix: check the cluster's capacity, raise rank0_timeout, "
                    "or use rank0_host=dns on a cluster with DNS"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 2.0)

    # --- queries ----------------------------------------------------------------------

    def _views(self, namespace: str, names: Sequence[str] | None) -> dict[str, AppView]:
        """Records, workloads and pods of the given apps (all of this scheduler's apps in the
        namespace if ``names`` is None), in a bounded number of list calls."""
        client = self.client()
        base = self._selector()
        selectors = (
            [base]
            if names is None
            else [
                _in_selector(base, LABEL_APP_ID, names[i : i + _SELECTOR_CHUNK])
                for i in range(0, len(names), _SELECTOR_CHUNK)
            ]
        )
        views: dict[str, AppView] = {}
        for selector in selectors:
            chunk: dict[str, AppView] = {}
            for record in client.list("v1", "ConfigMap", namespace, selector):
                name = record["metadata"]["name"]
                if record["metadata"].get("labels", {}).get(LABEL_APP_ID) == name:
                    chunk[name] = AppView(record=record)
            if not chunk:
                continue
            modes = {v.record["metadata"]["labels"].get(LABEL_MODE, "") for v in chunk.values()}
            kinds = {kind for mode in modes for kind in self._workload_kinds(mode)[:1]}
            for api_version, kind in sorted(kinds):
                for obj in client.list(api_version, kind, namespace, selector):
                    app = obj["metadata"].get("labels", {}).get(LABEL_APP_ID, "")
                    if app in chunk:
                        chunk[app].workloads.append(obj)
            for pod in client.list("v1", "Pod", namespace, selector):
                app = pod["metadata"].get("labels", {}).get(LABEL_APP_ID, "")
                if app in chunk:
                    chunk[app].pods.append(pod)
            views.update(chunk)
        return views

    def _describe_view(self, namespace: str, view: AppView) -> DescribeAppResponse:
        data = _record_data(view.record)
        name = view.record["metadata"]["name"]
        app_id = f"{namespace}:{name}"
        roles = [role_from_record(r) for r in data.get("roles", [])]
        role_labels: dict[str, str] = data.get("role_labels", {})
        annotations = view.record["metadata"].get("annotations") or {}
        cancelled = ANNOTATION_CANCELLED in annotations
        state, replicas, msg = self._replicas(view, roles, role_labels)
        if state is None:
            state = app_state_of([r.state for r in replicas])
        if cancelled and state != AppState.SUCCEEDED:
            state, msg = AppState.CANCELLED, "cancelled by request"
        elif (
            not view.workloads
            and not state.is_terminal()
            and time.time() - float(data.get("created", 0)) > _CREATING_GRACE_S
        ):
            state = AppState.FAILED
            msg = "the app's workload objects are gone (deleted outside anylaunch?)"
        if state == AppState.FAILED and not msg:
            failed = [r for r in replicas if r.state == AppState.FAILED]
            if failed:
                msg = f"replica {failed[0].role}/{failed[0].replica_id} failed: {failed[0].msg}"
        if state == AppState.FAILED and ANNOTATION_STOPPED not in annotations:
            self._stop_remaining(namespace, view, msg)
        if state in (AppState.PENDING, AppState.SUBMITTED) and not msg:
            waiting = [r for r in replicas if r.msg and not r.state.is_terminal()]
            if waiting:
                msg = f"{waiting[0].role}/{waiting[0].replica_id} pending: {waiting[0].msg}"

        by_label = {label: role for role, label in role_labels.items()}
        statuses: dict[str, list[ReplicaStatus]] = {role.name: [] for role in roles}
        for rep in sorted(replicas, key=lambda r: (r.role, r.replica_id)):
            rep_state = rep.state
            if state == AppState.CANCELLED and not rep_state.is_terminal():
                rep_state = AppState.CANCELLED
            role_name = by_label.get(rep.role, rep.role)
            statuses.setdefault(role_name, []).append(
                ReplicaStatus(
                    id=rep.replica_id,
                    state=rep_state,
                    role=role_name,
                    hostname=rep.pod,
                    structured_error_msg=rep.msg or NONE,
                )
            )
        if state == AppState.CANCELLED:  # the workload is gone: show every replica
            for role in roles:
                have = {r.id for r in statuses[role.name]}
                statuses[role.name] += [
                    ReplicaStatus(i, AppState.CANCELLED, role.name, "")
                    for i in range(role.num_replicas)
                    if i not in have
                ]
        return DescribeAppResponse(
            app_id=app_id,
            state=state,
            num_restarts=max((r.restarts for r in replicas), default=0),
            msg=msg or NONE,
            ui_url=None,
            metadata={
                "namespace": namespace,
                "name": name,
                "mode": view.record["metadata"].get("labels", {}).get(LABEL_MODE, ""),
                "session": str(data.get("session", "")),
            },
            roles_statuses=[RoleStatus(role, reps) for role, reps in statuses.items()],
            roles=roles,
        )

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """The app's state, replicas (with pending reasons and exit codes) and roles, from
        three list calls (record, workload, pods); None for an unknown app."""
        return self.describe_many([app_id])[app_id]

    def describe_many(self, app_ids: Sequence[str]) -> dict[str, DescribeAppResponse | None]:
        """Describes many apps with three list calls per namespace (label selector ``in``)."""
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
            data = _record_data(view.record)
            session = str(data.get("session") or self.session_name)
            response = ListAppResponse(
                app_id=desc.app_id,
                state=desc.state,
                app_handle=make_app_handle(self.backend, session, desc.app_id),
                name=str(data.get("name", name)),
            )
            found.append((float(data.get("created", 0)), response))
        return [resp for _, resp in sorted(found, key=lambda item: item[0])]

    # --- control ----------------------------------------------------------------------

    def _parse_or_none(self, app_id: str) -> tuple[str, str] | None:
        return parse_app_id(app_id)

    def _cancel_existing(self, app_id: str) -> None:
        """Marks the record cancelled, then deletes the workload (propagation Background: the
        garbage collector removes the pods)."""
        parsed = parse_app_id(app_id)
        if parsed is None:
            return
        namespace, name = parsed
        client = self.client()
        record = client.patch(
            "v1",
            "ConfigMap",
            namespace,
            name,
            {"metadata": {"annotations": {ANNOTATION_CANCELLED: utc_now()}}},
        )
        if record is None:
            return
        mode = record["metadata"].get("labels", {}).get(LABEL_MODE, "")
        self._delete_workloads(namespace, name, mode)

    def _delete_workloads(self, namespace: str, name: str, mode: str) -> None:
        client = self.client()
        selector = f"{self._selector()},{LABEL_APP_ID}={name}"
        for api_version, kind in self._workload_kinds(mode):
            for obj in client.list(api_version, kind, namespace, selector):
                client.delete(api_version, kind, namespace, obj["metadata"]["name"], "Background")

    def _delete_existing(self, app_id: str) -> None:
        """Deletes the workload (Background propagation) and the app record."""
        parsed = parse_app_id(app_id)
        if parsed is None:
            return
        namespace, name = parsed
        client = self.client()
        record = client.get("v1", "ConfigMap", namespace, name)
        mode = (record or {}).get("metadata", {}).get("labels", {}).get(LABEL_MODE, "")
        self._delete_workloads(namespace, name, mode)
        client.delete("v1", "ConfigMap", namespace, name, "Background")

    def delete(self, app_id: str) -> None:
        """Deletes the app (its workload, pods and record); a no-op for an unknown app."""
        if parse_app_id(app_id) is not None:
            self._delete_existing(app_id)

    # --- logs -------------------------------------------------------------------------

    def _log_replicas(self, app_id: str) -> dict[str, dict[int, Any]] | None:
        parsed = parse_app_id(app_id)
        record = None
        if parsed is not None:
            record = self.client().get("v1", "ConfigMap", parsed[0], parsed[1])
        if parsed is None or record is None:
            return None
        namespace, name = parsed
        data = _record_data(record)
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
        """Lines of one replica from its pod's log (the newest attempt).

        Without ``should_tail`` every container of the pod is read (init containers first;
        lines of containers other than the role's are prefixed ``[container] ``). With it, the
        role's container is followed until the app ends (waiting for the pod to start, and
        moving on to a retry's pod). Kubernetes interleaves stdout and stderr: only the
        combined stream exists.
        """
        namespace, name, role_label = replica
        selector = (
            f"{self._selector()},{LABEL_APP_ID}={name},{LABEL_ROLE}={role_label},"
            f"{LABEL_REPLICA_ID}={k}"
        )
        return self._log_lines(
            app_id, namespace, selector, role_label, query.since, query.until, query.should_tail
        )

    def _is_over(self, app_id: str) -> bool:
        desc = self.describe(app_id)
        return desc is None or desc.state.is_terminal()

    def _log_lines(
        self,
        app_id: str,
        namespace: str,
        selector: str,
        container: str,
        since: datetime | None,
        until: datetime | None,
        follow: bool,
    ) -> Iterator[str]:
        client = self.client()
        query: dict[str, Any] = {}
        if since is not None:
            query["sinceSeconds"] = max(1, int(time.time() - since.timestamp()) + 1)
        if until is not None:
            query["timestamps"] = "true"
        until_ts = until.timestamp() if until is not None else None

        if not follow:
            pod = newest(client.list("v1", "Pod", namespace, selector))
            if pod is None:
                return
            spec = pod.get("spec", {})
            names = [c["name"] for c in spec.get("initContainers", [])]
            names += [c["name"] for c in spec.get("containers", [])]
            for name in names:
                path = f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}/log"
                try:
                    text = client.text(path, {**query, "container": name})
                except KubernetesApiError as e:
                    if e.status == 400:  # not started yet (waiting): nothing logged
                        continue
                    raise
                prefix = "" if name == container else f"[{name}] "
                for line in _until(split_lines_iterator([text]), until_ts):
                    yield prefix + line
            return

        seen: set[str] = set()
        delay = 0.2
        while True:
            pod = newest(client.list("v1", "Pod", namespace, selector))
            pod_name = pod["metadata"]["name"] if pod is not None else None
            if pod is None or pod_name in seen or not _started(pod, container):
                if self._is_over(app_id) and (pod is None or pod_name in seen):
                    return
                if pod is not None and pod_name not in seen and _finished_unstarted(pod):
                    seen.add(str(pod_name))  # never ran (e.g. image error): nothing to read
                    continue
                time.sleep(delay)
                delay = min(delay * 1.5, 2.0)
                continue
            seen.add(str(pod_name))
            path = f"/api/v1/namespaces/{namespace}/pods/{pod_name}/log"
            raw = client.stream(path, {**query, "container": container, "follow": "true"})
            try:
                yield from _until(split_lines_iterator(_decoded(raw)), until_ts)
            finally:
                raw.release_conn()
            delay = 0.2


def _until(lines: Iterable[str], until_ts: float | None) -> Iterator[str]:
    """Drops the RFC 3339 timestamp prefix (present when ``until`` is set) and stops after
    ``until``."""
    for line in lines:
        if until_ts is None:
            yield line
            continue
        stamp, _, rest = line.partition(" ")
        ts = _parse_rfc3339(stamp)
        if ts is not None and ts > until_ts:
            return
        yield rest


def _parse_rfc3339(stamp: str) -> float | None:
    # e.g. 2024-01-02T03:04:05.123456789Z (nanoseconds: fromisoformat takes at most micro)
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z", stamp)
    if match is None:
        return None
    base = datetime.fromisoformat(match.group(1)).replace(tzinfo=timezone.utc).timestamp()
    return base + float(match.group(2) or 0)


def _decoded(raw: Any) -> Iterator[str]:
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    for chunk in raw.stream(8192, decode_content=True):
        text = decoder.decode(chunk)
        if text:
            yield text
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail


def _started(pod: Mapping[str, Any], container: str) -> bool:
    for status in pod.get("status", {}).get("containerStatuses") or []:
        if status.get("name") == container:
            state = status.get("state") or {}
            return "running" in state or "terminated" in state
    return False


def _finished_unstarted(pod: Mapping[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") in ("Failed", "Succeeded")


def _replace_placeholder(obj: Any, ip: str) -> None:
    if isinstance(obj, dict):
        for key, value in obj.items():
            if value == RANK0_IP_PLACEHOLDER:
                obj[key] = ip
            else:
                _replace_placeholder(value, ip)
    elif isinstance(obj, list):
        for item in obj:
            _replace_placeholder(item, ip)


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
