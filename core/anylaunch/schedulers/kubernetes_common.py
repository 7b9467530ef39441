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
import secrets
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
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
from anylaunch.schedulers.shared import RANK0_ENV, aggregate_replica_states
from anylaunch.specs.api import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    BindMount,
    DeviceMount,
    ReplicaStatus,
    Resource,
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
from anylaunch.specs.structured_opts import StructuredOpts
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

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_APP_ID = "anylaunch.io/app-id"
LABEL_APP_NAME = "anylaunch.io/app-name"
LABEL_SCHEDULER = "anylaunch.io/scheduler"
LABEL_MODE = "anylaunch.io/mode"
LABEL_ROLE = "anylaunch.io/role"
LABEL_ROLE_INDEX = "anylaunch.io/role-index"
LABEL_REPLICA_ID = "anylaunch.io/replica-id"
ANNOTATION_CANCELLED = "anylaunch.io/cancelled"
ANNOTATION_STOPPED = "anylaunch.io/stopped"
MANAGED_BY = "anylaunch"
RECORD_KEY = "app.json"

#: Pod overlay fields anylaunch owns. The role's own container is checked after the overlay is
#: applied (:func:`apply_pod_overlays`): its image, command, args and env come from the Role,
#: while other containers (sidecars) may be added freely.
POD_OVERLAY_BLOCKLIST = ["metadata.name", "metadata.namespace", "spec.restartPolicy"]
_ROLE_CONTAINER_FIELDS = {
    "image": "image",
    "command": "entrypoint",
    "args": "args",
    "env": "env",
    "name": "name",
}
_SHM_VOLUME = "dshm"
_FIELD_REF = re.compile(r"\$\((fieldRef|resourceFieldRef):([A-Za-z0-9_.\[\]'/-]+)\)")
_NOT_DNS = re.compile(r"[^a-z0-9-]+")
_NOT_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
#: How long a record without its workload counts as "still being created".
_CREATING_GRACE_S = 60.0
#: How many app ids go into one ``in (...)`` label selector.
_SELECTOR_CHUNK = 50


# ---------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------


def dns_label(text: str, max_len: int = 63) -> str:
    """A DNS-1123 label made from ``text``: lowercase letters, digits and inner ``-``.

    >>> dns_label("My_Trainer.v2")
    'my-trainer-v2'
    >>> dns_label("__", 10)
    'x'
    """
    label = _NOT_DNS.sub("-", text.lower()).strip("-")[:max_len].strip("-")
    return label or "x"


def label_value(text: str) -> str:
    """A valid label value made from ``text`` (at most 63 characters).

    >>> label_value("my app/v1")
    'my-app-v1'
    """
    return _NOT_LABEL.sub("-", text)[:63].strip("-_.")


def make_app_name(app_name: str) -> str:
    """A unique object name for an app: a DNS-1035 label (starts with a letter), at most 30
    characters so ``{name}-{role}-{replica}`` stays a valid label value.

    >>> name = make_app_name("Train Job")
    >>> name.startswith("train-job-") and len(name) == len("train-job-") + 6
    True
    >>> make_app_name("123")[:6]
    'a-123-'
    """
    base = dns_label(app_name, 23)
    if not base[0].isalpha():
        base = dns_label(f"a-{base}", 23)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    suffix = "".join(secrets.choice(alphabet) for _ in range(6))
    return f"{base}-{suffix}"


def parse_app_id(app_id: str) -> tuple[str, str] | None:
    """Splits ``{namespace}:{name}``; None if it is not of that form.

    >>> parse_app_id("default:train-abc123")
    ('default', 'train-abc123')
    >>> parse_app_id("no-namespace") is None
    True
    """
    if not isinstance(app_id, str):
        return None
    namespace, sep, name = app_id.partition(":")
    if not sep or not namespace or not name or dns_label(name) != name:
        return None
    return namespace, name


