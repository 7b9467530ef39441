"""The app record of the Kubernetes schedulers (no I/O): a ConfigMap named after the app holding
how it was submitted and its roles, which ``describe``, ``list`` and the logs read back.

Roles are written with the shared :func:`~anylaunch.schedulers.shared.role_record`, secret env
values masked (a ConfigMap is readable by whoever may read the namespace's ConfigMaps; the
pods' own specs hold the real values), and read back with
:func:`~anylaunch.schedulers.shared.role_from_record`, which also reads the records of earlier
versions (apps launched before an upgrade still describe). The record outlives a cancel (which
deletes the workload) and carries the cancel mark.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from anylaunch.schedulers.kubernetes_names import RECORD_KEY, role_dns_names
from anylaunch.schedulers.shared import role_record as shared_role_record
from anylaunch.specs.api import AppDef, Role

__all__ = ["record_configmap", "record_data", "role_record"]


def role_record(role: Role) -> dict[str, Any]:
    """A role as the app record keeps it: the shared role record, secret env values masked.

    >>> role = Role("w", "img", entrypoint="x", env={"HF_TOKEN": "t", "LR": "1"})
    >>> role_record(role)["env"]
    {'HF_TOKEN': '***', 'LR': '1'}
    """
    return shared_role_record(role, mask_secrets=True)


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
    """The app record: a ConfigMap with the roles (as given, secrets masked) and how the app
    was submitted.

    >>> from anylaunch.specs import AppDef, Role
    >>> app = AppDef("a", [Role("w", "img", entrypoint="x", env={"API_TOKEN": "s3cr3t"})])
    >>> record = record_configmap(app, scheduler="kubernetes", mode="jobs", namespace="ml",
    ...                           name="a-1", session="s", labels={})
    >>> "s3cr3t" in str(record), record_data(record)["roles"][0]["env"]
    (False, {'API_TOKEN': '***'})
    """
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


def record_data(record: Mapping[str, Any]) -> dict[str, Any]:
    """What :func:`record_configmap` stored (``{}`` for a damaged record)."""
    try:
        data = json.loads(record.get("data", {}).get(RECORD_KEY, "{}"))
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
