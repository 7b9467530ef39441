"""The request of the Kubernetes schedulers (no I/O): the objects to create and how they print
(secret env values masked), the app's labels, its replicas' pods and its headless Service. The
app record is :mod:`~anylaunch.schedulers.kubernetes.record`'s.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anylaunch.schedulers.common.job_metadata import job_metadata, plain_values
from anylaunch.schedulers.kubernetes.names import (
    LABEL_APP_ID,
    LABEL_APP_NAME,
    LABEL_MANAGED_BY,
    LABEL_MODE,
    LABEL_REPLICA_ID,
    LABEL_ROLE,
    LABEL_ROLE_INDEX,
    LABEL_SCHEDULER,
    MANAGED_BY,
    label_value,
    role_dns_names,
)
from anylaunch.schedulers.kubernetes.pods import (
    PodOptions,
    apply_pod_overlays,
    port_name,
    replica_role,
    role_to_pod,
)
from anylaunch.specs.api import AppDef, Role
from anylaunch.specs.secrets import mask_env


@dataclass
class KubernetesRequest:
    """The native request of the Kubernetes schedulers: the objects to create, in order.

    ``objects[0]`` is or carries the app record (see
    :mod:`~anylaunch.schedulers.kubernetes.record`): once it is created the app exists.
    ``embedded_objects`` are the objects a custom resource (Volcano Job, AppWrapper) will
    create (pods, services, ...): each is validated by its own API before submission, since a
    CRD's schema does not check them. With ``rank0_pod_ip`` the objects after ``rank0_index``
    hold :data:`RANK0_IP_PLACEHOLDER` until ``schedule`` learns the rank-0 pod's IP.
    """

    scheduler: str
    mode: str
    namespace: str
    name: str
    objects: list[dict[str, Any]]
    embedded_objects: list[dict[str, Any]] = field(default_factory=list)
    rank0_pod_ip: bool = False
    rank0_index: int = 0
    rank0_timeout: float = 300.0
    #: Docker workspace images to build (and push to ``image_repo``) before submission.
    workspace_builds: list[Any] = field(default_factory=list)

    @property
    def app_id(self) -> str:
        """``{namespace}:{name}``."""
        return f"{self.namespace}:{self.name}"

    def __str__(self) -> str:
        return format_request(self)

    __repr__ = __str__


#: The rank-0 host of the non-rank-0 replicas with ``rank0_host=pod_ip``, until known.
RANK0_IP_PLACEHOLDER = "<rank-0 pod IP: set at submission>"


def fill_rank0_ip(objects: Any, ip: str) -> None:
    """Puts the rank-0 pod's IP where :data:`RANK0_IP_PLACEHOLDER` stands in ``objects``.

    >>> objects = [{"env": [{"name": "ANYLAUNCH_RANK0_HOST", "value": RANK0_IP_PLACEHOLDER}]}]
    >>> fill_rank0_ip(objects, "10.0.0.7")
    >>> objects[0]["env"][0]["value"]
    '10.0.0.7'
    """
    if isinstance(objects, dict):
        for key, value in objects.items():
            if value == RANK0_IP_PLACEHOLDER:
                objects[key] = ip
            else:
                fill_rank0_ip(value, ip)
    elif isinstance(objects, list):
        for item in objects:
            fill_rank0_ip(item, ip)


def _mask_env(obj: Any) -> None:
    """Masks the values of secret env vars (:func:`~anylaunch.specs.secrets.mask_env`) in every
    container found in ``obj``.

    >>> pod = {"containers": [{"image": "i", "env": [{"name": "DB_PASS", "value": "pw"},
    ...     {"name": "LR", "value": "0.1"}, {"name": "IP", "valueFrom": {}}]}]}
    >>> _mask_env(pod)
    >>> [var.get("value") for var in pod["containers"][0]["env"]]
    ['***', '0.1', None]
    """
    if isinstance(obj, dict):
        env = obj.get("env")
        if isinstance(env, list) and "image" in obj:
            plain = [v for v in env if isinstance(v, dict) and "value" in v and "name" in v]
            masked = mask_env({str(v["name"]): str(v["value"]) for v in plain})
            for var in plain:
                var["value"] = masked[str(var["name"])]
        for value in obj.values():
            _mask_env(value)
    elif isinstance(obj, list):
        for item in obj:
            _mask_env(item)


def format_request(request: KubernetesRequest) -> str:
    """The objects as a multi-document YAML stream, secret-looking env values masked.

    >>> req = KubernetesRequest("kubernetes", "jobs", "default", "a-1", objects=[
    ...     {"kind": "Pod", "spec": {"containers": [{"image": "i", "env": [
    ...         {"name": "API_TOKEN", "value": "s3cr3t"}]}]}}])
    >>> print(format_request(req))
    # kubernetes app default:a-1 (mode: jobs), 1 object(s)
    kind: Pod
    spec:
      containers:
      - image: i
        env:
        - name: API_TOKEN
          value: '***'
    """
    import copy

    import yaml

    objects = copy.deepcopy(request.objects)
    _mask_env(objects)
    header = (
        f"# {request.scheduler} app {request.app_id} (mode: {request.mode}), "
        f"{len(objects)} object(s)"
    )
    for build in request.workspace_builds:
        header += f"\n# workspace: {build.summary()}"
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml: ~20x faster
    body = yaml.dump_all(objects, Dumper=dumper, sort_keys=False, default_flow_style=False)
    return f"{header}\n{body}".rstrip("\n")


def app_labels(scheduler: str, mode: str, name: str, app: AppDef) -> dict[str, str]:
    """Labels every object of an app carries: what names the app, and the job's metadata
    (:func:`~anylaunch.schedulers.common.job_metadata.job_metadata`) as valid label values
    (at most 63 characters of ``[A-Za-z0-9_.-]``, ``NA`` for the not-available sentinel).

    >>> import anylaunch
    >>> labels = app_labels("kubernetes", "jobs", "t-1", AppDef("t", [Role("r", "img")]))
    >>> labels["anylaunch/scheduler"], labels["anylaunch/version"] == anylaunch.__version__
    ('kubernetes', True)
    """
    labels = {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_SCHEDULER: scheduler,
        LABEL_MODE: mode,
        LABEL_APP_ID: name,
    }
    value = label_value(app.name)
    if value:
        labels[LABEL_APP_NAME] = value
    for key, meta in plain_values(job_metadata(app, scheduler)).items():
        labels[key] = label_value(meta)
    return labels


def replica_labels(
    labels: Mapping[str, str], role_label: str, role_index: int, replica_id: int
) -> dict[str, str]:
    """The app's labels plus those naming one replica (how describe finds its objects)."""
    return {
        **labels,
        LABEL_ROLE: role_label,
        LABEL_ROLE_INDEX: str(role_index),
        LABEL_REPLICA_ID: str(replica_id),
    }