def role_dns_names(app: AppDef) -> list[str]:
    """One DNS label per role (at most 20 characters), distinct within the app.

    >>> from anylaunch.specs import AppDef, Role
    >>> role_dns_names(AppDef("a", [Role("Trainer", "i"), Role("trainer_", "i")]))
    ['trainer', 'trainer-1']
    """
    names: list[str] = []
    for i, role in enumerate(app.roles):
        name = dns_label(role.name, 20)
        if name in names:
            name = f"{dns_label(role.name, 14)}-{i}"
        names.append(name)
    return names


def field_ref(path: str) -> str:
    """An env value that the Kubernetes schedulers turn into a downward-API field reference.

    >>> from anylaunch.specs import Role
    >>> role = Role("w", "busybox", entrypoint="sh", env={"POD_IP": field_ref("status.podIP")})
    >>> role.env["POD_IP"]
    '$(fieldRef:status.podIP)'
    """
    value = f"$(fieldRef:{path})"
    if not _FIELD_REF.fullmatch(value):
        raise InvalidSpecError(
            "field_ref(path)", path, "is not a field path", "e.g. 'status.podIP'"
        )
    return value


# ---------------------------------------------------------------------------------------------
# Run options
# ---------------------------------------------------------------------------------------------


@dataclass
class KubernetesCommonOpts(StructuredOpts):
    """Run options shared by the Kubernetes schedulers."""

    namespace: str = "default"
    """Namespace to create the app's objects in."""

    service_account: str | None = None
    """Service account the pods run as (default: the namespace's default account)."""

    priority_class: str | None = None
    """PriorityClass of the pods (must exist on the cluster)."""

    image_pull_policy: str = "IfNotPresent"
    """imagePullPolicy of the containers: Always, IfNotPresent or Never."""

    validate_spec: bool = False
    """Have the API server validate every object at dryrun (a server-side dry run; needs the cluster). Submission always validates first."""

    reserved_millicpu: int = 100
    """CPU (millicores) left to the node's daemons: subtracted from each pod's cpu request (the limit stays the full amount)."""

    reserved_memmb: int = 1024
    """Memory (MiB) left to the node's daemons: subtracted from each pod's memory request (the limit stays the full amount)."""

    def check(self) -> None:
        """Raises InvalidRunConfigException for values no cluster accepts."""
        if dns_label(self.namespace) != self.namespace:
            raise InvalidRunConfigException(
                "namespace",
                self.namespace,
                "is not a DNS-1123 label",
                "use lowercase letters, digits and '-', e.g. 'default'",
            )
        if self.image_pull_policy not in _PULL_POLICIES:
            raise InvalidRunConfigException(
                "image_pull_policy",
                self.image_pull_policy,
                f"is not one of {', '.join(_PULL_POLICIES)}",
                "use IfNotPresent for images present on the nodes",
            )
        for name in ("reserved_millicpu", "reserved_memmb"):
            if getattr(self, name) < 0:
                raise InvalidRunConfigException(name, getattr(self, name), "must be >= 0", "e.g. 0")


def opts_from_cfg(cls: type[KubernetesCommonOpts], cfg: Mapping[str, CfgVal]) -> Any:
    """Parses the scheduler's own options from a resolved cfg (a workspace's are skipped)."""
    known = cls.as_runopts()
    opts = cls.from_cfg({k: v for k, v in cfg.items() if known.get(k) is not None})
    opts.check()
    return opts


# ---------------------------------------------------------------------------------------------
# Pods
# ---------------------------------------------------------------------------------------------


