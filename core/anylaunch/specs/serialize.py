"""AppDefs as plain data: JSON-friendly dicts and YAML text, and back.

The dict form has the dataclass fields by name, enums by name and each mount's ``type``; it
is what ``anylaunch describe`` prints, so that output reads back as it is. Reading checks
every key and value and names the bad one (``Role[trainer].num_replicas``) with a fix.

>>> from anylaunch.specs import AppDef, Resource, Role
>>> app = AppDef("hello", [Role("greeter", image=".", entrypoint="echo", args=["hi"],
...                             resource=Resource(cpu=1, gpu=0, memMB=256))])
>>> print(appdef_to_yaml(app))  # doctest: +ELLIPSIS
name: hello
roles:
- name: greeter
  image: .
  min_replicas: null
  entrypoint: echo
  args:
  - hi
...
>>> appdef_from_yaml(appdef_to_yaml(app)) == app
True
>>> appdef_from_dict({"name": "a", "roles": [{"name": "r", "image": ".", "entrypoint": "x",
...                                           "resource": {"cpu": 1, "gpu": 0}}]})
Traceback (most recent call last):
...
anylaunch.specs.errors.InvalidSpecError: Role[r].resource={'cpu': 1, 'gpu': 0} is invalid: misses memMB. Fix: give cpu, gpu and memMB, or a named resource such as 'cpu.small'
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from typing import Any

from anylaunch.specs.api import (
    AppDef,
    BindMount,
    DeviceMount,
    Resource,
    Role,
    VolumeMount,
    Workspace,
)
from anylaunch.specs.arrays import ArraySpec
from anylaunch.specs.checks import check_type
from anylaunch.specs.errors import InvalidSpecError, did_you_mean
from anylaunch.specs.mounts import parse_mounts

__all__ = [
    "appdef_from_dict",
    "appdef_from_yaml",
    "appdef_to_dict",
    "appdef_to_yaml",
    "arrayspec_from_dict",
    "arrayspec_to_dict",
    "role_from_dict",
    "role_to_dict",
]

_APP_KEYS = ("name", "roles", "metadata", "array")
_ARRAY_KEYS = ("size", "parallelism", "min_success_ratio", "params", "indices")
_ROLE_KEYS = tuple(f.name for f in dataclasses.fields(Role))
_RESOURCE_KEYS = tuple(f.name for f in dataclasses.fields(Resource))
_MOUNT_TYPES: dict[str, type[BindMount | VolumeMount | DeviceMount]] = {
    "bind": BindMount,
    "volume": VolumeMount,
    "device": DeviceMount,
}
_MOUNT_KEYS = {
    kind: tuple(f.name for f in dataclasses.fields(cls)) for kind, cls in _MOUNT_TYPES.items()
}
_MOUNT_KIND = {cls: kind for kind, cls in _MOUNT_TYPES.items()}
#: Longest excerpt of bad YAML text quoted in an error.
_EXCERPT = 200


# --- to plain data ------------------------------------------------------------------------------


def _plain(obj: Any) -> Any:
    """Dataclasses (a mount gets its ``type``), enums (by name) and containers as plain data;
    anything else that JSON cannot hold becomes its ``str``."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        data = {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        kind = _MOUNT_KIND.get(type(obj))  # type: ignore[arg-type]
        return {"type": kind, **data} if kind is not None else data
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_plain(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def appdef_to_dict(
    app: AppDef, *, mask_secrets: bool = False, secret_env: Iterable[str] = ()
) -> dict[str, Any]:
    """The plain-data form of ``app``: only dicts, lists, str, int, float, bool and None.

    Reading it back with :func:`appdef_from_dict` gives an equal AppDef whenever the app's
    free-form fields (``metadata``, ``overrides``, resource ``capabilities`` and ``tags``) hold
    such data too (other values come back as their ``str``; tuples as lists).

    >>> from anylaunch.specs import AppDef, Role
    >>> d = appdef_to_dict(AppDef("a", [Role("r", image=".", entrypoint="echo")]))
    >>> d["roles"][0]["retry_policy"], d["roles"][0]["resource"]["cpu"]
    ('APPLICATION', -1)

    With ``mask_secrets`` (for anything a human sees) every secret env value is ``***``: names
    matching the built-in patterns and the ``secret_env`` names (see
    :mod:`anylaunch.specs.secrets`).

    >>> app = AppDef("a", [Role("r", image=".", entrypoint="echo", env={"API_KEY": "k1"})])
    >>> appdef_to_dict(app, mask_secrets=True)["roles"][0]["env"]
    {'API_KEY': '***'}
    """
    check_type("app", app, AppDef, "must be an AppDef", "pass anylaunch.specs.AppDef(...)")
    plain: dict[str, Any] = _plain(app)
    if mask_secrets:
        from anylaunch.specs.secrets import mask_env

        names = list(secret_env)
        for role in plain["roles"]:
            role["env"] = mask_env(role["env"], names)
    return plain


def role_to_dict(role: Role) -> dict[str, Any]:
    """The plain-data form of one role (as in :func:`appdef_to_dict`), e.g. for the record a
    scheduler keeps with an app.

    >>> role_to_dict(Role("w", image="img", entrypoint="echo"))["entrypoint"]
    'echo'
    """
    check_type("role", role, Role, "must be a Role", "pass anylaunch.specs.Role(...)")
    plain: dict[str, Any] = _plain(role)
    return plain


def role_from_dict(data: Mapping[str, Any]) -> Role:
    """A role back from :func:`role_to_dict` (the inverse), validated like every Role.

    >>> role_from_dict({"name": "w", "image": "img", "entrypoint": "echo", "args": ["a"]}).args
    ['a']
    """
    return _role(0, data)


def appdef_to_yaml(
    app: AppDef, *, mask_secrets: bool = False, secret_env: Iterable[str] = ()
) -> str:
    """:func:`appdef_to_dict` as YAML, in field order (what ``anylaunch describe`` prints)."""
    import yaml

    plain = appdef_to_dict(app, mask_secrets=mask_secrets, secret_env=secret_env)
    text: str = yaml.safe_dump(plain, sort_keys=False)
    return text


# --- from plain data ----------------------------------------------------------------------------


def _summary(value: object) -> object:
    # containers are named by type: they may be long (or hold secrets, e.g. env)
    return type(value).__name__ if isinstance(value, (Mapping, list)) else value


def _check_keys(where: str, data: Mapping[str, Any], known: tuple[str, ...], kind: str) -> None:
    for key in data:
        if key not in known:
            hint = did_you_mean(str(key), known).strip()
            raise InvalidSpecError(
                f"{where}.{key}",
                _summary(data[key]),
                f"is not a field of {kind}",
                f"{hint + ' ' if hint else ''}(fields: {', '.join(known)})",
            )


def _mapping(where: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidSpecError(
            where, type(value).__name__, "must be a mapping", "write it as key: value pairs"
        )
    return value


def _dict(where: str, value: object) -> dict[str, Any]:
    return dict(_mapping(where, value))


def _resource(where: str, value: object) -> Resource:
    if isinstance(value, str):
        from anylaunch.specs.resources import resource

        return resource(h=value)  # a named resource, e.g. "gpu.small"
    data = _mapping(where, value)
    _check_keys(where, data, _RESOURCE_KEYS, "Resource")
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
        capabilities=_dict(f"{where}.capabilities", data.get("capabilities", {})),
        devices=_dict(f"{where}.devices", data.get("devices", {})),
        tags=_dict(f"{where}.tags", data.get("tags", {})),
    )


def _mount(where: str, value: object) -> BindMount | VolumeMount | DeviceMount:
    if isinstance(value, str):
        mounts = parse_mounts([value])  # docker style: "type=bind,src=/a,dst=/b"
        if len(mounts) != 1:
            raise InvalidSpecError(where, value, "must hold exactly one mount", "split it")
        return mounts[0]
    data = _dict(where, value)
    kind = data.pop("type", None)
    if kind is None:  # written without a type: the keys tell
        kind = "volume" if "src" in data else "device" if "permissions" in data else "bind"
    if not isinstance(kind, str) or kind not in _MOUNT_TYPES:
        raise InvalidSpecError(
            f"{where}.type", kind, "is not a mount type", f"use one of: {', '.join(_MOUNT_TYPES)}"
        )
    keys = _MOUNT_KEYS[kind]
    _check_keys(where, data, keys, f"a {kind} mount")
    required = [k for k in keys[:2] if k not in data]
    if required:
        raise InvalidSpecError(
            where, data, f"a {kind} mount needs {', '.join(required)}", "add them"
        )
    for key, field_value in data.items():
        wanted = bool if key == "read_only" else str
        if not isinstance(field_value, wanted):
            raise InvalidSpecError(
                f"{where}.{key}",
                _summary(field_value),
                f"must be a {wanted.__name__}",
                "write e.g. read_only: true" if wanted is bool else f"write {key} as text",
            )
    return _MOUNT_TYPES[kind](**data)


def _workspace(where: str, value: object) -> Workspace | None:
    if value is None:
        return None
    if isinstance(value, str):
        return Workspace.from_str(value) if value.strip() else None
    data = _mapping(where, value)
    _check_keys(where, data, ("projects",), "Workspace")
    return Workspace(projects=_dict(f"{where}.projects", data.get("projects")))


def _role(i: int, value: object) -> Role:
    data = _mapping(f"roles[{i}]", value)
    name = data.get("name", f"#{i}")
    where = f"Role[{name}]"
    _check_keys(where, data, _ROLE_KEYS, "Role")
    for key in ("name", "image", "entrypoint"):
        if key not in data:
            raise InvalidSpecError(f"roles[{i}].{key}", None, "is required", f"set {key}")
    fields: dict[str, Any] = dict(data)
    for key in ("args", "mounts"):
        if key in fields and not isinstance(fields[key], list):
            raise InvalidSpecError(
                f"{where}.{key}", fields[key], "must be a list", f"write {key} as a list"
            )
    for key in ("env", "port_map", "metadata", "overrides"):
        if key in fields:
            fields[key] = _dict(f"{where}.{key}", fields[key])
    if "resource" in fields:
        fields["resource"] = _resource(f"{where}.resource", fields["resource"])
    if "mounts" in fields:
        fields["mounts"] = [
            _mount(f"{where}.mounts[{j}]", m) for j, m in enumerate(fields["mounts"])
        ]
    if "workspace" in fields:
        fields["workspace"] = _workspace(f"{where}.workspace", fields["workspace"])
    return Role(**fields)  # validates every field, naming the bad one


def appdef_from_dict(data: Mapping[str, Any]) -> AppDef:
    """Builds an AppDef from its dict form (the inverse of :func:`appdef_to_dict`).

    Also accepts what ``anylaunch describe`` prints (the app under ``AppDef``), a role's
    ``resource`` as a named resource (``"gpu.small"``), a mount in docker style
    (``"type=bind,src=/a,dst=/b"``) or without its ``type``, and a workspace as a path.
    Fields left out take their defaults. The app is not required to have roles (an app
    described by a scheduler may have none): :meth:`AppDef.validate` checks that.

    >>> appdef_from_dict({"name": "a", "roles": [{"name": "r", "image": ".", "entrypont": "x"}]})
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Role[r].entrypont='x' is invalid: is not a field of Role. Fix: Did you mean 'entrypoint'? (fields: ...)

    Raises:
        InvalidSpecError: a key is unknown (with a did-you-mean), one is missing, or a value
            has the wrong type or is out of range
        LookupError: a named resource does not exist (with a did-you-mean)
    """
    data = _mapping("app", data)
    if "AppDef" in data:  # `anylaunch describe` output: {"app_handle": ..., "AppDef": {...}}
        data = _mapping("app.AppDef", data["AppDef"])
    _check_keys("AppDef", data, _APP_KEYS, "AppDef")
    if "name" not in data:
        raise InvalidSpecError("AppDef.name", None, "is required", "set name: my-app")
    roles = data.get("roles", [])
    check_type("AppDef.roles", roles, list, "must be a list", "write roles as a list")
    return AppDef(
        name=data["name"],
        roles=[_role(i, r) for i, r in enumerate(roles)],
        metadata=_dict("AppDef.metadata", data.get("metadata", {})),
        array=arrayspec_from_dict(data.get("array")),
    )


def arrayspec_to_dict(array: ArraySpec) -> dict[str, Any]:
    """The plain-data form of an array spec (what a scheduler stores to rebuild it).

    >>> arrayspec_to_dict(ArraySpec(3, parallelism=1, indices=[2]))
    {'size': 3, 'parallelism': 1, 'min_success_ratio': 1.0, 'params': [], 'indices': [2]}
    >>> arrayspec_from_dict(arrayspec_to_dict(ArraySpec(3, indices=[2]))).selected
    (2,)
    """
    plain: dict[str, Any] = _plain(array)
    return plain


def arrayspec_from_dict(value: object) -> ArraySpec | None:
    """Inverse of :func:`arrayspec_to_dict` (None stays None); a bad key or value raises
    InvalidSpecError naming it."""
    if value is None:
        return None
    data = _mapping("AppDef.array", value)
    _check_keys("AppDef.array", data, _ARRAY_KEYS, "ArraySpec")
    if "size" not in data:
        raise InvalidSpecError("AppDef.array.size", None, "is required", "set size: 20")
    params = data.get("params") or ()
    indices = data.get("indices")
    return ArraySpec(
        size=data["size"],
        parallelism=data.get("parallelism"),
        min_success_ratio=data.get("min_success_ratio", 1.0),
        params=tuple(params) if isinstance(params, list) else params,
        indices=tuple(indices) if isinstance(indices, list) else indices,
    )


def appdef_from_yaml(text: str) -> AppDef:
    """Builds an AppDef from YAML (or JSON) text of its dict form; see :func:`appdef_from_dict`.

    >>> appdef_from_yaml("name: [oops")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: app='name: [oops' is invalid: is not valid YAML (...). Fix: ...

    Raises:
        InvalidSpecError: the text is not YAML of a mapping, or the data is not an AppDef
    """
    import yaml

    check_type("app", text, str, "must be YAML text (a str)", "pass the file's contents")
    excerpt = text if len(text) <= _EXCERPT else text[:_EXCERPT] + "..."
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        problem = " ".join(str(e).split())
        raise InvalidSpecError(
            "app",
            excerpt,
            f"is not valid YAML ({problem})",
            "write the AppDef as YAML (name:, roles: [...]), as `anylaunch describe` prints it",
        ) from None
    if not isinstance(data, Mapping):
        raise InvalidSpecError(
            "app",
            excerpt,
            f"is YAML of a {type(data).__name__}, not of a mapping",
            "write the AppDef as YAML (name:, roles: [...]), as `anylaunch describe` prints it",
        )
    return appdef_from_dict(data)
