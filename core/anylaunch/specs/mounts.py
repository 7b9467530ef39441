"""Mounts of a role: bind mounts, volumes and devices, and ``parse_mounts`` for the CLI form."""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from typing import Union

from anylaunch.specs.checks import check_type
from anylaunch.specs.errors import InvalidSpecError

__all__ = ["BindMount", "DeviceMount", "Mount", "MountType", "VolumeMount", "parse_mounts"]


class MountType(str, Enum):
    """The ``type=`` of a mount option.

    >>> MountType("bind") is MountType.BIND, MountType.DEVICE.value
    (True, 'device')
    """

    BIND = "bind"
    VOLUME = "volume"
    DEVICE = "device"


# ---------------------------------------------------------------------------------------------
# Mounts
# ---------------------------------------------------------------------------------------------


def _check_fields(mount: object, paths: tuple[str, ...], flag: str | None = None) -> None:
    """Checks that each of ``paths`` is a str (and ``flag`` a bool)."""
    owner = type(mount).__name__
    for name in paths:
        check_type(
            f"{owner}.{name}",
            getattr(mount, name),
            str,
            "must be a str",
            "pass a path, e.g. '/data' (or build mounts with specs.parse_mounts([...]))",
        )
    if flag is not None:
        check_type(
            f"{owner}.{flag}", getattr(mount, flag), bool, "must be a bool", "pass True or False"
        )


@dataclass
class BindMount:
    """Bind-mounts a host path into the worker container.

    >>> BindMount("/host", None)  # type: ignore[arg-type]
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: BindMount.dst_path='NoneType' is invalid: must be a str. Fix: pass a path, e.g. '/data' (or build mounts with specs.parse_mounts([...]))
    """

    src_path: str
    dst_path: str
    read_only: bool = False

    def __post_init__(self) -> None:
        _check_fields(self, ("src_path", "dst_path"), "read_only")


@dataclass
class VolumeMount:
    """Mounts a persistent volume into the worker container."""

    src: str
    dst_path: str
    read_only: bool = False

    def __post_init__(self) -> None:
        _check_fields(self, ("src", "dst_path"), "read_only")


@dataclass
class DeviceMount:
    """Mounts a host device into the container (``permissions`` is a subset of ``rwm``)."""

    src_path: str
    dst_path: str
    permissions: str = "rwm"

    def __post_init__(self) -> None:
        _check_fields(self, ("src_path", "dst_path"))
        check_type("DeviceMount.permissions", self.permissions, str, "must be a str", "use 'rwm'")
        if not self.permissions or set(self.permissions) - set("rwm"):
            raise InvalidSpecError(
                "DeviceMount.permissions",
                self.permissions,
                "must be made of the letters r, w and m",
                "use e.g. 'rwm' or 'r'",
            )


Mount = Union[BindMount, VolumeMount, DeviceMount]  # noqa: UP007 (a runtime alias)

_MOUNT_KEYS = {
    "src": "src",
    "source": "src",
    "dst": "dst",
    "destination": "dst",
    "target": "dst",
    "readonly": "readonly",
    "read_only": "readonly",
    "ro": "readonly",
    "perm": "perm",
    "permissions": "perm",
}


def _mount_error(spec: str, problem: str) -> InvalidSpecError:
    return InvalidSpecError(
        "mounts",
        spec,
        problem,
        "write type=bind,src=/host,dst=/container[,readonly] | "
        "type=volume,src=NAME,dst=/container[,readonly] | "
        "type=device,src=/dev/X[,dst=/dev/Y][,perm=rwm]",
    )


def _read_only(spec: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise _mount_error(spec, f"readonly={value!r} is not one of true/false/1/0/yes/no")


def parse_mounts(opts: list[str]) -> list[BindMount | VolumeMount | DeviceMount]:
    """Parses Docker-style mount options into typed mounts.

    Several mounts may share one list; ``type`` must come first in each. Items may be
    separate list elements or joined by commas:

    - ``type=bind,src=<host path>,dst=<container path>[,readonly]`` (``~`` in the host path
      is expanded to the home directory)
    - ``type=volume,src=<name/id>,dst=<container path>[,readonly]``
    - ``type=device,src=/dev/<dev>[,dst=<container path>][,perm=rwm]``

    ``readonly`` may be bare or ``readonly=true|false`` (also ``1/0``, ``yes/no``).

    >>> parse_mounts(["type=bind,src=/host,dst=/container,readonly"])
    [BindMount(src_path='/host', dst_path='/container', read_only=True)]
    >>> parse_mounts(["type=bind", "src=~/data", "dst=/data"])[0].src_path == os.path.expanduser("~/data")
    True
    >>> parse_mounts(["type=volume", "src=data", "dst=/data", "type=device", "src=/dev/fuse"])
    [VolumeMount(src='data', dst_path='/data', read_only=False), DeviceMount(src_path='/dev/fuse', dst_path='/dev/fuse', permissions='rwm')]
    """
    if isinstance(opts, str) or not isinstance(opts, (list, tuple)):
        raise InvalidSpecError(
            "mounts",
            type(opts).__name__,
            "must be a list of mount option strings",
            'pass e.g. ["type=bind,src=/host,dst=/container"]',
        )
    for i, opt in enumerate(opts):
        if not isinstance(opt, str):
            raise InvalidSpecError(
                f"mounts[{i}]", type(opt).__name__, "must be a str", 'pass e.g. "type=bind,..."'
            )
    spec = ",".join(opts)
    groups: list[dict[str, str]] = []
    for token in (t.strip() for opt in opts for t in opt.split(",")):
        if not token:
            continue
        key, sep, value = token.partition("=")
        key = key.strip().lower()
        if key == "type":
            groups.append({"type": value.strip()})
            continue
        if not groups:
            raise _mount_error(spec, f"{token!r} comes before any type=...")
        canonical = _MOUNT_KEYS.get(key)
        if canonical is None:
            raise _mount_error(spec, f"unknown mount option {key!r}")
        groups[-1][canonical] = value if sep else "true"

    mounts: list[BindMount | VolumeMount | DeviceMount] = []
    for group in groups:
        kind = group["type"]
        read_only = _read_only(spec, group.get("readonly", "false"))
        if kind in ("bind", "volume") and ("src" not in group or "dst" not in group):
            raise _mount_error(spec, f"a {kind} mount needs src and dst")
        if kind == "bind":
            src = os.path.expanduser(group["src"])
            mounts.append(BindMount(src, group["dst"], read_only))
        elif kind == "volume":
            mounts.append(VolumeMount(group["src"], group["dst"], read_only))
        elif kind == "device":
            if "src" not in group:
                raise _mount_error(spec, "a device mount needs src")
            src = group["src"]
            mounts.append(DeviceMount(src, group.get("dst", src), group.get("perm", "rwm")))
        else:
            raise _mount_error(spec, f"unknown mount type {kind!r}")
    return mounts