def container_resources(
    resource: Resource, reserved_millicpu: int = 0, reserved_memmb: int = 0
) -> dict[str, dict[str, str]]:
    """Requests and limits for a Resource: limits are what the role asks for; requests leave
    ``reserved_*`` to the node's daemons so a whole-node role still fits on the node.

    >>> from anylaunch.specs import Resource
    >>> container_resources(Resource(cpu=2, gpu=1, memMB=2048), 100, 1024)
    {'limits': {'cpu': '2000m', 'memory': '2048Mi', 'nvidia.com/gpu': '1'}, 'requests': {'cpu': '1900m', 'memory': '1024Mi', 'nvidia.com/gpu': '1'}}
    """
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    if resource.cpu > 0:
        mcpu = resource.cpu * 1000
        limits["cpu"] = f"{mcpu}m"
        requests["cpu"] = f"{max(mcpu - reserved_millicpu, 0)}m"
    if resource.memMB > 0:
        limits["memory"] = f"{resource.memMB}Mi"
        requests["memory"] = f"{max(resource.memMB - reserved_memmb, 0)}Mi"
    if resource.gpu > 0:
        limits["nvidia.com/gpu"] = requests["nvidia.com/gpu"] = str(resource.gpu)
    for device, count in resource.devices.items():
        if count > 0:  # extended resources: requests must equal limits
            limits[device] = requests[device] = str(count)
    out: dict[str, dict[str, str]] = {}
    if limits:
        out["limits"] = limits
    if requests:
        out["requests"] = requests
    return out


def _env_var(name: str, value: str, container: str) -> dict[str, Any]:
    match = _FIELD_REF.fullmatch(value)
    if match is None:
        return {"name": name, "value": value}
    kind, path = match.groups()
    if kind == "fieldRef":
        return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
    return {
        "name": name,
        "valueFrom": {"resourceFieldRef": {"containerName": container, "resource": path}},
    }


def port_name(name: str) -> str:
    # an IANA service name: <= 15 lowercase alphanumerics and '-', with a letter
    port = dns_label(name, 15)
    return port if any(c.isalpha() for c in port) else f"p-{port}"[:15]


@dataclass
class PodOptions:
    """What every pod of an app shares (from the run options)."""

    service_account: str | None = None
    priority_class: str | None = None
    image_pull_policy: str = "IfNotPresent"
    reserved_millicpu: int = 0
    reserved_memmb: int = 0
    scheduler_name: str | None = None


