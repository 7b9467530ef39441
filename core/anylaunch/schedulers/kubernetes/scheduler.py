"""The ``kubernetes`` scheduler: runs an AppDef as Kubernetes objects.

Two modes (run option ``mode``):

- ``jobs`` (default): vanilla Kubernetes, no CRDs, any version (Indexed Jobs are not needed):
  one ``batch/v1`` Job per replica, named ``{app}-{role}-{replica}``, plus (for an app of
  more than one replica) a headless Service ``{app}`` whose DNS names
  (``{role}-{replica}.{app}``, pod hostname + subdomain) reach the replicas on clusters with
  DNS. A replica's retries are its Job's ``backoffLimit``
  (``Role.max_retries``, whatever the retry policy: there is no gang controller). When a
  replica fails for good, the next describe stops the others (their Jobs get an active
  deadline) and the app is FAILED.
- ``volcano``: one Volcano Job (``batch.volcano.sh/v1alpha1``) with a task per replica, gang
  scheduled (``minAvailable``) in a Volcano ``queue``, restarted per the role's retry policy
  (APPLICATION and ROLE restart the job, REPLICA the task) up to ``maxRetry``.

Every app has a record (see :mod:`anylaunch.schedulers.kubernetes.record`): in jobs mode an
annotation of its rank-0 Job, which is created first, so launching an app writes its Jobs (and
Service) and nothing else; in volcano mode a ConfigMap.
App ids are ``{namespace}:{name}``. Rank-0 discovery: ``ANYLAUNCH_RANK0_HOST`` is the rank-0
pod's own IP in that pod, and for the other replicas either its DNS name (``rank0_host=dns``,
needs cluster DNS) or its IP (``rank0_host=pod_ip``, jobs mode: ``schedule`` creates rank 0
first and waits up to ``rank0_timeout`` for its IP; a retried rank 0 gets a new IP the others
do not learn).

Workspaces are Docker images built at submission on the engine of ``DOCKER_HOST`` and pushed
to ``image_repo`` when it is set (without it, the nodes must run on that same engine).

Overlays (``anylaunch.specs.overlays``) patch what a Role cannot express, app-level first, then
the role's (macros substituted per replica): ``set_overlay(role, "kubernetes", "V1Pod", ...)``
for each pod, ``"V1Job"`` for each Job (jobs mode) and ``set_overlay(app, "kubernetes",
"VolcanoJob", ...)`` for the Volcano Job. Fields anylaunch owns are blocklisted (names,
namespaces, ``restartPolicy``, a Job's template and selector, the Volcano tasks) and the role's
container must keep the image, command, args and env of its Role; sidecars may be added.

>>> from anylaunch.specs import AppDef, Role, Resource
>>> app = AppDef("hello", [Role("echo", "busybox", entrypoint="echo", args=["hi"],
...                             resource=Resource(cpu=1, gpu=0, memMB=256))])
>>> info = create_scheduler("demo").submit_dryrun(app, {"namespace": "ml"})
>>> [obj["kind"] for obj in info.request.objects]  # one pod: no Service needed
['Job']
>>> info.request.app_id.startswith("ml:hello-")
True
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from anylaunch.schedulers.api import CANCEL_REQUESTED, DescribeAppResponse
from anylaunch.schedulers.common.arrays import IndexFacts, array_meta, array_response
from anylaunch.schedulers.common.capacity import CanRun, Capacity
from anylaunch.schedulers.common.roles import role_from_record
from anylaunch.schedulers.kubernetes import arrays, capacity
from anylaunch.schedulers.kubernetes.common import (
    KubernetesSchedulerBase,
    utc_now,
)
from anylaunch.schedulers.kubernetes.hold import hold, release, wants_hold
from anylaunch.schedulers.kubernetes.names import (
    ANNOTATION_CANCELLED,
    ANNOTATION_RECORD,
    ANNOTATION_STOPPED,
    APP_LABEL_KEYS,
    LABEL_APP_ID,
    RECORD_ANNOTATION_MAX,
    KubernetesCommonOpts,
    make_app_name,
    opts_from_cfg,
    parse_app_id,
    role_dns_names,
)
from anylaunch.schedulers.kubernetes.pods import PodOptions, apply_overlays
from anylaunch.schedulers.kubernetes.record import CONFIGMAP, record_configmap, record_data
from anylaunch.schedulers.kubernetes.request import (
    RANK0_IP_PLACEHOLDER,
    KubernetesRequest,
    app_labels,
    headless_service,
)
from anylaunch.schedulers.kubernetes.state import (
    AppView,
    ReplicaView,
    group_by_replica,
    newest,
    pod_replica_state,
    replica_pods_of,
)
from anylaunch.specs.api import NONE, AppDef, AppDryRunInfo, AppState, RetryPolicy, Role
from anylaunch.specs.arrays import ArraySpec
from anylaunch.specs.errors import InvalidRunConfigException, InvalidSpecError, UnknownAppException

__all__ = [
    "JOB_OVERLAY_BLOCKLIST",
    "VOLCANO_API_VERSION",
    "VOLCANO_OVERLAY_BLOCKLIST",
    "KubernetesOpts",
    "KubernetesScheduler",
    "create_scheduler",
]

BACKEND = "kubernetes"
MODES = ("jobs", "volcano")
VOLCANO_API_VERSION = "batch.volcano.sh/v1alpha1"
#: V1Job overlay fields anylaunch owns (the pod template has its own V1Pod overlay).
JOB_OVERLAY_BLOCKLIST = ["metadata.name", "metadata.namespace", "spec.template", "spec.selector"]
#: Volcano Job overlay fields anylaunch owns (task pods have the V1Pod overlay).
VOLCANO_OVERLAY_BLOCKLIST = ["metadata.name", "metadata.namespace", "spec.tasks"]
#: The longest Job TTL (ttlSecondsAfterFinished is an int32).
_MAX_TTL_S = 2**31 - 1
_SUGGESTION = "Role fields (image, entrypoint, args, env, resource, ...) set these"

#: Volcano job phases → app states (Restarting/Completing are still on their way).
VOLCANO_STATES: dict[str, AppState] = {
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Restarting": AppState.RUNNING,
    "Completing": AppState.RUNNING,
    "Completed": AppState.SUCCEEDED,
    "Aborting": AppState.CANCELLED,
    "Aborted": AppState.CANCELLED,
    "Terminating": AppState.FAILED,
    "Terminated": AppState.FAILED,
    "Failed": AppState.FAILED,
}


@dataclass
class KubernetesOpts(KubernetesCommonOpts):
    """Run options of the ``kubernetes`` scheduler."""

    mode: str = "jobs"
    """jobs: a batch/v1 Job per replica and a headless Service (vanilla Kubernetes); volcano: one Volcano Job (needs Volcano on the cluster)."""

    queue: str | None = None
    """Volcano queue of the job (volcano mode; default: Volcano's 'default' queue)."""

    rank0_host: str = "dns"
    """How non-rank-0 replicas find rank 0: dns (the headless Service's DNS name; needs cluster DNS) or pod_ip (jobs mode: submission waits for the rank-0 pod's IP)."""

    rank0_timeout: float = 300.0
    """Seconds submission waits for the rank-0 pod's IP with rank0_host=pod_ip."""

    indexed_job: str = "auto"
    """Array apps (jobs mode): auto runs one Indexed Job on API servers >= 1.29 (asked at dryrun) and one Job per index below; yes or no decide without asking (offline dryruns)."""

    ttl_seconds_after_finished: int | None = None
    """Jobs mode: seconds after an app's Jobs finish until the cluster deletes them (the Job's ttlSecondsAfterFinished; needs Kubernetes >= 1.21, or the TTLAfterFinished gate). With an archive, the app's Jobs and pods are held until its record is written."""

    def check(self) -> None:
        """Raises InvalidRunConfigException for values no cluster accepts."""
        super().check()
        ttl = self.ttl_seconds_after_finished
        if ttl is not None and not 0 <= ttl <= _MAX_TTL_S:
            raise InvalidRunConfigException(
                "ttl_seconds_after_finished",
                ttl,
                f"must be between 0 and {_MAX_TTL_S} seconds (the API server's int32)",
                "e.g. 3600, or leave it unset to keep finished Jobs",
            )
        if ttl is not None and self.mode != "jobs":
            raise InvalidRunConfigException(
                "ttl_seconds_after_finished",
                ttl,
                "is a batch/v1 Job field (jobs mode)",
                "set mode=jobs, or drop ttl_seconds_after_finished",
            )
        if self.mode not in MODES:
            raise InvalidRunConfigException(
                "mode", self.mode, f"is not one of {', '.join(MODES)}", "use jobs or volcano"
            )
        if self.queue is not None and self.mode != "volcano":
            raise InvalidRunConfigException(
                "queue",
                self.queue,
                "queues are a Volcano feature",
                "set mode=volcano, or drop queue",
            )
        if self.rank0_host not in ("dns", "pod_ip"):
            raise InvalidRunConfigException(
                "rank0_host", self.rank0_host, "is not dns or pod_ip", "use dns or pod_ip"
            )
        if self.rank0_host == "pod_ip" and self.mode != "jobs":
            raise InvalidRunConfigException(
                "rank0_host",
                self.rank0_host,
                "Volcano creates all pods at once, so no pod can be told the rank-0 IP",
                "use rank0_host=dns with mode=volcano",
            )
        if self.indexed_job not in ("auto", "yes", "no"):
            raise InvalidRunConfigException(
                "indexed_job", self.indexed_job, "is not auto, yes or no", "use auto, yes or no"
            )
        if not self.rank0_timeout > 0:
            raise InvalidRunConfigException(
                "rank0_timeout", self.rank0_timeout, "must be > 0", "e.g. 300"
            )


class KubernetesScheduler(KubernetesSchedulerBase):
    """Runs apps on Kubernetes as Jobs (default) or as a Volcano Job; app handles are
    ``kubernetes://{session}/{namespace}:{name}`` (constructor arguments: see
    :class:`KubernetesSchedulerBase`)."""

    backend_name = BACKEND
    opts_class = KubernetesOpts
    supports_arrays = True
    # jobs mode keeps the record on the rank-0 Job (record ConfigMaps come first)
    record_kinds = (CONFIGMAP, ("batch/v1", "Job"))

    def _workload_kinds(self, mode: str) -> list[tuple[str, str]]:
        if mode == "volcano":
            return [(VOLCANO_API_VERSION, "Job")]
        return [("batch/v1", "Job"), ("v1", "Service")]

    # --- rendering --------------------------------------------------------------------

    def _render(self, app: AppDef, opts: KubernetesOpts) -> KubernetesRequest:
        if opts.mode == "volcano":
            return self._render_volcano(app, opts)
        request = self._render_jobs(app, opts)
        hold(request.objects, opts.ttl_seconds_after_finished, wants_hold(app))
        return request

    def archived(self, app_id: str) -> None:
        """Releases the archive's hold on the app's pods and Jobs (see
        :mod:`~anylaunch.schedulers.kubernetes.hold`): a TTL or a delete removes them now."""
        parsed = parse_app_id(app_id)
        if parsed is None:
            return
        namespace, name = parsed
        selector = f"{self._selector()},{LABEL_APP_ID}={name}"
        release(self.client(), namespace, selector, [("v1", "Pod"), ("batch/v1", "Job")])

    def _delete_existing(self, app_id: str) -> None:
        """Deletes the app, and lets go of it if it was held for the archive."""
        super()._delete_existing(app_id)
        self.archived(app_id)

    def _render_jobs(self, app: AppDef, opts: KubernetesOpts) -> KubernetesRequest:
        if app.array is not None:
            return self._render_array(app, opts)
        name = make_app_name(app.name)
        namespace = opts.namespace
        labels = app_labels(BACKEND, "jobs", name, app)
        pod_ip = opts.rank0_host == "pod_ip"
        jobs: list[dict[str, Any]] = []
        for rep in self._replica_pods(
            app,
            opts,
            name,
            labels,
            rank0_host=RANK0_IP_PLACEHOLDER if pod_ip else f"{role_dns_names(app)[0]}-0.{name}",
            subdomain=name,
        ):
            job: dict[str, Any] = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": f"{name}-{rep.role_label}-{rep.replica_id}",
                    "namespace": namespace,
                    "labels": dict(rep.labels),
                },
                "spec": {
                    "backoffLimit": rep.role.max_retries,
                    "completions": 1,
                    "parallelism": 1,
                    "template": {"metadata": rep.pod["metadata"], "spec": rep.pod["spec"]},
                },
            }
            targets: list[tuple[AppDef | Role, str]] = [(app, BACKEND), (rep.replica, BACKEND)]
            apply_overlays(job, targets, "V1Job", JOB_OVERLAY_BLOCKLIST, _SUGGESTION)
            jobs.append(job)
        # the rank-0 Job carries the record and is created first: the app exists (describes)
        # from the first write on
        objects: list[dict[str, Any]] = []
        payload = self._record_payload(app, "jobs")
        if len(payload) > RECORD_ANNOTATION_MAX:
            objects.append(self._record(app, "jobs", namespace, name, labels))
        else:
            jobs[0]["metadata"].setdefault("annotations", {})[ANNOTATION_RECORD] = payload
        rank0_index = len(objects)
        objects.append(jobs[0])
        if len(jobs) > 1:
            # replicas find each other by name through it; a lone pod (rank 0, which reads
            # its own IP) needs none, and skipping it spares the cluster the endpoint updates
            # of every pod state change (most of an app's API requests)
            objects.append(headless_service(app, name, namespace, labels))
        objects += jobs[1:]
        return KubernetesRequest(
            scheduler=BACKEND,
            mode="jobs",
            namespace=namespace,
            name=name,
            objects=objects,
            rank0_pod_ip=pod_ip and len(jobs) > 1,
            rank0_index=rank0_index,
            rank0_timeout=opts.rank0_timeout,
        )

    def _render_array(self, app: AppDef, opts: KubernetesOpts) -> KubernetesRequest:
        """An array app (see :mod:`~anylaunch.schedulers.kubernetes.arrays`): one Indexed
        Job, or one Job per index; the record (with the array's facts) on the first."""
        assert app.array is not None
        if opts.mode != "jobs":
            raise InvalidRunConfigException(
                "mode", opts.mode, "array apps run in jobs mode", "use mode=jobs"
            )
        indexed = opts.indexed_job == "yes" or (
            opts.indexed_job == "auto" and self._server_runs_indexed()
        )
        name = make_app_name(app.name)
        labels = app_labels(BACKEND, "jobs", name, app)
        role_label = role_dns_names(app)[0]
        options = PodOptions.from_opts(opts)
        build = arrays.indexed_job if indexed else arrays.fallback_jobs
        found = build(app, options, opts.namespace, name, labels, role_label, JOB_OVERLAY_BLOCKLIST)
        jobs = [found] if isinstance(found, dict) else found
        data = json.loads(self._record_payload(app, "jobs"))
        data["array"] = arrays.array_data(app.array, indexed)
        payload = arrays.dumps(data)
        objects: list[dict[str, Any]] = []
        if len(payload) > RECORD_ANNOTATION_MAX:
            objects.append(
                record_configmap(payload, namespace=opts.namespace, name=name, labels=labels)
            )
        else:
            jobs[0]["metadata"].setdefault("annotations", {})[ANNOTATION_RECORD] = payload
        return KubernetesRequest(BACKEND, "jobs", opts.namespace, name, objects + jobs)

    def _server_runs_indexed(self) -> bool:
        """Whether the API server's version runs arrays as one Indexed Job (asked once)."""
        if self._indexed is None:
            self._indexed = arrays.indexed_supported(self.client().request("GET", "/version"))
        return self._indexed

    _indexed: bool | None = None

    def _render_volcano(self, app: AppDef, opts: KubernetesOpts) -> KubernetesRequest:
        name = make_app_name(app.name)
        namespace = opts.namespace
        labels = app_labels(BACKEND, "volcano", name, app)
        tasks: list[dict[str, Any]] = []
        embedded: list[dict[str, Any]] = []
        # Volcano's svc plugin names pods {job}-{task}-{index}; the job is their subdomain
        rank0_host = f"{name}-{role_dns_names(app)[0]}-0-0.{name}"
        for rep in self._replica_pods(app, opts, name, labels, rank0_host):
            retry = rep.role.retry_policy
            action = "RestartTask" if retry == RetryPolicy.REPLICA else "RestartJob"
            task = f"{rep.role_label}-{rep.replica_id}"
            tasks.append(
                {
                    "name": task,
                    "replicas": 1,
                    "maxRetry": rep.role.max_retries,
                    "policies": [
                        {"event": "PodEvicted", "action": action},
                        {"event": "PodFailed", "action": action},
                    ],
                    "template": {"metadata": rep.pod["metadata"], "spec": rep.pod["spec"]},
                }
            )
            pod_meta = {**rep.pod["metadata"], "name": f"{name}-{task}-0", "namespace": namespace}
            embedded.append({**rep.pod, "metadata": pod_meta})
        spec: dict[str, Any] = {
            "schedulerName": "volcano",
            "queue": opts.queue or "default",
            "minAvailable": sum(r.min_replicas or r.num_replicas for r in app.roles),
            "maxRetry": max(r.max_retries for r in app.roles),
            "plugins": {"svc": ["--publish-not-ready-addresses"], "env": []},
            "tasks": tasks,
        }
        if opts.priority_class:
            spec["priorityClassName"] = opts.priority_class
        vcjob: dict[str, Any] = {
            "apiVersion": VOLCANO_API_VERSION,
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": spec,
        }
        apply_overlays(vcjob, [(app, BACKEND)], "VolcanoJob", VOLCANO_OVERLAY_BLOCKLIST, "")
        return self._recorded_request(app, "volcano", labels, vcjob, embedded)

    # --- capacity ---------------------------------------------------------------------

    def _check_capacity(self, app: AppDef, cfg: Mapping[str, Any]) -> Capacity:
        """Quotas of the namespace, then the nodes' free requests, for the pods the app's
        request would create (see :mod:`~anylaunch.schedulers.kubernetes.capacity`): three
        list calls (one more, once, for an array whose Job kind the server version decides)."""
        opts = opts_from_cfg(KubernetesOpts, cfg)
        asked_before = self._indexed is not None
        request = self._render(app, opts)
        version_call = int(not asked_before and self._indexed is not None)
        role_names = dict(zip(role_dns_names(app), (r.name for r in app.roles), strict=True))
        pods = capacity.request_pods(request, role_names, one_index=app.array is not None)
        answer = capacity.check_capacity(
            self.client(), opts.namespace, pods, request.objects, calls=version_call
        )
        if opts.mode == "volcano" and answer.can_run == CanRun.YES:
            # Volcano admits a gang by its queue's share too, which no node list shows
            reason = f"{answer.reason} (the Volcano queue's share is not read)"
            return Capacity(answer.can_run, reason, answer.expected_start, answer.calls)
        return answer

    # --- status -----------------------------------------------------------------------

    def _replicas(
        self, view: AppView, roles: Sequence[Role], role_labels: Mapping[str, str]
    ) -> tuple[AppState | None, list[ReplicaView], str]:
        if view.mode == "volcano":
            return _volcano_replicas(view, roles, role_labels)
        return None, _job_replicas(view, roles, role_labels), _stopped_msg(view)

    def _stop_remaining(self, namespace: str, view: AppView, failed: str) -> None:
        """Jobs mode: a replica failed for good, so stop the others (an active deadline makes
        the Job controller delete their pods) and remember why on the record."""
        if view.mode != "jobs":
            return
        client = self.client()
        for job in view.workloads:
            if _job_condition(job) is None:
                client.patch(
                    "batch/v1",
                    "Job",
                    namespace,
                    job["metadata"]["name"],
                    {"spec": {"activeDeadlineSeconds": 1}},
                )
        client.patch(
            *view.record_kind,
            namespace,
            view.record["metadata"]["name"],
            {"metadata": {"annotations": {ANNOTATION_STOPPED: f"{utc_now()} {failed}"}}},
        )

    # --- arrays (see anylaunch.schedulers.kubernetes.arrays) ----------------------------

    def _describe_view(self, namespace: str, view: AppView) -> DescribeAppResponse:
        data = record_data(view.record)
        found = arrays.read_array_data(data)
        if found is None:
            return super()._describe_view(namespace, view)
        meta, limit, indexed = found
        roles = [role_from_record(r) for r in data.get("roles", [])]
        label = str(data.get("role_labels", {}).get(roles[0].name, roles[0].name))
        cancelled = ANNOTATION_CANCELLED in (view.record["metadata"].get("annotations") or {})
        picked = meta.selected if meta.selected is not None else tuple(range(meta.size))
        facts: dict[int, IndexFacts] = {}
        restarts = 0
        if indexed:
            job = newest(view.workloads)
            status = (job or {}).get("status") or {}
            done = set(arrays.positions(status.get("completedIndexes")))
            failed = set(arrays.positions(status.get("failedIndexes")))
            by_position = arrays.by_completion_index(view.pods)
            for position, index in enumerate(picked):
                pod = newest(by_position.get(position, []))
                state, msg = pod_replica_state(pod) if pod else (AppState.PENDING, "")
                if position in done:
                    state = AppState.SUCCEEDED
                elif position in failed:
                    state = AppState.FAILED
                elif state == AppState.FAILED:
                    state, msg = AppState.PENDING, f"retrying after {msg or 'a failure'}"
                name = pod["metadata"]["name"] if pod else ""
                facts[index] = IndexFacts(state, arrays.exit_code(pod), name, msg or NONE)
        else:
            jobs = group_by_replica(view.workloads)
            pods = group_by_replica(view.pods)
            ordered = []
            for index in picked:
                job = newest(jobs.get((label, index), []))
                if job is None:
                    continue
                ordered.append(job)
                pod = newest(pods.get((label, index), []))
                rep = _job_replica(label, index, job, pod)
                if rep.state == AppState.SUBMITTED and not arrays.released(job):
                    rep.state, rep.msg = AppState.PENDING, "waiting for a free slot"
                restarts = max(restarts, rep.restarts)
                facts[index] = IndexFacts(
                    rep.state, arrays.exit_code(pod), rep.pod, rep.msg or NONE
                )
            if not cancelled:
                self._release(namespace, arrays.to_release(ordered, limit))
        if cancelled:
            for index in picked:
                fact = facts.setdefault(index, IndexFacts(AppState.CANCELLED))
                if not fact.state.is_terminal():
                    fact.state = AppState.CANCELLED
        result = array_response(meta, roles[0].name, facts)
        metadata = {"namespace": namespace, "name": view.app, "mode": view.mode}
        metadata["session"] = str(data.get("session", ""))
        if cancelled:
            metadata[CANCEL_REQUESTED] = "true"
        return DescribeAppResponse(
            app_id=f"{namespace}:{view.app}",
            state=result.state,
            num_restarts=restarts,
            msg=result.msg,
            metadata=metadata,
            roles_statuses=result.roles_statuses,
            roles=roles,
            array=result.array,
        )

    def _release(self, namespace: str, names: Sequence[str]) -> None:
        """Lets held Jobs of an array run (``parallelism: 1``)."""
        for name in names:
            self.client().patch("batch/v1", "Job", namespace, name, {"spec": {"parallelism": 1}})

    def _replicas_of_record(
        self, namespace: str, name: str, view: AppView
    ) -> dict[str, dict[int, Any]]:
        found = super()._replicas_of_record(namespace, name, view)
        array = arrays.read_array_data(record_data(view.record))
        if array is None:
            return found
        meta = array[0]
        picked = meta.selected if meta.selected is not None else tuple(range(meta.size))
        ((role_name, replicas),) = found.items()
        return {role_name: {index: replicas[0] for index in picked}}

    def _retry_indices(self, app_id: str, indices: Sequence[int]) -> str:
        """A new array of the same Jobs (copied from the cluster, so pod specs and secret
        values are exactly the first run's) running only ``indices``; created all or
        nothing."""
        parsed = parse_app_id(app_id)
        views = self._listed_views(parsed[0], [parsed[1]]) if parsed else {}
        view = views.get(parsed[1]) if parsed else None
        if parsed is None or view is None:
            raise UnknownAppException(app_id)
        namespace, old = parsed
        data = record_data(view.record)
        found = arrays.read_array_data(data)
        if found is None:
            raise InvalidSpecError("app_handle", app_id, "is not an array app", "retry arrays")
        meta, limit, indexed = found
        spec = ArraySpec(meta.size, None, meta.min_success_ratio, indices=tuple(indices))
        roles = [role_from_record(r) for r in data.get("roles", [])]
        label = str(data.get("role_labels", {}).get(roles[0].name, roles[0].name))
        name = make_app_name(str(data.get("name", old)))
        labels = {**(view.record["metadata"].get("labels") or {}), LABEL_APP_ID: name}
        labels = {k: v for k, v in labels.items() if k in APP_LABEL_KEYS}
        if indexed:
            job = newest(view.workloads)
            if job is None:
                raise InvalidSpecError(
                    "app_handle", app_id, "has no Job left to copy", "retry before deleting it"
                )
            copy = arrays.retry_job(
                job,
                f"{name}-{label}",
                labels,
                {"completions": len(indices), "parallelism": min(limit, len(indices))},
                (old, name),
            )
            for container in copy["spec"]["template"]["spec"]["containers"]:
                for var in container.get("env") or []:
                    if var.get("name") == arrays.SELECTED_ENV:
                        var["value"] = " ".join(map(str, spec.selected))
            jobs = [copy]
        else:
            by_index = group_by_replica(view.workloads)
            jobs = []
            for position, index in enumerate(spec.selected):
                job = newest(by_index.get((label, index), []))
                if job is None:
                    raise InvalidSpecError(
                        "indices", index, "has no Job left to copy", "retry before deleting it"
                    )
                parallelism = 1 if position < limit else 0
                jobs.append(
                    arrays.retry_job(
                        job,
                        f"{name}-{label}-{index}",
                        labels,
                        {"parallelism": parallelism},
                        (old, name),
                    )
                )
        data.update(name=data.get("name", old), created=time.time())
        data["array"] = {**data["array"], "meta": array_meta(spec)}
        jobs[0]["metadata"]["annotations"] = {ANNOTATION_RECORD: arrays.dumps(data)}
        request = KubernetesRequest(BACKEND, "jobs", namespace, name, jobs)
        return self.schedule(AppDryRunInfo(request, str))


