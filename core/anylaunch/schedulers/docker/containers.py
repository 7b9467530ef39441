"""The request of a ``local_docker`` app: one engine create body per replica (command, env,
labels, mounts, resources, ports, restart policy), built from the app and the run options
without contacting the engine."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from anylaunch.schedulers.common.job_metadata import job_metadata
from anylaunch.schedulers.common.roles import RANK0_ENV, check_image_ref, check_no_nul, role_record
from anylaunch.schedulers.docker.arrays import LABEL_ARRAY_SPEC, array_labels, spec_label
from anylaunch.schedulers.docker.request import (
    _VOLUME_NAME,
    BACKEND,
    LABEL_KIND,
    DockerAppRequest,
    DockerContainerRequest,
    DockerOpts,
    _role_label,
    app_labels,
    make_app_id,
    replica_labels,
)
from anylaunch.specs.api import (
    AppDef,
    BindMount,
    DeviceMount,
    RetryPolicy,
    Role,
    VolumeMount,
    macros,
)
from anylaunch.specs.arrays import resolve_index
from anylaunch.specs.errors import (
    InvalidRunConfigException,
    InvalidSpecError,
)
from anylaunch.specs.secrets import is_secret_env_name
from anylaunch.workspace.docker_workspace import WorkspaceImageBuild, check_image_repo

__all__ = ["build_request", "options_env"]


def options_env(opts: DockerOpts) -> dict[str, str]:
    """The env every replica gets from the run options: the launcher's variables that
    ``copy_env`` selects, then ``env`` (a role's own env wins over both).

    >>> options_env(DockerOpts(env={"LOGLEVEL": "debug"}))
    {'LOGLEVEL': 'debug'}
    >>> options_env(DockerOpts(env={"A=B": "1"}))
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidRunConfigException: env='A=B' is invalid: is not a variable name. Fix: pass NAME:VALUE pairs whose names have no '=' (nor a NUL byte)
    """
    import fnmatch

    env: dict[str, str] = {}
    for pattern in opts.copy_env or []:
        env.update({k: v for k, v in os.environ.items() if fnmatch.fnmatchcase(k, pattern)})
    for key, value in (opts.env or {}).items():
        if not key or "=" in key or "\x00" in key:
            raise InvalidRunConfigException(
                "env",
                key,
                "is not a variable name",
                "pass NAME:VALUE pairs whose names have no '=' (nor a NUL byte)",
            )
        check_no_nul(f"env[{key!r}]", value, secret=is_secret_env_name(key))
        env[key] = value
    return env


def build_request(
    app: AppDef,
    opts: DockerOpts,
    session_name: str,
    workspace_builds: list[WorkspaceImageBuild],
) -> DockerAppRequest:
    """The app's request under a new app id: its network, and for replica ``i`` of role
    ``r`` the container ``{app_id}-{r}-{i}`` (macros substituted, ``ANYLAUNCH_RANK0_HOST``
    naming the first role's replica 0).

    Each replica carries the app's labels and its role's record (``LABEL_ROLE_SPEC``), in
    which secret env values are masked: anyone who can ``docker inspect`` reads labels,
    while the container's own env carries the real values.

    Raises:
        InvalidSpecError: a role's image is no image reference, two roles' container names
            clash, a mount is invalid on this host.
        InvalidRunConfigException: a run option is invalid.
    """
    check_image_repo(opts.image_repo)
    if opts.cancel_grace_s < 0:
        raise InvalidRunConfigException(
            "cancel_grace_s", opts.cancel_grace_s, "must be >= 0", "pass e.g. 5"
        )
    base_env = options_env(opts)
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
    # docker label values hold any string: the job's metadata goes in as it is
    common = {
        **app_labels(app_id, app.name, session_name, opts.cancel_grace_s),
        **job_metadata(app, BACKEND),
    }
    rank0 = f"{app_id}-{_role_label(app.roles[0].name)}-0"
    containers = []
    array = app.array
    for index, role in enumerate(app.roles):
        mounts, devices = _mounts(role)
        record = json.dumps(role_record(role, mask_secrets=True), sort_keys=True)
        # an array: one container per selected index, its role resolved for that index
        replica_ids = array.selected if array is not None else range(role.num_replicas)
        for i in replica_ids:
            name = f"{app_id}-{_role_label(role.name)}-{i}"
            values = macros.Values(
                img_root="", app_id=app_id, replica_id=str(i), rank0_env=RANK0_ENV
            )
            replica = values.apply(resolve_index(role, array, i) if array else role)
            env = {**base_env, **replica.env, RANK0_ENV: rank0}
            env.setdefault("PYTHONUNBUFFERED", "1")  # lines reach the logs as printed
            labels = replica_labels(common, role, index, i, record)
            if array is not None:
                labels.update(array_labels(array))
            config = _container_config(replica, name, network, env, labels, mounts, devices, opts)
            containers.append(DockerContainerRequest(name, role.name, i, config))
    return DockerAppRequest(
        app_id=app_id,
        app_name=app.name,
        network=network,
        cancel_grace_s=float(opts.cancel_grace_s),
        containers=containers,
        workspace_builds=workspace_builds,
        network_labels={
            **common,
            LABEL_KIND: "network",
            **({LABEL_ARRAY_SPEC: spec_label(array)} if array is not None else {}),
        },
        start_first=array.limit if array is not None else None,
    )


def _mounts(role: Role) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The role's mounts as the engine's ``Mounts`` and ``Devices`` (checked on this host)."""
    where = f"Role[{role.name}].mounts"
    mounts: list[dict[str, Any]] = []
    devices: list[dict[str, str]] = []
    for m in role.mounts:
        dst = m.dst_path
        if not dst.startswith("/"):
            raise InvalidSpecError(
                where, dst, "the path in the container must be absolute", "start it with '/'"
            )
        if isinstance(m, BindMount):
            src = os.path.abspath(os.path.expanduser(m.src_path))
            if not os.path.exists(src):
                raise InvalidSpecError(
                    where,
                    m.src_path,
                    "the bind mount's host path does not exist",
                    "create it, or mount an existing path",
                )
            mounts.append({"Type": "bind", "Source": src, "Target": dst, "ReadOnly": m.read_only})
        elif isinstance(m, VolumeMount):
            if not _VOLUME_NAME.match(m.src):
                raise InvalidSpecError(
                    where,
                    m.src,
                    "is not a volume name",
                    "use letters, digits, '_', '.', '-' (a host path needs type=bind)",
                )
            mounts.append(
                {"Type": "volume", "Source": m.src, "Target": dst, "ReadOnly": m.read_only}
            )
        elif isinstance(m, DeviceMount):
            if not os.path.exists(m.src_path):
                raise InvalidSpecError(
                    where,
                    m.src_path,
                    "the device does not exist on this host",
                    "mount an existing device",
                )
            devices.append(
                {
                    "PathOnHost": m.src_path,
                    "PathInContainer": dst,
                    "CgroupPermissions": m.permissions,
                }
            )
    return mounts, devices


def _container_config(
    role: Role,
    name: str,
    network: str,
    env: Mapping[str, str],
    labels: Mapping[str, str],
    mounts: list[dict[str, Any]],
    devices: list[dict[str, str]],
    opts: DockerOpts,
) -> dict[str, Any]:
    """The engine's create body for one replica (``role`` has its macros substituted; its
    env values were checked for NUL bytes by ``Scheduler.submit_dryrun``, the run options'
    by :func:`options_env`)."""
    host: dict[str, Any] = {
        "NetworkMode": network,
        "Privileged": bool(opts.privileged),
        "Init": bool(opts.init),
    }
    resource = role.resource
    if not resource.is_null():
        if resource.cpu > 0:
            host["NanoCpus"] = int(resource.cpu * 1_000_000_000)
        if resource.memMB > 0:
            host["Memory"] = int(resource.memMB) << 20
        if resource.gpu > 0:
            host["DeviceRequests"] = [
                {
                    "Driver": "",
                    "Count": resource.gpu,
                    "DeviceIDs": None,
                    "Capabilities": [["gpu"]],
                    "Options": {},
                }
            ]
    if mounts:
        host["Mounts"] = mounts
    if devices:
        host["Devices"] = devices
    exposed: dict[str, dict[str, Any]] = {}
    if role.port_map:
        for port in role.port_map.values():
            exposed[f"{port}/tcp"] = {}
        # published on the loopback interface only, each to a free port the engine picks
        host["PortBindings"] = {p: [{"HostIp": "127.0.0.1", "HostPort": ""}] for p in exposed}
    if role.retry_policy == RetryPolicy.REPLICA and role.max_retries > 0:
        host["RestartPolicy"] = {"Name": "on-failure", "MaximumRetryCount": role.max_retries}
    config: dict[str, Any] = {
        "Image": role.image,
        "Entrypoint": [role.entrypoint],
        "Cmd": list(role.args),
        "Env": [f"{k}={v}" for k, v in env.items()],
        "Labels": dict(labels),
        "HostConfig": host,
    }
    if len(name) <= 63:
        config["Hostname"] = name
    if exposed:
        config["ExposedPorts"] = exposed
    return config