def role_to_pod(
    role: Role,
    *,
    container: str,
    labels: Mapping[str, str],
    rank0_host: str | None,
    options: PodOptions,
    hostname: str | None = None,
    subdomain: str | None = None,
) -> dict[str, Any]:
    """A Pod manifest (``apiVersion``/``kind``/``metadata``/``spec``) running one replica of a
    role whose macros are already substituted.

    ``rank0_host`` is the value of ``ANYLAUNCH_RANK0_HOST``; None means "this is rank 0": the
    pod's own IP (downward API). Env values written as ``$(fieldRef:PATH)`` (see
    :func:`field_ref`) become field references.

    >>> from anylaunch.specs import Role, Resource
    >>> role = Role("w", "busybox", entrypoint="echo", args=["hi"],
    ...             resource=Resource(cpu=1, gpu=0, memMB=512))
    >>> pod = role_to_pod(role, container="w", labels={"a": "b"}, rank0_host=None,
    ...                   options=PodOptions())
    >>> pod["spec"]["containers"][0]["command"], pod["spec"]["restartPolicy"]
    (['echo', 'hi'], 'Never')
    >>> pod["spec"]["containers"][0]["env"][0]
    {'name': 'ANYLAUNCH_RANK0_HOST', 'valueFrom': {'fieldRef': {'fieldPath': 'status.podIP'}}}
    """
    env = dict(role.env)
    env.setdefault("PYTHONUNBUFFERED", "1")  # lines reach the pod log as they are printed
    env[RANK0_ENV] = rank0_host if rank0_host is not None else field_ref("status.podIP")
    env_list = [_env_var(RANK0_ENV, env.pop(RANK0_ENV), container)]
    env_list += [_env_var(k, v, container) for k, v in env.items()]

    volumes: list[dict[str, Any]] = [{"name": _SHM_VOLUME, "emptyDir": {"medium": "Memory"}}]
    mounts: list[dict[str, Any]] = [{"name": _SHM_VOLUME, "mountPath": "/dev/shm"}]
    privileged = False
    for i, mount in enumerate(role.mounts):
        vol = f"mount-{i}"
        if isinstance(mount, BindMount):
            volumes.append({"name": vol, "hostPath": {"path": mount.src_path}})
            mounts.append({"name": vol, "mountPath": mount.dst_path, "readOnly": mount.read_only})
        elif isinstance(mount, VolumeMount):
            claim = {"claimName": mount.src, "readOnly": mount.read_only}
            volumes.append({"name": vol, "persistentVolumeClaim": claim})
            mounts.append({"name": vol, "mountPath": mount.dst_path, "readOnly": mount.read_only})
        elif isinstance(mount, DeviceMount):
            # Kubernetes has no --device: a host device needs a privileged container
            volumes.append({"name": vol, "hostPath": {"path": mount.src_path}})
            mounts.append({"name": vol, "mountPath": mount.dst_path})
            privileged = True

    main: dict[str, Any] = {
        "name": container,
        "image": role.image,
        "imagePullPolicy": options.image_pull_policy,
        "command": [role.entrypoint, *role.args],
        "env": env_list,
        "resources": container_resources(
            role.resource, options.reserved_millicpu, options.reserved_memmb
        ),
        "volumeMounts": mounts,
    }
    if role.port_map:
        main["ports"] = [
            {"name": port_name(name), "containerPort": port} for name, port in role.port_map.items()
        ]
    if privileged:
        main["securityContext"] = {"privileged": True}

    spec: dict[str, Any] = {
        "restartPolicy": "Never",  # retries belong to the workload controller
        "containers": [main],
        "volumes": volumes,
        "enableServiceLinks": False,  # no env var per Service in the namespace
    }
    if hostname:
        spec["hostname"] = hostname
    if subdomain:
        spec["subdomain"] = subdomain
    instance_type = role.resource.capabilities.get("node.kubernetes.io/instance-type")
    if instance_type:
        spec["nodeSelector"] = {"node.kubernetes.io/instance-type": str(instance_type)}
    if options.service_account:
        spec["serviceAccountName"] = options.service_account
    if options.priority_class:
        spec["priorityClassName"] = options.priority_class
    if options.scheduler_name:
        spec["schedulerName"] = options.scheduler_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": dict(labels)},
        "spec": spec,
    }


def replica_role(role: Role, app_id: str, replica_id: int) -> Role:
    """The role with macros substituted for one replica (``img_root`` is empty in images)."""
    values = macros.Values(
        img_root="", app_id=app_id, replica_id=str(replica_id), rank0_env=RANK0_ENV
    )
    return values.apply(role)


def apply_overlays(
    base: dict[str, Any],
    targets: Sequence[tuple[AppDef | Role, str]],
    kind: str,
    blocklist: list[str],
    suggestion: str,
) -> None:
    """Applies ``get_overlay(target, namespace, kind)`` of each target in order, after checking
    it against ``blocklist``."""
    from anylaunch.specs.overlays import apply_overlay, get_overlay, validate_overlay

    for target, namespace in targets:
        overlay = get_overlay(target, namespace, kind)
        if not overlay:
            continue
        validate_overlay(
            overlay,
            blocklist=blocklist,
            overlay_name=f"{namespace}/{kind} overlay",
            suggestion=suggestion,
        )
        apply_overlay(base, overlay)