def headless_service(
    app: AppDef, name: str, namespace: str, labels: Mapping[str, str]
) -> dict[str, Any]:
    """The app's headless Service ``{name}``: with each pod's hostname and subdomain it gives
    the replicas DNS names (``{role}-{replica}.{name}``) on clusters with DNS; it exposes every
    port of every role.

    >>> from anylaunch.specs import AppDef, Role
    >>> app = AppDef("a", [Role("w", "i", port_map={"c10d": 29500}),
    ...                    Role("ps", "i", port_map={"c10d": 29501, "tb": 6006})])
    >>> [(p["name"], p["port"]) for p in headless_service(app, "a-1", "ml", {})["spec"]["ports"]]
    [('c10d', 29500), ('c10d-1', 29501), ('tb', 6006)]
    """
    ports: dict[int, str] = {}
    for role in app.roles:
        for port_key, port in role.port_map.items():
            if port not in ports:
                ports[port] = _unique_port_name(port_key, set(ports.values()))
    service: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "clusterIP": "None",  # headless: DNS records per pod, no virtual IP
            "publishNotReadyAddresses": True,  # resolvable before readiness
            "selector": {LABEL_APP_ID: name},
        },
    }
    if ports:
        service["spec"]["ports"] = [
            {"name": pname, "port": port, "targetPort": port} for port, pname in ports.items()
        ]
    return service


def _unique_port_name(name: str, taken: set[str]) -> str:
    base = port_name(name)
    candidate, n = base, 1
    while candidate in taken:
        candidate = f"{base[:12]}-{n}"
        n += 1
    return candidate


@dataclass
class ReplicaPod:
    """One replica's pod, rendered and overlaid, and what the workload around it needs."""

    role: Role
    """The role as given."""
    replica: Role
    """The role with this replica's macros substituted (overlays of workloads apply to it)."""
    role_label: str
    replica_id: int
    labels: dict[str, str]
    """The replica's labels (before overlays)."""
    pod: dict[str, Any]


def replica_pods(
    app: AppDef,
    *,
    app_id: str,
    labels: Mapping[str, str],
    options: PodOptions,
    rank0_host: str,
    overlay_namespaces: Sequence[str],
    subdomain: str | None = None,
) -> Iterator[ReplicaPod]:
    """The pod of every replica, role by role. Rank 0 finds itself through its own pod IP, the
    others through ``rank0_host``; with a ``subdomain`` each pod is ``{role}-{replica}`` in it.
    The ``V1Pod`` overlays of each of ``overlay_namespaces`` apply in order, the app's before
    the role's.

    >>> from anylaunch.specs import AppDef, Role
    >>> app = AppDef("a", [Role("w", "img", entrypoint="x", num_replicas=2)])
    >>> pods = list(replica_pods(app, app_id="ml:a-1", labels={}, options=PodOptions(),
    ...                          rank0_host="w-0.a-1", overlay_namespaces=["kubernetes"],
    ...                          subdomain="a-1"))
    >>> [(p.role_label, p.replica_id, p.pod["spec"]["hostname"]) for p in pods]
    [('w', 0, 'w-0'), ('w', 1, 'w-1')]
    >>> pods[1].pod["spec"]["containers"][0]["env"][0]
    {'name': 'ANYLAUNCH_RANK0_HOST', 'value': 'w-0.a-1'}
    """
    for role_idx, (role, role_label) in enumerate(zip(app.roles, role_dns_names(app), strict=True)):
        for i in range(role.num_replicas):
            replica = replica_role(role, app_id, i)
            rep_labels = replica_labels(labels, role_label, role_idx, i)
            pod = role_to_pod(
                replica,
                container=role_label,
                labels=rep_labels,
                rank0_host=None if role_idx == 0 and i == 0 else rank0_host,
                options=options,
                hostname=f"{role_label}-{i}" if subdomain else None,
                subdomain=subdomain,
            )
            targets = [t for ns in overlay_namespaces for t in ((app, ns), (replica, ns))]
            apply_pod_overlays(pod, targets, role_label, options.image_pull_policy)
            yield ReplicaPod(role, replica, role_label, i, rep_labels, pod)
