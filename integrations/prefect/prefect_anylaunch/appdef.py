"""AppDefs as plain data: what a Prefect block can store and a user can type as YAML.

The dict form is the one ``anylaunch describe`` prints (dataclass fields by name, enums by
name), so its output can be pasted into a block as it is. Nothing here imports Prefect.

>>> app = appdef_from_data('''
... name: hello
... roles:
...   - name: greeter
...     image: .
...     entrypoint: echo
...     args: [hi]
...     resource: {cpu: 1, gpu: 0, memMB: 256}
... ''')
>>> app.roles[0].entrypoint, app.roles[0].resource.memMB
('echo', 256)
>>> appdef_from_dict(appdef_to_dict(app)) == app
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anylaunch.specs.api import (
    AppDef,
    BindMount,
    DeviceMount,
    Resource,
    Role,
    VolumeMount,
    Workspace,
    parse_mounts,
)
from anylaunch.specs.errors import InvalidSpecError, did_you_mean

__all__ = ["appdef_from_data", "appdef_from_dict", "appdef_to_dict"]

_APP_KEYS = ("name", "roles", "metadata")
_ROLE_KEYS = (
    "name",
    "image",
    "min_replicas",
    "entrypoint",
    "args",
    "env",
    "num_replicas",
    "max_retries",
    "retry_policy",
    "resource",
    "port_map",
    "metadata",
    "mounts",
    "workspace",
    "overrides",
)
_RESOURCE_KEYS = ("cpu", "gpu", "memMB", "capabilities", "devices", "tags")
# A mount's kind follows from its keys (as `anylaunch describe` prints them) or from "type".
_MOUNT_KEYS = {
    "bind": ("src_path", "dst_path", "read_only"),
    "volume": ("src", "dst_path", "read_only"),
    "device": ("src_path", "dst_path", "permissions"),
}


def _check_keys(where: str, data: Mapping[str, Any], known: tuple[str, ...]) -> None:
    for key in data:
        if key not in known:
            hint = did_you_mean(str(key), known).strip()
            raise InvalidSpecError(
                f"{where}.{key}",
                data[key] if not isinstance(data[key], (dict, list)) else type(data[key]).__name__,
                f"is not a field of {where.split('[')[0]}",
                f"{hint + ' ' if hint else ''}(fields: {', '.join(known)})",
            )


def _mapping(where: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidSpecError(
            where, type(value).__name__, "must be a mapping", "write it as key: value pairs"
        )
    return value


def _resource(where: str, value: object) -> Resource:
    if isinstance(value, str):
        from anylaunch.specs.resources import resource

        return resource(h=value)  # a named resource, e.g. "gpu.small"
    data = _mapping(where, value)
    _check_keys(where, data, _RESOURCE_KEYS)
    missing = [k for k in ("cpu", "gpu", "memMB") if k not in data]
    if missing:
        raise InvalidSpecError(
            where,
            dict(data),
            f"misses {', '.join(missing)}",
            "give cpu, gpu and memMB, or a named resource such as 'cpu.small'",
        )
    return Resource(
        cpu=data["cpu"],
        gpu=data["gpu"],
        memMB=data["memMB"],
        capabilities=dict(_mapping(f"{where}.capabilities", data.get("capabilities", {}))),
        devices=dict(_mapping(f"{where}.devices", data.get("devices", {}))),
        tags=dict(_mapping(f"{where}.tags", data.get("tags", {}))),
    )


def _mount(where: str, value: object) -> BindMount | VolumeMount | DeviceMount:
    if isinstance(value, str):
        mounts = parse_mounts([value])  # docker style: "type=bind,src=/a,dst=/b"
        if len(mounts) != 1:
            raise InvalidSpecError(where, value, "must hold exactly one mount", "split it")
        return mounts[0]
    data = dict(_mapping(where, value))
    kind = data.pop("type", None)
    if kind is None:
        kind = "volume" if "src" in data else "device" if "permissions" in data else "bind"
    if kind not in _MOUNT_KEYS:
        raise InvalidSpecError(
            f"{where}.type", kind, "is not a mount type", "use bind, volume or device"
        )
    _check_keys(where, data, _MOUNT_KEYS[kind])
    try:
        if kind == "bind":
            return BindMount(**data)
        if kind == "volume":
            return VolumeMount(**data)
        return DeviceMount(**data)
    except TypeError:
        required = [k for k in _MOUNT_KEYS[kind][:2] if k not in data]
        raise InvalidSpecError(
            where, data, f"a {kind} mount needs {', '.join(required)}", "add them"
        ) from None


def _workspace(where: str, value: object) -> Workspace | None:
    if value is None or isinstance(value, Workspace):
        return value
    if isinstance(value, str):
        return Workspace.from_str(value) if value.strip() else None
    data = _mapping(where, value)
    _check_keys(where, data, ("projects",))
    return Workspace(projects=dict(_mapping(f"{where}.projects", data.get("projects"))))


def _role(i: int, value: object) -> Role:
    data = _mapping(f"roles[{i}]", value)
    name = data.get("name", f"#{i}")
    where = f"Role[{name}]"
    _check_keys(where, data, _ROLE_KEYS)
    for key in ("name", "image", "entrypoint"):
        if key not in data:
            raise InvalidSpecError(f"roles[{i}].{key}", None, "is required", f"set {key}")
    fields: dict[str, Any] = {k: v for k, v in data.items() if k in _ROLE_KEYS}
    for key in ("args", "mounts"):
        if key in fields and not isinstance(fields[key], list):
            raise InvalidSpecError(
                f"{where}.{key}", fields[key], "must be a list", f"write {key} as a list"
            )
    for key in ("env", "port_map", "metadata", "overrides"):
        if key in fields:
            fields[key] = dict(_mapping(f"{where}.{key}", fields[key]))
    if "resource" in fields:
        fields["resource"] = _resource(f"{where}.resource", fields["resource"])
    if "mounts" in fields:
        fields["mounts"] = [
            _mount(f"{where}.mounts[{j}]", m) for j, m in enumerate(fields["mounts"])
        ]
    if "workspace" in fields:
        fields["workspace"] = _workspace(f"{where}.workspace", fields["workspace"])
    return Role(**fields)


def appdef_from_dict(data: Mapping[str, Any]) -> AppDef:
    """Builds an AppDef from its dict form (the inverse of :func:`appdef_to_dict`).

    Also accepts the document ``anylaunch describe`` prints (the app under ``AppDef``), a
    role's ``resource`` as a named resource (``"gpu.small"``), mounts in docker style
    (``"type=bind,src=/a,dst=/b"``) and a workspace as a path string.

    >>> appdef_from_dict({"name": "a", "roles": [{"name": "r", "image": ".", "entrypont": "x"}]})
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Role[r].entrypont='x' is invalid: is not a field of Role. Fix: Did you mean 'entrypoint'? (fields: ...)

    Raises:
        InvalidSpecError: a key is unknown (with a did-you-mean), a value has the wrong type,
            or the app is not valid.
    """
    data = _mapping("app", data)
    if "AppDef" in data:  # `anylaunch describe` output: {"app_handle": ..., "AppDef": {...}}
        data = _mapping("app.AppDef", data["AppDef"])
    _check_keys("AppDef", data, _APP_KEYS)
    if "name" not in data:
        raise InvalidSpecError("AppDef.name", None, "is required", "set name: my-app")
    roles = data.get("roles", [])
    if not isinstance(roles, list):
        raise InvalidSpecError(
            "AppDef.roles", type(roles).__name__, "must be a list", "write roles as a list"
        )
    app = AppDef(
        name=data["name"],
        roles=[_role(i, r) for i, r in enumerate(roles)],
        metadata=dict(_mapping("AppDef.metadata", data.get("metadata", {}))),
    )
    app.validate()
    return app


def appdef_from_data(value: AppDef | Mapping[str, Any] | str) -> AppDef:
    """An AppDef from an AppDef (copied), its dict form, or YAML/JSON text of the dict form.

    >>> appdef_from_data("name: [oops")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: app='name: [oops' is invalid: is not valid YAML (...). Fix: ...
    """
    if isinstance(value, AppDef):
        import copy

        app = copy.deepcopy(value)
        app.validate()
        return app
    if isinstance(value, str):
        import yaml

        text = value
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as e:
            problem = str(e).replace("\n", " ")
            raise InvalidSpecError(
                "app",
                text if len(text) < 200 else text[:200] + "...",
                f"is not valid YAML ({problem})",
                "write the AppDef as YAML (name:, roles: [...]), as `anylaunch describe` prints",
            ) from None
    if not isinstance(value, Mapping):
        raise InvalidSpecError(
            "app",
            type(value).__name__,
            "must be an AppDef, a dict or YAML text of one",
            "pass e.g. {'name': 'x', 'roles': [{'name': 'r', 'image': '.', 'entrypoint': 'echo'}]}",
        )
    return appdef_from_dict(value)


def appdef_to_dict(app: AppDef) -> dict[str, Any]:
    """The plain-data form of ``app`` (JSON and YAML friendly), as ``anylaunch describe``
    prints it.

    >>> from anylaunch.specs import AppDef, Role
    >>> appdef_to_dict(AppDef("a", [Role("r", image=".", entrypoint="echo")]))["roles"][0]["retry_policy"]
    'APPLICATION'
    """
    from anylaunch.cli.cmd_describe import to_plain

    if not isinstance(app, AppDef):
        raise InvalidSpecError("app", type(app).__name__, "must be an AppDef", "pass an AppDef")
    plain: dict[str, Any] = to_plain(app)
    return plain