def apply_pod_overlays(
    pod: dict[str, Any],
    targets: Sequence[tuple[AppDef | Role, str]],
    container: str,
    pull_policy: str | None = None,
) -> None:
    """Applies the ``V1Pod`` overlays of ``targets`` to ``pod``; the role's container must come
    out with the image, command, args and env the Role gave it. Containers an overlay adds
    without an ``imagePullPolicy`` get ``pull_policy`` (the run option), like the role's.

    >>> from anylaunch.specs import Role
    >>> from anylaunch.specs.overlays import JOIN, set_overlay
    >>> role = Role("w", "busybox", entrypoint="true")
    >>> pod = role_to_pod(role, container="w", labels={}, rank0_host="h", options=PodOptions())
    >>> set_overlay(role, "kubernetes", "V1Pod", {"spec": {JOIN("containers", on="name"): [
    ...     {"name": "sidecar", "image": "proxy", "command": ["serve"]}]}})
    >>> apply_pod_overlays(pod, [(role, "kubernetes")], "w")
    >>> [c["name"] for c in pod["spec"]["containers"]]
    ['w', 'sidecar']
    >>> set_overlay(role, "kubernetes", "V1Pod", {"spec": {JOIN("containers", on="name"): [
    ...     {"name": "w", "image": "other"}]}})
    >>> apply_pod_overlays(pod, [(role, "kubernetes")], "w")
    Traceback (most recent call last):
    ...
    anylaunch.specs.overlays.InvalidOverlayError: V1Pod overlay key='spec.containers[name=w].image' is invalid: the role's container gets its image from the Role and an overlay must not change it. Fix: set Role.image instead
    """
    import copy

    from anylaunch.specs.overlays import InvalidOverlayError

    def role_container() -> dict[str, Any] | None:
        for c in pod.get("spec", {}).get("containers") or []:
            if isinstance(c, dict) and c.get("name") == container:
                return c
        return None

    main = role_container() or {}
    before = {key: copy.deepcopy(main.get(key)) for key in _ROLE_CONTAINER_FIELDS}
    apply_overlays(
        pod,
        targets,
        "V1Pod",
        POD_OVERLAY_BLOCKLIST,
        "Role fields (image, entrypoint, args, env, resource, ...) set these",
    )
    after = role_container()
    if after is None:
        raise InvalidOverlayError(
            "V1Pod overlay key",
            f"spec.containers[name={container}]",
            "the overlay removed or renamed the role's container",
            "keep it (add sidecars with JOIN('containers', on='name'), not PUT)",
        )
    spec = pod.get("spec", {})
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        if pull_policy and isinstance(c, dict) and "imagePullPolicy" not in c:
            c["imagePullPolicy"] = pull_policy
    for key, role_field in _ROLE_CONTAINER_FIELDS.items():
        if after.get(key) != before[key]:
            raise InvalidOverlayError(
                "V1Pod overlay key",
                f"spec.containers[name={container}].{key}",
                f"the role's container gets its {key} from the Role and an overlay must not "
                "change it",
                f"set Role.{role_field} instead",
            )


def role_record(role: Role) -> dict[str, Any]:
    """The role as JSON-friendly data (as given, before macros) for the app record; values of
    secret-looking env vars are masked (describe never hands them out).

    >>> role_record(Role("w", "img", entrypoint="x", env={"HF_TOKEN": "t", "LR": "1"}))["env"]
    {'HF_TOKEN': '***', 'LR': '1'}
    """
    from anylaunch.schedulers.shared import is_secret_env_name

    mounts: list[dict[str, Any]] = []
    for mount in role.mounts:
        kind = {BindMount: "bind", VolumeMount: "volume", DeviceMount: "device"}[type(mount)]
        mounts.append({"type": kind, **asdict(mount)})
    return {
        "name": role.name,
        "image": role.image,
        "entrypoint": role.entrypoint,
        "args": list(role.args),
        "env": {k: "***" if is_secret_env_name(k) else v for k, v in role.env.items()},
        "num_replicas": role.num_replicas,
        "min_replicas": role.min_replicas,
        "max_retries": role.max_retries,
        "retry_policy": role.retry_policy.value,
        "resource": {
            "cpu": role.resource.cpu,
            "gpu": role.resource.gpu,
            "memMB": role.resource.memMB,
            "capabilities": dict(role.resource.capabilities),
            "devices": dict(role.resource.devices),
        },
        "port_map": dict(role.port_map),
        "mounts": mounts,
    }


