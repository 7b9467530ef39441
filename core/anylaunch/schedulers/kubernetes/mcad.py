"""The ``kubernetes_mcad`` scheduler: runs an AppDef on Kubernetes inside an MCAD AppWrapper.

The Multi-Cluster App Dispatcher (MCAD) queues an ``AppWrapper`` (``mcad.ibm.com/v1beta1``)
until the cluster can hold all of it, then creates the objects it wraps. Here an AppWrapper
wraps, as ``GenericItems``:

- one Pod per replica (the same pod as the ``kubernetes`` scheduler renders, hostname
  ``{role}-{replica}`` in subdomain ``{app}``), each with its ``custompodresources`` so MCAD can
  account for it,
- a headless Service ``{app}`` (rank-0 discovery by DNS: ``{role}-0.{app}``; the rank-0 pod
  itself gets its own IP),
- with ``coscheduler_name``, a PodGroup (``scheduling.sigs.k8s.io/v1alpha1``, scheduler-plugins
  coscheduling) of ``minMember`` = all replicas, and pods scheduled by that scheduler, for gang
  scheduling.

``schedulingSpec.minAvailable`` is the total replica count; with retries, MCAD requeues the
wrapper up to ``min(max_retries)`` times. The API server validates the AppWrapper against its
CRD and each wrapped object by its own API (server-side dry runs) before anything is created.

Overlays: pods take ``set_overlay(role, "kubernetes", "V1Pod", ...)`` and then
``set_overlay(role, "kubernetes_mcad", "V1Pod", ...)`` (app-level overlays first); the wrapper
takes ``set_overlay(app, "kubernetes_mcad", "AppWrapper", ...)``.

>>> from anylaunch.specs import AppDef, Role, Resource
>>> app = AppDef("hello", [Role("echo", "busybox", entrypoint="echo", args=["hi"],
...                             resource=Resource(cpu=1, gpu=0, memMB=256))])
>>> request = create_scheduler("demo").submit_dryrun(app, {}).request
>>> [obj["kind"] for obj in request.objects]
['ConfigMap', 'AppWrapper']
>>> [i["generictemplate"]["kind"] for i in request.objects[1]["spec"]["resources"]["GenericItems"]]
['Pod', 'Service']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from anylaunch.schedulers.common.capacity import Capacity
from anylaunch.schedulers.kubernetes.common import (
    KubernetesSchedulerBase,
)
from anylaunch.schedulers.kubernetes.names import (
    KubernetesCommonOpts,
    is_dns_subdomain,
    make_app_name,
    role_dns_names,
)
from anylaunch.schedulers.kubernetes.pods import apply_overlays
from anylaunch.schedulers.kubernetes.request import (
    KubernetesRequest,
    app_labels,
    headless_service,
)
from anylaunch.schedulers.kubernetes.state import (
    AppView,
    ReplicaView,
    newest,
    pod_replica_state,
    replica_pods_of,
)
from anylaunch.specs.api import AppDef, AppState, Role
from anylaunch.specs.errors import InvalidRunConfigException

__all__ = [
    "APPWRAPPER_OVERLAY_BLOCKLIST",
    "MCAD_API_VERSION",
    "PODGROUP_API_VERSION",
    "KubernetesMCADOpts",
    "KubernetesMCADScheduler",
    "create_scheduler",
]

BACKEND = "kubernetes_mcad"
MODE = "appwrapper"
MCAD_API_VERSION = "mcad.ibm.com/v1beta1"
PODGROUP_API_VERSION = "scheduling.sigs.k8s.io/v1alpha1"
#: The label by which the coscheduling plugin finds a pod's PodGroup.
PODGROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
#: The label MCAD puts on what it dispatches for a wrapper.
APPWRAPPER_LABEL = "appwrapper.mcad.ibm.com"
#: AppWrapper overlay fields anylaunch owns.
APPWRAPPER_OVERLAY_BLOCKLIST = ["metadata.name", "metadata.namespace"]
_SUGGESTION = "Role fields (image, entrypoint, args, env, resource, ...) set these"

#: AppWrapper states (``status.state``) → app states.
MCAD_STATES: dict[str, AppState] = {
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "RunningHoldCompletion": AppState.RUNNING,
    "Completed": AppState.SUCCEEDED,
    "Failed": AppState.FAILED,
    "Deleted": AppState.CANCELLED,
}


@dataclass
class KubernetesMCADOpts(KubernetesCommonOpts):
    """Run options of the ``kubernetes_mcad`` scheduler."""

    priority: int | None = None
    """AppWrapper priority: MCAD dispatches higher values first."""

    coscheduler_name: str | None = None
    """Name of a coscheduling secondary scheduler (scheduler-plugins): the pods use it and a PodGroup gangs them."""

    def check(self) -> None:
        """Raises InvalidRunConfigException for values no cluster accepts."""
        super().check()
        if self.coscheduler_name is not None and not is_dns_subdomain(self.coscheduler_name):
            # the pods' spec.schedulerName: the API server refuses what is not DNS-1123
            raise InvalidRunConfigException(
                "coscheduler_name",
                self.coscheduler_name,
                "is empty" if not self.coscheduler_name.strip() else "is not a DNS-1123 name",
                "name the secondary scheduler in lowercase letters, digits, '-' and '.', e.g. "
                "scheduler-plugins-scheduler, or drop it",
            )


class KubernetesMCADScheduler(KubernetesSchedulerBase):
    """Runs apps on Kubernetes inside MCAD AppWrappers; app handles are
    ``kubernetes_mcad://{session}/{namespace}:{name}`` (constructor arguments: see
    :class:`KubernetesSchedulerBase`)."""

    backend_name = BACKEND
    array_refusal = (
        "an AppWrapper is admitted and dispatched as one gang (all of its pods or none), "
        "while an array's indices must start and fail on their own, at most K at once; "
        "run the array with the kubernetes scheduler (same cluster, jobs mode)"
    )
    opts_class = KubernetesMCADOpts
    pod_overlay_namespaces = ("kubernetes", BACKEND)

    def _workload_kinds(self, mode: str) -> list[tuple[str, str]]:
        # MCAD removes what it dispatched when its wrapper goes; the rest makes sure of it
        return [
            (MCAD_API_VERSION, "AppWrapper"),
            ("v1", "Service"),
            (PODGROUP_API_VERSION, "PodGroup"),
            ("v1", "Pod"),
        ]

    def _check_capacity(self, app: AppDef, cfg: Mapping[str, Any]) -> Capacity:
        """No signal: MCAD queues the AppWrapper and dispatches it by its own accounting
        (aggregate free resources, its quota trees, backoff and requeueing), of which the API
        offers no read-only answer; a node check would say "no" to what MCAD exists to queue.
        """
        return Capacity.unknown(
            "MCAD queues the AppWrapper and dispatches it by its own accounting (aggregate "
            "free resources, quota trees, requeueing); no read-only call tells whether it "
            "would dispatch it now"
        )

    def _render(self, app: AppDef, opts: KubernetesMCADOpts) -> KubernetesRequest:
        name = make_app_name(app.name)
        namespace = opts.namespace
        labels = app_labels(BACKEND, MODE, name, app)
        items: list[dict[str, Any]] = []
        pod_labels = {**labels, APPWRAPPER_LABEL: name}
        if opts.coscheduler_name:
            pod_labels[PODGROUP_LABEL] = name
            items.append(
                {
                    "replicas": 1,
                    "generictemplate": {
                        "apiVersion": PODGROUP_API_VERSION,
                        "kind": "PodGroup",
                        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
                        "spec": {
                            "minMember": sum(r.min_replicas or r.num_replicas for r in app.roles)
                        },
                    },
                }
            )
        for rep in self._replica_pods(
            app,
            opts,
            name,
            pod_labels,
            rank0_host=f"{role_dns_names(app)[0]}-0.{name}",
            subdomain=name,
            scheduler_name=opts.coscheduler_name,
        ):
            pod = rep.pod
            pod["metadata"]["name"] = f"{name}-{rep.role_label}-{rep.replica_id}"
            pod["metadata"]["namespace"] = namespace
            main = next(c for c in pod["spec"]["containers"] if c["name"] == rep.role_label)
            resources = main.get("resources", {})
            items.append(
                {
                    "replicas": 1,
                    "custompodresources": [
                        {
                            "replicas": 1,
                            "requests": dict(resources.get("requests", {})),
                            "limits": dict(resources.get("limits", {})),
                        }
                    ],
                    "generictemplate": pod,
                }
            )
        items.append(
            {"replicas": 1, "generictemplate": headless_service(app, name, namespace, labels)}
        )

        spec: dict[str, Any] = {
            "resources": {"GenericItems": items},
            "schedulingSpec": {"minAvailable": sum(role.num_replicas for role in app.roles)},
        }
        retries = min(role.max_retries for role in app.roles)
        if retries > 0:
            spec["schedulingSpec"]["requeuing"] = {"maxNumRequeuings": retries}
        if opts.priority is not None:
            spec["priority"] = opts.priority
        wrapper: dict[str, Any] = {
            "apiVersion": MCAD_API_VERSION,
            "kind": "AppWrapper",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": spec,
        }
        apply_overlays(
            wrapper, [(app, BACKEND)], "AppWrapper", APPWRAPPER_OVERLAY_BLOCKLIST, _SUGGESTION
        )
        embedded = [item["generictemplate"] for item in items]
        return self._recorded_request(app, MODE, labels, wrapper, embedded)

    def _replicas(
        self, view: AppView, roles: Sequence[Role], role_labels: Mapping[str, str]
    ) -> tuple[AppState | None, list[ReplicaView], str]:
        wrappers = [w for w in view.workloads if w.get("kind") == "AppWrapper"] or view.workloads
        wrapper = newest(wrappers)
        status = (wrapper or {}).get("status") or {}
        wrapper_state = MCAD_STATES.get(status.get("state", ""))
        msg = str(status.get("message", ""))
        for cond in status.get("conditions") or []:
            if cond.get("message"):
                msg = msg or str(cond["message"])
        replicas: list[ReplicaView] = []
        for label, i, pod in replica_pods_of(view, roles, role_labels):
            if pod is not None:
                state, pod_msg = pod_replica_state(pod)
                replicas.append(ReplicaView(label, i, state, pod_msg, pod["metadata"]["name"]))
                continue
            state = AppState.SUBMITTED if wrapper_state is None else wrapper_state
            if state == AppState.RUNNING:  # dispatched, this pod not created yet
                state = AppState.PENDING
            replicas.append(ReplicaView(label, i, state))
        if wrapper is None:
            return None, replicas, msg
        if wrapper_state is not None and wrapper_state.is_terminal():
            return wrapper_state, replicas, msg
        if view.pods:
            return None, replicas, msg  # the pods know best
        return wrapper_state or AppState.SUBMITTED, replicas, msg


def create_scheduler(session_name: str, **kwargs: Any) -> KubernetesMCADScheduler:
    """Creates the ``kubernetes_mcad`` scheduler (the registry's factory; see ``factory_kwargs``).

    >>> create_scheduler("demo").backend
    'kubernetes_mcad'
    """
    return KubernetesMCADScheduler.from_kwargs(session_name, kwargs)
