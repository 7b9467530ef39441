"""Core anylaunch types for defining distributed applications.

The main types are AppDef, Role and Resource. Components are functions that return an AppDef
which can then be launched via a Scheduler.

>>> import anylaunch.specs as specs
>>> app = specs.AppDef(
...     name="echo",
...     roles=[specs.Role(name="worker", image="/tmp", entrypoint="/bin/echo", args=["hello"])],
... )
>>> app.name
'echo'
"""

from typing import TYPE_CHECKING

from anylaunch.lazy import lazy_getattr
from anylaunch.specs.api import (
    ALL,
    ANYLAUNCH_HOME,
    MISSING,
    NONE,
    NULL_RESOURCE,
    UNKNOWN,
    AppDef,
    AppDryRunInfo,
    AppHandle,
    AppState,
    AppStatus,
    AppStatusError,
    BindMount,
    CfgVal,
    DeviceMount,
    GiB,
    InvalidRunConfigException,
    MalformedAppHandleException,
    MountType,
    ParsedAppHandle,
    ReplicaState,
    ReplicaStatus,
    Resource,
    RetryPolicy,
    Role,
    RoleStatus,
    UnknownAppException,
    UnknownSchedulerException,
    VolumeMount,
    Workspace,
    cases,
    get_type_name,
    is_terminal,
    macros,
    parse_app_handle,
    runopt,
    runopts,
)
from anylaunch.specs.array_status import ArrayStatus
from anylaunch.specs.arrays import ArraySpec, sweep
from anylaunch.specs.capabilities import CapabilityKey
from anylaunch.specs.errors import AnylaunchError, InvalidSpecError
from anylaunch.specs.handles import make_app_handle
from anylaunch.specs.metadata_keys import ANYLAUNCH_CONTEXT_NAME, NA, app_metadata
from anylaunch.specs.mounts import parse_mounts

if TYPE_CHECKING:
    from anylaunch.specs.builders import materialize_appdef
    from anylaunch.specs.resources import get_named_resources, named_resources, resource

# Named resources pull in entry points (importlib.metadata), builders imports argparse: load
# them on first use only.
_LAZY = {
    "anylaunch.specs.resources": ("named_resources", "resource", "get_named_resources"),
    "anylaunch.specs.builders": ("materialize_appdef",),
}
__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "ALL",
    "ANYLAUNCH_CONTEXT_NAME",
    "ANYLAUNCH_HOME",
    "MISSING",
    "NA",
    "NONE",
    "NULL_RESOURCE",
    "UNKNOWN",
    "AnylaunchError",
    "AppDef",
    "AppDryRunInfo",
    "AppHandle",
    "AppState",
    "AppStatus",
    "AppStatusError",
    "ArraySpec",
    "ArrayStatus",
    "BindMount",
    "CapabilityKey",
    "CfgVal",
    "DeviceMount",
    "GiB",
    "InvalidRunConfigException",
    "InvalidSpecError",
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
    "app_metadata",
    "cases",
    "get_named_resources",
    "get_type_name",
    "is_terminal",
    "macros",
    "make_app_handle",
    "materialize_appdef",
    "named_resources",
    "parse_app_handle",
    "parse_mounts",
    "resource",
    "runopt",
    "runopts",
    "sweep",
]