def role_from_record(data: Mapping[str, Any]) -> Role:
    """Inverse of :func:`role_record`."""
    mount_types: dict[str, Any] = {"bind": BindMount, "volume": VolumeMount, "device": DeviceMount}
    mounts = [
        mount_types[m["type"]](**{k: v for k, v in m.items() if k != "type"})
        for m in data.get("mounts", [])
    ]
    return Role(
        name=data["name"],
        image=data["image"],
        entrypoint=data["entrypoint"],
        args=list(data["args"]),
        env=dict(data["env"]),
        num_replicas=int(data["num_replicas"]),
        min_replicas=data.get("min_replicas"),
        max_retries=int(data["max_retries"]),
        retry_policy=RetryPolicy(data["retry_policy"]),
        resource=Resource(**data["resource"]),
        port_map=dict(data.get("port_map", {})),
        mounts=mounts,
    )


# ---------------------------------------------------------------------------------------------
# The request
# ---------------------------------------------------------------------------------------------


@dataclass
class KubernetesRequest:
    """The native request of the Kubernetes schedulers: the objects to create, in order.

    ``objects[0]`` is the app record (a ConfigMap). ``embedded_objects`` are the objects a
    custom resource (Volcano Job, AppWrapper) will create (pods, services, ...): each is
    validated by its own API before submission, since a CRD's schema does not check them. With ``rank0_pod_ip`` the objects after ``rank0_index``
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


def _mask_env(obj: Any) -> None:
    """Replaces the values of secret-looking env vars in every container found in ``obj``."""
    from anylaunch.schedulers.shared import is_secret_env_name

    if isinstance(obj, dict):
        env = obj.get("env")
        if isinstance(env, list) and "image" in obj:
            for var in env:
                if isinstance(var, dict) and "value" in var and is_secret_env_name(var["name"]):
                    var["value"] = "***"
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


def record_configmap(
    app: AppDef,
    *,
    scheduler: str,
    mode: str,
    namespace: str,
    name: str,
    session: str,
    labels: Mapping[str, str],
) -> dict[str, Any]:
    """The app record: a ConfigMap with the roles (as given) and how the app was submitted."""
    data = {
        "name": app.name,
        "session": session,
        "scheduler": scheduler,
        "mode": mode,
        "created": time.time(),
        "roles": [role_record(role) for role in app.roles],
        "role_labels": dict(zip([r.name for r in app.roles], role_dns_names(app), strict=True)),
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "data": {RECORD_KEY: json.dumps(data, sort_keys=True)},
    }


def app_labels(scheduler: str, mode: str, name: str, app_name: str) -> dict[str, str]:
    """Labels every object of an app carries."""
    labels = {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_SCHEDULER: scheduler,
        LABEL_MODE: mode,
        LABEL_APP_ID: name,
    }
    value = label_value(app_name)
    if value:
        labels[LABEL_APP_NAME] = value
    return labels


# ---------------------------------------------------------------------------------------------
# Pod status
# ---------------------------------------------------------------------------------------------

#: Waiting reasons that are just progress, not problems.
_NORMAL_WAITING = {"ContainerCreating", "PodInitializing"}


def _terminated_message(pod: Mapping[str, Any]) -> str:
    """``exit code N (Reason): message`` of the pod's first failed container, or ``""``."""
    statuses = pod.get("status", {}).get("containerStatuses") or []
    for status in statuses:
        term = (status.get("state") or {}).get("terminated") or (status.get("lastState") or {}).get(
            "terminated"
        )
        if term and term.get("exitCode", 0) != 0:
            text = f"exit code {term.get('exitCode')}"
            if term.get("reason"):
                text += f" ({term['reason']})"
            if term.get("message"):
                text += f": {term['message'].strip()}"
            return text
    return ""


