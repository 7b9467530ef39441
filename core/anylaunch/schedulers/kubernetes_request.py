"""The request of the Kubernetes schedulers: the objects to create, how they print (secrets masked), the app record and labels (no I/O)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from anylaunch.schedulers.kubernetes_names import (
    LABEL_APP_ID,
    LABEL_APP_NAME,
    LABEL_MANAGED_BY,
    LABEL_MODE,
    LABEL_SCHEDULER,
    MANAGED_BY,
    RECORD_KEY,
    label_value,
    role_dns_names,
)
from anylaunch.schedulers.shared import (
    role_record,
)
from anylaunch.specs.api import (
    AppDef,
)


@dataclass
class KubernetesRequest:
    """The native request of the Kubernetes schedulers: the objects to create, in order.

    ``objects[0]`` is the app record (a ConfigMap). ``embedded_objects`` are the objects a
    custom resource (Volcano Job, AppWrapper) will create (pods, services, ...): each is
    validated by its own API before submission, since a CRD's schema does not check them. With ``rank0_pod_ip`` the objects after ``rank0_index``
    hold :data:`RANK0_IP_PLACEHOLDER` until ``schedule`` learns the rank-0 pod's IP.
    """

    scheduler: str
    mode: str
    namespace: str
    name: str
    objects: list[dict[str, Any]]
    embedded_objects: list[dict[str, Any]] = field(default_factory=list)
    rank0_pod_ip: bool = False
    rank0_index: int = 0
    rank0_timeout: float = 300.0
    #: Docker workspace images to build (and push to ``image_repo``) before submission.
    workspace_builds: list[Any] = field(default_factory=list)

    @property
    def app_id(self) -> str:
        """``{namespace}:{name}``."""
        return f"{self.namespace}:{self.name}"

    def __str__(self) -> str:
        return format_request(self)

    __repr__ = __str__


#: The rank-0 host of the non-rank-0 replicas with ``rank0_host=pod_ip``, until known.
RANK0_IP_PLACEHOLDER = "<rank-0 pod IP: set at submission>"


def _mask_env(obj: Any) -> None:
    """Replaces the values of secret-looking env vars in every container found in ``obj``."""
    from anylaunch.schedulers.shared import is_secret_env_name

    if isinstance(obj, dict):
        env = obj.get("env")
        if isinstance(env, list) and "image" in obj:
            for var in env:
                if isinstance(var, dict) and "value" in var and is_secret_env_name(var["name"]):
                    var["value"] = "***"
        for value in obj.values():
            _mask_env(value)
    elif isinstance(obj, list):
        for item in obj:
            _mask_env(item)


def format_request(request: KubernetesRequest) -> str:
    """The objects as a multi-document YAML stream, secret-looking env values masked.

    >>> req = KubernetesRequest("kubernetes", "jobs", "default", "a-1", objects=[
    ...     {"kind": "Pod", "spec": {"containers": [{"image": "i", "env": [
    ...         {"name": "API_TOKEN", "value": "s3cr3t"}]}]}}])
    >>> print(format_request(req))
    # kubernetes app default:a-1 (mode: jobs), 1 object(s)
    kind: Pod
    spec:
      containers:
      - image: i
        env:
        - name: API_TOKEN
          value: '***'
    """
    import copy

    import yaml

    objects = copy.deepcopy(request.objects)
    _mask_env(objects)
    header = (
        f"# {request.scheduler} app {request.app_id} (mode: {request.mode}), "
        f"{len(objects)} object(s)"
    )
    for build in request.workspace_builds:
        header += f"\n# workspace: {build.summary()}"
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml: ~20x faster
    body = yaml.dump_all(objects, Dumper=dumper, sort_keys=False, default_flow_style=False)
    return f"{header}\n{body}".rstrip("\n")


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
    """The app record: a ConfigMap with the roles (as given) and how the app was submitted."""
    data = {
        "name": app.name,
        "session": session,
        "scheduler": scheduler,
        "mode": mode,
        "created": time.time(),
        "roles": [role_record(role, mask_secrets=True) for role in app.roles],
        "role_labels": dict(zip([r.name for r in app.roles], role_dns_names(app), strict=True)),
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "data": {RECORD_KEY: json.dumps(data, sort_keys=True)},
    }


def app_labels(scheduler: str, mode: str, name: str, app_name: str) -> dict[str, str]:
    """Labels every object of an app carries."""
    labels = {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_SCHEDULER: scheduler,
        LABEL_MODE: mode,
        LABEL_APP_ID: name,
    }
    value = label_value(app_name)
    if value:
        labels[LABEL_APP_NAME] = value
    return labels
