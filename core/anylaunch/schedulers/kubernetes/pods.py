"""Pod specs of the Kubernetes schedulers: a role's container (resources, env, ports, mounts) and pod, and overlays on them (no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from anylaunch.schedulers.common.roles import RANK0_ENV
from anylaunch.schedulers.kubernetes.names import (
    _FIELD_REF,
    _ROLE_CONTAINER_FIELDS,
    _SHM_VOLUME,
    OWNED_KEY_PREFIXES,
    POD_OVERLAY_BLOCKLIST,
    KubernetesCommonOpts,
    dns_label,
    field_ref,
    is_dns_subdomain,
)
from anylaunch.specs.api import (
    AppDef,
    BindMount,
    DeviceMount,
    Resource,
    Role,
    VolumeMount,
    macros,
)
from anylaunch.specs.errors import InvalidSpecError


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


def _literal(text: str) -> str:
    """``text`` escaped so that the kubelet passes it byte for byte: it expands ``$(VAR)`` in
    commands, args and env values (and turns ``$$`` into ``$``), so every ``$`` is doubled.

    >>> _literal("echo $(HOME) costs $5")
    'echo $$(HOME) costs $$5'
    """
    return text.replace("$", "$$")


def _env_var(name: str, value: str, container: str) -> dict[str, Any]:
    match = _FIELD_REF.fullmatch(value)
    if match is None:
        return {"name": name, "value": _literal(value)}
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

    @classmethod
    def from_opts(cls, opts: KubernetesCommonOpts, scheduler_name: str | None = None) -> PodOptions:
        """The pod options of the run options both Kubernetes schedulers share.

        >>> PodOptions.from_opts(KubernetesCommonOpts(service_account="sa")).service_account
        'sa'
        """
        return cls(
            service_account=opts.service_account,
            priority_class=opts.priority_class,
            image_pull_policy=opts.image_pull_policy,
            reserved_millicpu=opts.reserved_millicpu,
            reserved_memmb=opts.reserved_memmb,
            scheduler_name=scheduler_name,
        )


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
            if not is_dns_subdomain(mount.src):
                raise InvalidSpecError(
                    f"Role[{role.name}].mounts",
                    mount.src,
                    "is not a PersistentVolumeClaim name (a DNS-1123 subdomain)",
                    "use the claim's name: lowercase letters, digits, '-' and '.'",
                )
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
        "command": [_literal(role.entrypoint), *(_literal(a) for a in role.args)],
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
    it against ``blocklist``; anylaunch's own labels and annotations must come out unchanged.

    >>> from anylaunch.specs import Role
    >>> from anylaunch.specs.overlays import set_overlay
    >>> role = Role("w", "busybox", entrypoint="true")
    >>> set_overlay(role, "kubernetes", "V1Job",
    ...             {"metadata": {"labels": {"anylaunch.io/app-id": "someone-else"}}})
    >>> job = {"metadata": {"labels": {"anylaunch.io/app-id": "a-1", "team": "ml"}}}
    >>> apply_overlays(job, [(role, "kubernetes")], "V1Job", [], "")
    Traceback (most recent call last):
    ...
    anylaunch.specs.overlays.InvalidOverlayError: kubernetes/V1Job overlay key='metadata.labels.anylaunch.io/app-id' is invalid: anylaunch sets this label (selectors and state tracking rely on it) and an overlay must not change it. Fix: remove it from the overlay; add labels of your own under other keys
    """
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
        before = _owned_keys(base)
        apply_overlay(base, overlay)
        _check_owned_keys(before, _owned_keys(base), f"{namespace}/{kind} overlay")


def _owned_keys(obj: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """anylaunch's own labels and annotations of ``obj``: {(kind, key): value}."""
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    owned = {}
    for kind in ("labels", "annotations"):
        entries = metadata.get(kind) if isinstance(metadata, dict) else None
        for key, value in (entries or {}).items() if isinstance(entries, dict) else ():
            if isinstance(key, str) and key.startswith(OWNED_KEY_PREFIXES):
                owned[(kind, key)] = value
    return owned


def _check_owned_keys(
    before: dict[tuple[str, str], Any], after: dict[tuple[str, str], Any], label: str
) -> None:
    from anylaunch.specs.overlays import InvalidOverlayError

    for kind, key in sorted(set(before) | set(after)):
        if before.get((kind, key)) != after.get((kind, key)):
            what = kind[:-1]
            raise InvalidOverlayError(
                f"{label} key",
                f"metadata.{kind}.{key}",
                f"anylaunch sets this {what} (selectors and state tracking rely on it) and an "
                "overlay must not change it",
                f"remove it from the overlay; add {kind} of your own under other keys",
            )


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