def pending_reason(pod: Mapping[str, Any]) -> str:
    """Why a pod is not running yet: unschedulable, image pull errors, ... (``""`` if none).

    >>> pending_reason({"status": {"conditions": [{"type": "PodScheduled", "status": "False",
    ...     "reason": "Unschedulable", "message": "0/1 nodes are available: 1 Insufficient cpu."}]}})
    'Unschedulable: 0/1 nodes are available: 1 Insufficient cpu.'
    """
    status = pod.get("status", {})
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return f"{cond.get('reason', 'Unschedulable')}: {cond.get('message', '')}".strip()
    for container in (status.get("initContainerStatuses") or []) + (
        status.get("containerStatuses") or []
    ):
        waiting = (container.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") not in _NORMAL_WAITING:
            message = waiting.get("message", "")
            return f"{waiting.get('reason')}: {message}".strip().rstrip(":")
    if status.get("reason"):
        return f"{status['reason']}: {status.get('message', '')}".strip().rstrip(":")
    return ""


def pod_replica_state(pod: Mapping[str, Any]) -> tuple[AppState, str]:
    """The replica state a pod shows, and a message (pending reason or exit code).

    >>> pod_replica_state({"status": {"phase": "Failed", "containerStatuses": [
    ...     {"state": {"terminated": {"exitCode": 3, "reason": "Error"}}}]}})
    (<AppState.FAILED: 5>, 'exit code 3 (Error)')
    >>> pod_replica_state({"status": {"phase": "Running"}})
    (<AppState.RUNNING: 3>, '')
    """
    status = pod.get("status", {})
    phase = status.get("phase", "Pending")
    if phase == "Pending":
        return AppState.PENDING, pending_reason(pod)
    if phase == "Running":
        return AppState.RUNNING, ""
    if phase == "Succeeded":
        return AppState.SUCCEEDED, ""
    if phase == "Failed":
        reason = _terminated_message(pod)
        if not reason and status.get("reason"):
            reason = f"{status['reason']}: {status.get('message', '')}".strip().rstrip(":")
        return AppState.FAILED, reason
    return AppState.UNKNOWN, status.get("message", "")


def newest(objects: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The most recently created object (by creationTimestamp, then name)."""
    best: Mapping[str, Any] | None = None
    for obj in objects:
        meta = obj.get("metadata", {})
        key = (meta.get("creationTimestamp", ""), meta.get("name", ""))
        if best is None or key >= (
            best["metadata"].get("creationTimestamp", ""),
            best["metadata"].get("name", ""),
        ):
            best = obj
    return best


def _replica_key(obj: Mapping[str, Any]) -> tuple[str, int] | None:
    labels = obj.get("metadata", {}).get("labels") or {}
    try:
        return labels[LABEL_ROLE], int(labels[LABEL_REPLICA_ID])
    except (KeyError, ValueError):
        return None


def group_by_replica(
    objects: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, int], list[Mapping[str, Any]]]:
    """Objects keyed by (role label, replica id)."""
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for obj in objects:
        key = _replica_key(obj)
        if key is not None:
            groups.setdefault(key, []).append(obj)
    return groups


def app_state_of(states: Sequence[AppState]) -> AppState:
    """An app's state from its replicas' (:func:`aggregate_replica_states`), except that an app
    whose replicas have no pods yet is SUBMITTED: the API server took it, nothing runs yet.

    >>> app_state_of([AppState.SUCCEEDED, AppState.RUNNING])
    <AppState.RUNNING: 3>
    >>> app_state_of([])
    <AppState.SUBMITTED: 1>
    """
    if not states:
        return AppState.SUBMITTED
    return aggregate_replica_states(states)


@dataclass
class ReplicaView:
    """One replica as described: state, message, pod name and restarts."""

    role: str
    replica_id: int
    state: AppState
    msg: str = ""
    pod: str = ""
    restarts: int = 0


@dataclass
class AppView:
    """What one describe round trip learned about an app."""

    record: dict[str, Any]
    workloads: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Base scheduler
# ---------------------------------------------------------------------------------------------


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