def _stopped_msg(view: AppView) -> str:
    annotations = view.record["metadata"].get("annotations") or {}
    stopped = str(annotations.get(ANNOTATION_STOPPED, ""))
    return stopped.partition(" ")[2]


def _job_condition(job: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """("Complete" | "Failed", condition) once the Job has finished, else None."""
    for cond in job.get("status", {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"]), cond
    return None


def _job_replicas(
    view: AppView, roles: Sequence[Role], role_labels: Mapping[str, str]
) -> list[ReplicaView]:
    jobs = group_by_replica(view.workloads)
    replicas: list[ReplicaView] = []
    for label, i, pod in replica_pods_of(view, roles, role_labels):
        job = newest(jobs.get((label, i), []))
        if job is not None:
            replicas.append(_job_replica(label, i, job, pod))
    return replicas


def _job_replica(
    label: str, i: int, job: Mapping[str, Any], pod: Mapping[str, Any] | None
) -> ReplicaView:
    """One replica (jobs mode) from its Job and its newest pod."""
    status = job.get("status", {})
    failures = int(status.get("failed", 0))
    backoff = int(job.get("spec", {}).get("backoffLimit", 6))
    finished = _job_condition(job)
    pod_name = pod["metadata"]["name"] if pod is not None else ""
    msg = ""
    if finished is not None and finished[0] == "Complete":
        state = AppState.SUCCEEDED
    elif finished is not None:
        state = AppState.FAILED
        cond = finished[1]
        pod_state, pod_msg = pod_replica_state(pod) if pod is not None else (None, "")
        msg = pod_msg if pod_state == AppState.FAILED and pod_msg else ""
        msg = msg or f"{cond.get('reason', '')}: {cond.get('message', '')}".strip(": ")
    elif pod is None:
        state = AppState.SUBMITTED
    else:
        state, msg = pod_replica_state(pod)
        if state == AppState.FAILED and failures <= backoff:
            state, msg = AppState.PENDING, f"retrying after {msg or 'a failure'}"
    restarts = failures - (1 if state == AppState.FAILED and failures else 0)
    return ReplicaView(label, i, state, msg, pod_name, max(restarts, 0))


def _volcano_replicas(
    view: AppView, roles: Sequence[Role], role_labels: Mapping[str, str]
) -> tuple[AppState | None, list[ReplicaView], str]:
    vcjob = newest(view.workloads)
    status = (vcjob or {}).get("status") or {}
    phase = (status.get("state") or {}).get("phase", "")
    job_state = VOLCANO_STATES.get(phase)
    msg = (status.get("state") or {}).get("message", "")
    restarts = int(status.get("retryCount", 0))
    replicas: list[ReplicaView] = []
    for label, i, pod in replica_pods_of(view, roles, role_labels):
        if pod is not None:
            state, pod_msg = pod_replica_state(pod)
            name = pod["metadata"]["name"]
        else:
            state, pod_msg, name = AppState.SUBMITTED, "", ""
            if job_state is not None and job_state.is_terminal():
                state = job_state
            elif job_state == AppState.PENDING:
                state = AppState.PENDING
        replicas.append(ReplicaView(label, i, state, pod_msg, name, restarts))
    if vcjob is not None and job_state is None:
        job_state = AppState.SUBMITTED if not view.pods else None
    return job_state, replicas, msg


def create_scheduler(session_name: str, **kwargs: Any) -> KubernetesScheduler:
    """Creates the ``kubernetes`` scheduler (the registry's factory; see ``factory_kwargs``).

    >>> create_scheduler("demo").backend
    'kubernetes'
    """
    return KubernetesScheduler.from_kwargs(session_name, kwargs)
