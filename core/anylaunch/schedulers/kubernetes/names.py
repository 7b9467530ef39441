"""Names, labels and run options of the Kubernetes schedulers (no I/O)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from anylaunch.schedulers.common.app_ids import random_suffix
from anylaunch.schedulers.common.job_metadata import JOB_METADATA_KEYS
from anylaunch.specs.api import (
    AppDef,
)
from anylaunch.specs.errors import (
    InvalidRunConfigException,
    InvalidSpecError,
)
from anylaunch.specs.runopts import CfgVal
from anylaunch.specs.structured_opts import StructuredOpts

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
#: The app record on the object that carries it (the rank-0 Job in ``jobs`` mode).
ANNOTATION_RECORD = "anylaunch.io/record"
MANAGED_BY = "anylaunch"
#: The app record's key in a record ConfigMap.
RECORD_KEY = "app.json"
#: The longest app record kept in an annotation (the API server allows 256 KiB for all of an
#: object's annotations together); a longer one gets a ConfigMap of its own.
RECORD_ANNOTATION_MAX = 200_000
#: The labels that name an app (not one of its replicas): what a record ConfigMap carries.
APP_LABEL_KEYS = (
    LABEL_MANAGED_BY,
    LABEL_SCHEDULER,
    LABEL_MODE,
    LABEL_APP_ID,
    LABEL_APP_NAME,
    *JOB_METADATA_KEYS,
)

#: Label and annotation keys anylaunch owns on every object it creates (selectors, state
#: tracking, cancel marks): no overlay may add, change or remove one.
OWNED_KEY_PREFIXES = ("anylaunch.io/", LABEL_MANAGED_BY)

#: Pod overlay fields anylaunch owns. The role's own container is checked after the overlay is
#: applied (:func:`apply_pod_overlays`): its image, command, args and env come from the Role,
#: while other containers (sidecars) may be added freely.
POD_OVERLAY_BLOCKLIST = ["metadata.name", "metadata.namespace", "spec.restartPolicy"]
_ROLE_CONTAINER_FIELDS = {
    "image": "image",
    "command": "entrypoint",
    "args": "args",
    "env": "env",
    "resources": "resource",
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
    return f"{base}-{random_suffix(6)}"


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
        for name in ("service_account", "priority_class"):
            value = getattr(self, name)
            if value is not None and not is_dns_subdomain(value):
                raise InvalidRunConfigException(
                    name,
                    value,
                    "is not a Kubernetes object name (a DNS-1123 subdomain)",
                    "use lowercase letters, digits, '-' and '.', e.g. 'trainer-sa'",
                )


_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def is_dns_subdomain(name: str) -> bool:
    """True for a valid Kubernetes object name (DNS-1123 subdomain, at most 253 characters).

    >>> is_dns_subdomain("trainer-sa"), is_dns_subdomain("Bad Account"), is_dns_subdomain("a.b")
    (True, False, True)
    """
    return len(name) <= 253 and _DNS_SUBDOMAIN.fullmatch(name) is not None


def opts_from_cfg(cls: type[KubernetesCommonOpts], cfg: Mapping[str, CfgVal]) -> Any:
    """Parses the scheduler's own options from a resolved cfg (a workspace's are skipped)."""
    known = cls.as_runopts()
    opts = cls.from_cfg({k: v for k, v in cfg.items() if known.get(k) is not None})
    opts.check()
    return opts
