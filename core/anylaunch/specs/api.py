"""The job spec data model: AppDef, Role, Resource, states, statuses, macros, mounts, handles.

Everything here is plain data (dataclasses and enums) with validation that raises
:class:`~anylaunch.specs.errors.InvalidSpecError` naming the field, the value and the fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from anylaunch.specs import cases
from anylaunch.specs.checks import check_type
from anylaunch.specs.errors import (
    InvalidRunConfigException,
    InvalidSpecError,
    MalformedAppHandleException,
    UnknownAppException,
    UnknownSchedulerException,
)
from anylaunch.specs.handles import AppDryRunInfo, AppHandle, ParsedAppHandle, parse_app_handle

# Not a name of TorchX's specs/api.py (its home is anylaunch.specs.handles, also exported by
# anylaunch.specs and anylaunch.specs.builders): kept only while the schedulers and
# runner/api.py, which other branches are rewriting, still import it from here.
from anylaunch.specs.handles import make_app_handle as make_app_handle
from anylaunch.specs.home import ANYLAUNCH_HOME
from anylaunch.specs.markers import ALL, MISSING, NONE, UNKNOWN
from anylaunch.specs.mounts import BindMount, DeviceMount, MountType, VolumeMount
from anylaunch.specs.runopts import CfgVal, get_type_name, runopt, runopts
from anylaunch.specs.status import (
    AppState,
    AppStatus,
    AppStatusError,
    ReplicaState,
    ReplicaStatus,
    RoleStatus,
    is_started,
    is_terminal,
)
from anylaunch.specs.substitution import macros
from anylaunch.specs.tags import resource_tags

if TYPE_CHECKING:
    from pathlib import Path

    from anylaunch.specs.arrays import ArraySpec

#: MiB in a GiB, for ``Resource(memMB=16 * GiB)``.
GiB: int = 1024

#: TorchX's terminal escapes for a warning's highlight (``torchx.specs.api.YELLOW_BOLD`` and
#: ``RESET``), for code ported from TorchX.
YELLOW_BOLD = "\033[1;33m"
RESET = "\033[0m"

__all__ = [
    "ALL",
    "ANYLAUNCH_HOME",
    "MISSING",
    "NONE",
    "NULL_RESOURCE",
    "UNKNOWN",
    "AppDef",
    "AppDryRunInfo",
    "AppHandle",
    "AppState",
    "AppStatus",
    "AppStatusError",
    "BindMount",
    "CfgVal",
    "DeviceMount",
    "GiB",
    "InvalidRunConfigException",
    "MalformedAppHandleException",
    "MountType",
    "ParsedAppHandle",
    "ReplicaState",
    "ReplicaStatus",
    "Resource",
    "RetryPolicy",
    "Role",
    "RoleStatus",
    "UnknownAppException",
    "UnknownSchedulerException",
    "VolumeMount",
    "Workspace",
    "cases",
    "get_type_name",
    "is_started",
    "is_terminal",
    "macros",
    "parse_app_handle",
    "runopt",
    "runopts",
]


_ROLE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
#: Role.env's rule for a name: any printable name without "=" (Java-style dotted names are
#: fine); no space or control character.
ENV_NAME = re.compile(r"[^=\x00-\x20\x7f]+")


#: The most replicas one role may have (more is a typo, and would exhaust memory at dryrun).
MAX_REPLICAS = 100_000
#: The most retries a role may ask for.
MAX_RETRIES = 10_000
#: The most of each quantity one replica may ask for: far beyond any machine (the largest
#: single hosts have a few thousand logical cpus, 16 gpus and tens of TiB), so more is a typo.
MAX_RESOURCE = {"cpu": 65_536, "gpu": 1_024, "memMB": 2**30}  # memMB: 1 PiB


def _require_int(
    owner: str, name: str, value: object, minimum: int, fix: str, maximum: int | None = None
) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpecError(f"{owner}.{name}", value, "must be an int", fix)
    if value < minimum:
        raise InvalidSpecError(f"{owner}.{name}", value, f"must be at least {minimum}", fix)
    if maximum is not None and value > maximum:
        raise InvalidSpecError(f"{owner}.{name}", value, f"must be at most {maximum}", fix)


def _require_dict(field_name: str, value: object, fix: str) -> None:
    check_type(field_name, value, dict, "must be a dict with str keys", fix, keys=str)


# ---------------------------------------------------------------------------------------------
# Resources
# ---------------------------------------------------------------------------------------------


@dataclass
class Resource:
    """Represents resource requirements for a Role.

    Prefer :func:`anylaunch.specs.resource` with named resources (t-shirt sizes) over raw values.

    >>> from anylaunch.specs import Resource
    >>> Resource(cpu=4, gpu=1, memMB=8192)
    Resource(cpu=4, gpu=1, memMB=8192, capabilities={}, devices={}, tags={})

    Args:
        cpu: number of logical cpu cores
        gpu: number of gpus
        memMB: MB of ram
        capabilities: additional hardware specs (interpreted by scheduler)
        devices: named devices with their quantities (e.g. ``{"vpc.amazonaws.com/efa": 1}``)
        tags: metadata tags (not interpreted by schedulers)
    """

    cpu: int
    gpu: int
    memMB: int
    capabilities: dict[str, Any] = field(default_factory=dict)
    devices: dict[str, int] = field(default_factory=dict)
    tags: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    def is_null(self) -> bool:
        """True for :data:`NULL_RESOURCE` (a role whose resources were never set)."""
        return (self.cpu, self.gpu, self.memMB) == (-1, -1, -1)

    def validate(self) -> None:
        """Raises InvalidSpecError if a quantity is negative or not an int."""
        _require_dict(
            "Resource.capabilities",
            self.capabilities,
            "pass e.g. {'node.kubernetes.io/instance-type': 'p3.2xlarge'}",
        )
        _require_dict(
            "Resource.tags", self.tags, "pass e.g. {'anylaunch/resource_name': 'cpu.small'}"
        )
        _require_dict("Resource.devices", self.devices, "pass e.g. {'vpc.amazonaws.com/efa': 1}")
        if self.is_null():
            return
        for name, most in MAX_RESOURCE.items():
            fix = f"use a whole number from 0 to {most} (no machine has more), or resource(h=...)"
            _require_int("Resource", name, getattr(self, name), 0, fix, most)
        for device, count in self.devices.items():
            _require_int("Resource", f"devices[{device!r}]", count, 0, "use a count >= 0")

    @staticmethod
    def copy(original: Resource, **capabilities: Any) -> Resource:
        """Copies a resource, merging in the given capabilities.

        >>> r = Resource.copy(Resource(cpu=1, gpu=0, memMB=512), zone="us-east-1a")
        >>> r.capabilities
        {'zone': 'us-east-1a'}
        """
        return Resource(
            cpu=original.cpu,
            gpu=original.gpu,
            memMB=original.memMB,
            capabilities={**original.capabilities, **capabilities},
            devices=dict(original.devices),
            tags=dict(original.tags),
        )

    def get_resource_name(self) -> str | None:
        """Returns the registered named-resource name, or None.

        Set by every registered named-resource factory, in the
        :attr:`~anylaunch.specs.tags.resource_tags.RESOURCE_NAME` tag.

        >>> Resource(cpu=1, gpu=0, memMB=64).get_resource_name() is None
        True
        """
        name = self.tags.get(resource_tags.RESOURCE_NAME)
        return name if isinstance(name, str) else None

    def is_fractional(self) -> bool:
        """Returns True if this resource is a fractional slice of a base named resource.

        Read from the :attr:`~anylaunch.specs.tags.resource_tags.IS_FRACTIONAL` tag, which
        ``register.named_resource(fractionals=...)`` sets (absent means False).

        >>> from anylaunch.specs.tags import resource_tags
        >>> Resource(cpu=1, gpu=0, memMB=64, tags={resource_tags.IS_FRACTIONAL: True}).is_fractional()
        True
        """
        return bool(self.tags.get(resource_tags.IS_FRACTIONAL, False))


#: A role's resource when none was given: schedulers that need resources reject it.
NULL_RESOURCE: Resource = Resource(cpu=-1, gpu=-1, memMB=-1)


def _null_resource() -> Resource:
    return Resource(cpu=-1, gpu=-1, memMB=-1)


class RetryPolicy(str, Enum):
    """What a scheduler restarts when a replica fails.

    - ``REPLICA``: replaces the failed replica; surviving replicas are untouched.
    - ``APPLICATION``: restarts the entire application (every scheduler supports it).
    - ``ROLE``: restarts every replica of the failed replica's role.
    """

    REPLICA = "REPLICA"
    APPLICATION = "APPLICATION"
    ROLE = "ROLE"

    def __str__(self) -> str:
        return self.value


# ---------------------------------------------------------------------------------------------
# Workspace
# ---------------------------------------------------------------------------------------------


@dataclass
class Workspace:
    """Maps local project directories to remote workspace locations.

    At submit time the projects are copied so that the remote job mirrors local code changes.
    An empty workspace (no projects) is allowed and is falsy: nothing is copied.

    >>> from anylaunch.specs import Workspace
    >>> # copies ~/github/torch/** into $REMOTE_ROOT/torch/**
    >>> ws = Workspace(projects={"~/github/torch": "torch"})
    >>> # copies ~/github/torch/** into $REMOTE_ROOT/** (no sub-dir)
    >>> ws = Workspace(projects={"~/github/torch": ""})
    >>> ws.is_unmapped_single_project(), bool(ws), bool(Workspace({}))
    (True, True, False)

    Args:
        projects: ``{local_path: remote_subdir}`` mapping (a ``None`` sub-directory means
            ``""``: no sub-directory).
    """

    projects: dict[str, str]

    def __post_init__(self) -> None:
        fix = "e.g. Workspace(projects={'~/github/torch': 'torch'}), or {} for no workspace"
        if not isinstance(self.projects, dict):
            raise InvalidSpecError(
                "Workspace.projects",
                self.projects,
                "must be a {local_path: remote_subdir} dict",
                fix,
            )
        projects: dict[str, str] = {}
        for local, remote in self.projects.items():
            if not isinstance(local, str):
                raise InvalidSpecError(
                    "Workspace.projects", local, "a local path must be a str", fix
                )
            if remote is not None and not isinstance(remote, str):
                raise InvalidSpecError(
                    f"Workspace.projects[{local!r}]",
                    remote,
                    "the remote sub-directory must be a str ('' or None: no sub-directory)",
                    fix,
                )
            remote = remote or ""
            if not local.strip() or any(ord(c) < 0x20 for c in local + remote):
                raise InvalidSpecError(
                    "Workspace.projects", local, "has a blank path or a control character", fix
                )
            if remote.startswith(("/", "\\")) or ".." in re.split(r"[/\\]", remote):
                raise InvalidSpecError(
                    f"Workspace.projects[{local!r}]",
                    remote,
                    "the remote sub-directory must stay inside the workspace (relative, no '..')",
                    fix,
                )
            projects[local] = remote
        self.projects = projects

    def __bool__(self) -> bool:
        return bool(self.projects)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workspace) and self.projects == other.projects

    def __hash__(self) -> int:
        return hash(frozenset(self.projects.items()))

    @staticmethod
    def from_str(workspace: str | None) -> Workspace:
        """Parses a workspace as written on the command line or in a config file.

        Accepted forms: a YAML mapping ``local_path: remote_subdir`` (one per line or
        ``{a: b, c: d}``; comments allowed; an empty sub-directory means none), a single
        path, or ``local[:remote]`` items joined by ``,`` or ``;`` (the form ``str()``
        prints). URLs (``s3://bucket/dir``) are paths. ``None`` or blank text is the
        empty workspace.

        >>> Workspace.from_str("~/proj")
        Workspace(projects={'~/proj': ''})
        >>> Workspace.from_str("src:app,conf:etc")
        Workspace(projects={'src': 'app', 'conf': 'etc'})
        >>> Workspace.from_str('''
        ... # local: remote
        ... ~/github/torch: torch
        ... ~/notes:
        ... ''')
        Workspace(projects={'~/github/torch': 'torch', '~/notes': ''})
        >>> Workspace.from_str("{a: x, s3://bucket/dir: y}").projects
        {'a': 'x', 's3://bucket/dir': 'y'}
        >>> bool(Workspace.from_str(None)), str(Workspace.from_str("a:x;b"))
        (False, 'a:x;b')

        Raises:
            InvalidSpecError: the text is neither of the forms (names the problem)
        """
        if workspace is None or (isinstance(workspace, str) and not workspace.strip()):
            return Workspace({})
        if not isinstance(workspace, str):
            raise InvalidSpecError(
                "workspace",
                workspace,
                "must be a str",
                "pass e.g. '~/proj', 'src:app,conf:etc' or 'src: app' (YAML)",
            )
        import yaml  # a core dependency; only needed here

        try:
            loaded = yaml.safe_load(workspace)
        except yaml.YAMLError as e:
            if "\n" in workspace.strip():
                raise InvalidSpecError(
                    "workspace",
                    workspace,
                    f"is not a YAML mapping ({str(e).splitlines()[0]})",
                    "write one 'local_path: remote_subdir' per line",
                ) from None
            loaded = None  # one line: the path[:remote] list form below
        if isinstance(loaded, dict):
            return Workspace(Workspace._yaml_projects(workspace, loaded))
        if isinstance(loaded, list):
            raise InvalidSpecError(
                "workspace",
                workspace,
                "is a YAML list, not a mapping",
                "write one 'local_path: remote_subdir' per line ('local_path:' for no sub-dir)",
            )
        # a scalar: a path or the list form (YAML reads "~" as null, "1" as an int: use the text)
        text = loaded if isinstance(loaded, str) else workspace.strip()
        return Workspace(Workspace._list_form_projects(text))

    @staticmethod
    def _yaml_projects(text: str, loaded: dict[Any, Any]) -> dict[str, str]:
        projects: dict[str, str] = {}
        for local, remote in loaded.items():
            if isinstance(remote, (dict, list)):
                raise InvalidSpecError(
                    f"workspace[{local!r}]",
                    remote,
                    "the remote sub-directory must be a plain path",
                    "write 'local_path: remote_subdir' (or 'local_path:' for none)",
                )
            if local is None:
                raise InvalidSpecError(
                    "workspace", text, "has an empty local path", "write 'local_path: remote'"
                )
            projects[str(local)] = "" if remote is None else str(remote)
        return projects

    @staticmethod
    def _list_form_projects(text: str) -> dict[str, str]:
        projects: dict[str, str] = {}
        for item in (p.strip() for p in text.replace(";", ",").split(",")):
            if not item:
                continue
            if "://" in item:  # a URL: its own colons are not a mapping
                projects[item] = ""
            else:
                local, _, remote = item.partition(":")
                if not local.strip():
                    raise InvalidSpecError(
                        "workspace", text, f"{item!r} has no local path", "write local[:remote]"
                    )
                projects[local.strip()] = remote.strip()
        return projects

    def is_unmapped_single_project(self) -> bool:
        """True if this is a single-project workspace with no target sub-directory."""
        return len(self.projects) == 1 and not next(iter(self.projects.values()))

    def merge_into(self, outdir: str | Path) -> None:
        """Copies each project into ``{outdir}/{target}`` (local paths or fsspec URLs)."""
        import os
        import shutil

        for src, target in self.projects.items():
            dst = os.path.join(str(outdir), target)
            if "://" in src:
                import fsspec

                fs, path = fsspec.core.url_to_fs(src)
                fs.get(path, dst, recursive=True)
                continue
            local = os.path.expanduser(src)
            if os.path.isdir(local):
                shutil.copytree(local, dst, dirs_exist_ok=True, symlinks=True)
            elif os.path.isfile(local):
                os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
                shutil.copy2(local, dst if target else os.path.join(dst, os.path.basename(local)))
            else:
                raise InvalidSpecError(
                    "Workspace.projects",
                    src,
                    "the local path does not exist",
                    "point the workspace at an existing file or directory",
                )

    def __str__(self) -> str:
        """The single unmapped path, else ``local[:remote]`` items joined by ``;``.

        >>> str(Workspace({"~/proj": ""})), str(Workspace({"src": "app", "conf": ""}))
        ('~/proj', 'src:app;conf')
        """
        if self.is_unmapped_single_project():
            return next(iter(self.projects))
        return ";".join(f"{k}:{v}" if v else k for k, v in self.projects.items())


# ---------------------------------------------------------------------------------------------
# Roles and apps
# ---------------------------------------------------------------------------------------------


@dataclass
class Role:
    """A set of identical replicas that perform one duty within an AppDef.

    >>> from anylaunch.specs import Role, Resource
    >>> trainer = Role(
    ...     name="trainer",
    ...     image="pytorch/torch:latest",
    ...     entrypoint="train.py",
    ...     args=["--lr", "0.01"],
    ...     num_replicas=4,
    ...     resource=Resource(cpu=4, gpu=1, memMB=8192),
    ... )

    Args:
        name: name of the role (letters, digits, ``_``, ``.``, ``-``)
        image: software bundle installed on the container (docker image, directory, ...);
            ``""`` for schedulers that run no image (slurm, lsf, local_cwd), as in TorchX
        min_replicas: minimum replicas for elastic scaling (None: run at num_replicas)
        entrypoint: command to invoke inside the container
        args: arguments to the entrypoint
        env: environment variable mappings
        num_replicas: number of container replicas
        max_retries: max number of retries before giving up
        retry_policy: retry behavior upon failures
        resource: resource requirements per replica
        port_map: named port mappings (e.g. ``{"tensorboard": 8081}``)
        metadata: scheduler-specific data; keys should follow ``$scheduler.$key``
        mounts: bind, volume, or device mounts
        workspace: local project directories to mirror on the remote job
        overrides: scheduler-specific request overrides
    """

    name: str
    image: str
    min_replicas: int | None = None
    entrypoint: str = MISSING
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    num_replicas: int = 1
    max_retries: int = 0
    retry_policy: RetryPolicy = RetryPolicy.APPLICATION
    resource: Resource = field(default_factory=_null_resource)
    port_map: dict[str, int] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    mounts: list[BindMount | VolumeMount | DeviceMount] = field(default_factory=list)
    workspace: Workspace | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        # the dataclass repr, with secret env values masked (reprs end up in logs and errors)
        from dataclasses import fields

        from anylaunch.specs.secrets import mask_env

        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.repr}
        if isinstance(shown.get("env"), dict):
            shown["env"] = mask_env(shown["env"])
        return f"Role({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raises InvalidSpecError naming the first field that cannot work."""
        if not isinstance(self.name, str) or not _ROLE_NAME.fullmatch(self.name):
            raise InvalidSpecError(
                "Role.name",
                self.name,
                "must be a non-empty name of letters, digits, '_', '.' or '-' "
                "(it appears in handles, paths and backend object names)",
                "rename the role, e.g. 'trainer' or 'worker-0'",
            )
        where = f"Role[{self.name}]"
        check_type(f"{where}.image", self.image, str, "must be a str", "pass e.g. 'python:3.11'")
        if (self.image and not self.image.strip()) or any(ord(c) < 0x20 for c in self.image):
            raise InvalidSpecError(
                f"{where}.image",
                self.image,
                "is blank or holds a control character (no backend can resolve it)",
                "pass an image or directory, or '' where the scheduler runs no image (slurm, lsf)",
            )
        if not isinstance(self.entrypoint, str) or not self.entrypoint:
            raise InvalidSpecError(
                f"{where}.entrypoint", self.entrypoint, "must be a non-empty str", "pass a command"
            )
        if not isinstance(self.args, list) or not all(isinstance(a, str) for a in self.args):
            raise InvalidSpecError(
                f"{where}.args",
                self.args,
                "must be a list of str",
                "convert each argument with str(), e.g. args=['--lr', str(lr)]",
            )
        check_type(f"{where}.env", self.env, dict, "must be a dict", "")
        for key, value in self.env.items():
            if not isinstance(key, str) or not ENV_NAME.fullmatch(key):
                raise InvalidSpecError(
                    f"{where}.env",
                    key,
                    "is not a valid variable name (no '=', spaces or control characters)",
                    "rename the variable, e.g. 'MY_VAR'",
                )
            if not isinstance(value, str):
                # the value itself may be a secret: name only its type
                raise InvalidSpecError(
                    f"{where}.env[{key!r}]",
                    f"<{type(value).__name__}>",
                    "must be a str",
                    "convert the value with str()",
                )
        _require_int(
            where,
            "num_replicas",
            self.num_replicas,
            1,
            f"set 1 <= num_replicas <= {MAX_REPLICAS}",
            MAX_REPLICAS,
        )
        _require_int(
            where,
            "max_retries",
            self.max_retries,
            0,
            f"set 0 <= max_retries <= {MAX_RETRIES}",
            MAX_RETRIES,
        )
        if self.min_replicas is not None:
            _require_int(where, "min_replicas", self.min_replicas, 1, "set min_replicas >= 1")
            if self.min_replicas > self.num_replicas:
                raise InvalidSpecError(
                    f"{where}.min_replicas",
                    self.min_replicas,
                    f"is greater than num_replicas={self.num_replicas}",
                    "set min_replicas <= num_replicas (or leave it None)",
                )
        if not isinstance(self.retry_policy, RetryPolicy):
            try:
                self.retry_policy = RetryPolicy(self.retry_policy)
            except ValueError:
                raise InvalidSpecError(
                    f"{where}.retry_policy",
                    self.retry_policy,
                    "is not a RetryPolicy",
                    f"use one of {', '.join(p.value for p in RetryPolicy)}",
                ) from None
        if not isinstance(self.resource, Resource):
            raise InvalidSpecError(
                f"{where}.resource", self.resource, "must be a Resource", "use specs.resource(...)"
            )
        self.resource.validate()
        _require_dict(f"{where}.port_map", self.port_map, "pass e.g. {'tensorboard': 6006}")
        for port_name, port in self.port_map.items():
            if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
                raise InvalidSpecError(
                    f"{where}.port_map[{port_name!r}]", port, "is not a port", "use 1-65535"
                )
        check_type(
            f"{where}.mounts",
            self.mounts,
            list,
            "must be a list",
            "build mounts with specs.parse_mounts([...])",
        )
        for mount in self.mounts:
            if not isinstance(mount, (BindMount, VolumeMount, DeviceMount)):
                raise InvalidSpecError(
                    f"{where}.mounts",
                    mount,
                    "is not a BindMount, VolumeMount or DeviceMount",
                    "build mounts with specs.parse_mounts([...])",
                )
            mount.__post_init__()  # its fields may have changed since it was built
        _require_dict(f"{where}.metadata", self.metadata, "pass e.g. {'slurm.comment': 'x'}")
        _require_dict(f"{where}.overrides", self.overrides, "pass e.g. {'spec': {...}}")
        if self.workspace is not None:
            check_type(
                f"{where}.workspace",
                self.workspace,
                Workspace,
                "must be a Workspace or None",
                "pass Workspace.from_str('.') (or a path string to Runner.run(workspace=...))",
            )

    def pre_proc(self, scheduler: str, dryrun_info: AppDryRunInfo[Any]) -> AppDryRunInfo[Any]:
        """Hook for role-specific scheduler request modifications.

        Called per role during ``Scheduler.submit_dryrun``, in the order of ``AppDef.roles``.
        """
        return dryrun_info


@dataclass
class AppDef:
    """A distributed application composed of one or more :class:`Role` s.

    >>> from anylaunch.specs import AppDef, Role
    >>> app = AppDef(
    ...     name="my_train",
    ...     roles=[Role(name="trainer", image="my_image:latest")],
    ... )

    Args:
        name: application name
        roles: the roles of the app
        metadata: scheduler-specific metadata (treatment varies by scheduler)
        array: run the app once per index of this :class:`~anylaunch.specs.ArraySpec`, as
            one job array (see :func:`~anylaunch.specs.sweep`); None runs it once
    """

    name: str
    roles: list[Role] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    array: ArraySpec | None = None

    def __post_init__(self) -> None:
        if (
            not isinstance(self.name, str)
            or not self.name.strip()
            or self.name != self.name.strip()
            or any(ord(c) < 0x20 or ord(c) == 0x7F for c in self.name)
        ):
            raise InvalidSpecError(
                "AppDef.name",
                self.name,
                "must be a non-empty str without leading/trailing whitespace or control characters",
                "pass a name such as 'train'",
            )
        if not isinstance(self.roles, list):
            raise InvalidSpecError(
                "AppDef.roles", self.roles, "must be a list of Role", "pass roles=[Role(...)]"
            )
        _require_dict("AppDef.metadata", self.metadata, "pass e.g. {'team': 'ml'}")
        self._check_roles()
        if self.array is not None:
            self.validate_array()

    def validate_array(self) -> None:
        """Checks that an array app has what every backend's native arrays can run: an
        :class:`ArraySpec` and one role of one replica (each index is that replica).

        >>> from anylaunch.specs import ArraySpec
        >>> AppDef("a", [Role("r", image=".", num_replicas=2)], array=ArraySpec(4))
        Traceback (most recent call last):
        ...
        anylaunch.specs.errors.InvalidSpecError: Role.num_replicas=2 is invalid: an array runs one replica per index (Slurm, LSF and AWS Batch arrays hold single jobs). Fix: set num_replicas=1 and let the index pick the work (ANYLAUNCH_ARRAY_INDEX)
        """
        from anylaunch.specs.arrays import ArraySpec

        if self.array is None:
            return
        check_type(
            "AppDef.array",
            self.array,
            ArraySpec,
            "must be an ArraySpec or None",
            "pass array=anylaunch.specs.ArraySpec(size, parallelism=...)",
        )
        if len(self.roles) > 1:
            raise InvalidSpecError(
                "AppDef.roles",
                [r.name for r in self.roles],
                "an array app has one role (no backend runs arrays of multi-role jobs)",
                "keep one role, or run the roles as separate arrays",
            )
        for role in self.roles:
            if role.num_replicas != 1:
                raise InvalidSpecError(
                    "Role.num_replicas",
                    role.num_replicas,
                    "an array runs one replica per index (Slurm, LSF and AWS Batch arrays "
                    "hold single jobs)",
                    "set num_replicas=1 and let the index pick the work (ANYLAUNCH_ARRAY_INDEX)",
                )

    def _check_roles(self) -> None:
        seen: set[str] = set()
        for role in self.roles:
            if not isinstance(role, Role):
                raise InvalidSpecError(
                    "AppDef.roles", role, "is not a Role", "pass roles=[Role(...)]"
                )
            if role.name in seen:
                raise InvalidSpecError(
                    "AppDef.roles",
                    role.name,
                    "two roles have this name",
                    "give every role a distinct name",
                )
            seen.add(role.name)

    def validate(self) -> None:
        """Checks the whole app before submission (roles may have changed since creation).

        >>> AppDef(name="empty").validate()
        Traceback (most recent call last):
        ...
        anylaunch.specs.errors.InvalidSpecError: AppDef.roles=[] is invalid: an app needs at least one role. Fix: pass roles=[Role(name=..., image=..., entrypoint=...)]
        """
        if not self.roles:
            raise InvalidSpecError(
                "AppDef.roles",
                self.roles,
                "an app needs at least one role",
                "pass roles=[Role(name=..., image=..., entrypoint=...)]",
            )
        self._check_roles()
        for role in self.roles:
            role.validate()
        self.validate_array()
