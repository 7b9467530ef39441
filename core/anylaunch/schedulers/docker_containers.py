"""The container configuration of one replica of a ``local_docker`` app (mounts, resources, env)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from anylaunch.schedulers.docker_request import (
    _VOLUME_NAME,
    DockerOpts,
)
from anylaunch.specs.api import (
    BindMount,
    DeviceMount,
    RetryPolicy,
    Role,
    VolumeMount,
)
from anylaunch.specs.errors import (
    InvalidSpecError,
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
    """The engine's create body for one replica (``role`` has its macros substituted)."""
    for key, value in env.items():
        if "\x00" in value:
            raise InvalidSpecError(
                f"Role[{role.name}].env[{key!r}]",
                "<value>",
                "contains a NUL byte, which no environment value can carry",
                "remove the NUL byte",
            )
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
