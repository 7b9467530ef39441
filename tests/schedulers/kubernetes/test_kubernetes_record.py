"""The app record on the provisioned cluster (an annotation of the rank-0 Job in jobs mode, a
ConfigMap in the other modes, too long a record or a cancelled app): it never holds a secret
env value in clear while the pods get the real one, and records written by the previous version
(a ConfigMap per app, for apps launched before an upgrade) still describe, list and serve
logs."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import pytest

from anylaunch.schedulers.kubernetes.client import KubeClient
from anylaunch.schedulers.kubernetes_mcad_scheduler import KubernetesMCADScheduler
from anylaunch.schedulers.kubernetes_scheduler import KubernetesScheduler
from anylaunch.specs import AppDef, AppState, Resource, RetryPolicy, Role, parse_mounts
from anylaunch.specs.errors import InvalidSpecError
from tests.schedulers.kubernetes.kube_cluster import BUSYBOX, wait_for

SECRET = "s3cr3t-value-42"
RECORD = "anylaunch.io/record"
NOWHERE = {"node.kubernetes.io/instance-type": "anylaunch-no-such-instance-type"}


def _record(client: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    record = client.get("v1", "ConfigMap", namespace, name)
    assert record is not None
    return dict(record)


def _job_record(client: KubeClient, namespace: str, job_name: str) -> tuple[str, dict[str, Any]]:
    """(the record annotation's text, the Job carrying it)."""
    job = client.get("batch/v1", "Job", namespace, job_name)
    assert job is not None
    return job["metadata"]["annotations"][RECORD], dict(job)


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container["env"]}


def test_the_record_holds_no_secret_value_while_the_pod_gets_it(
    k8s: KubernetesScheduler, kubelet: str, kube_client: KubeClient, kube_namespace: str
) -> None:
    # the container checks the values it got by their digests (neither printed nor in args)
    digest = hashlib.md5(f"{SECRET}/{SECRET}-2".encode()).hexdigest()
    script = (
        f'test "$(printf %s/%s "$API_TOKEN" "$DB_PASSWORD" | md5sum)" = "{digest}  -" && echo ok'
    )
    role = Role(
        "main",
        BUSYBOX,
        entrypoint="sh",
        args=["-c", script],
        env={"API_TOKEN": SECRET, "DB_PASSWORD": f"{SECRET}-2", "LR": "0.1"},
        resource=Resource(cpu=0, gpu=0, memMB=128),
    )
    info = k8s.submit_dryrun(AppDef("secret", [role]), {"namespace": kube_namespace})
    assert SECRET not in str(info)
    app_id = k8s.schedule(info)
    name = app_id.split(":", 1)[1]

    assert kube_client.get("v1", "ConfigMap", kube_namespace, name) is None  # on the Job
    record, job = _job_record(kube_client, kube_namespace, f"{name}-main-0")
    assert SECRET not in record
    stored = json.loads(record)["roles"][0]["env"]
    assert stored == {"API_TOKEN": "***", "DB_PASSWORD": "***", "LR": "0.1"}
    # the pod does not carry the record (the Job's own annotations stay on the Job)
    assert RECORD not in (job["spec"]["template"]["metadata"].get("annotations") or {})
    env = _env(job["spec"]["template"]["spec"]["containers"][0])
    assert (env["API_TOKEN"], env["DB_PASSWORD"]) == (SECRET, f"{SECRET}-2")

    def finished() -> Any:
        desc = k8s.describe(app_id)
        assert desc is not None
        return desc if desc.state.is_terminal() else None

    desc = wait_for(finished, 120, f"{app_id} to finish", interval=0.5)
    assert desc.state == AppState.SUCCEEDED, desc  # the pod got the real values
    assert list(k8s.log_iter(app_id, "main", 0)) == ["ok\n"]
    assert desc.roles[0].env == {"API_TOKEN": "***", "DB_PASSWORD": "***", "LR": "0.1"}


def test_the_mcad_record_holds_no_secret_value_while_the_wrapped_pod_does(
    mcad: KubernetesMCADScheduler, kube_client: KubeClient, kube_namespace: str
) -> None:
    role = Role(
        "main",
        BUSYBOX,
        entrypoint="true",
        env={"HF_TOKEN": SECRET},
        resource=Resource(cpu=1, gpu=0, memMB=128),
    )
    app_id = mcad.submit(AppDef("secret", [role]), {"namespace": kube_namespace})
    name = app_id.split(":", 1)[1]
    assert SECRET not in json.dumps(_record(kube_client, kube_namespace, name))
    wrapper = kube_client.get("mcad.ibm.com/v1beta1", "AppWrapper", kube_namespace, name)
    assert wrapper is not None
    pod = wrapper["spec"]["resources"]["GenericItems"][0]["generictemplate"]
    assert _env(pod["spec"]["containers"][0])["HF_TOKEN"] == SECRET
    desc = mcad.describe(app_id)
    assert desc is not None and desc.roles[0].env == {"HF_TOKEN": "***"}


def _previous_version_record(name: str, session: str) -> dict[str, Any]:
    """The app record exactly as the previous version wrote it (its own role form: the retry
    policy's value, five resource keys, typed mounts, secret values masked)."""
    trainer = {
        "name": "Trainer_1",
        "image": BUSYBOX,
        "entrypoint": "sleep",
        "args": ["600"],
        "env": {"API_TOKEN": "***", "LR": "0.1"},
        "num_replicas": 2,
        "min_replicas": None,
        "max_retries": 2,
        "retry_policy": "REPLICA",
        "resource": {
            "cpu": 1,
            "gpu": 0,
            "memMB": 128,
            "capabilities": dict(NOWHERE),
            "devices": {},
        },
        "port_map": {"c10d": 29500},
        "mounts": [
            {"type": "bind", "src_path": "/tmp", "dst_path": "/host-tmp", "read_only": True},
            {"type": "volume", "src": "datasets", "dst_path": "/data", "read_only": False},
        ],
    }
    return {
        "name": "upgraded",
        "session": session,
        "scheduler": "kubernetes",
        "mode": "jobs",
        "created": time.time(),
        "roles": [trainer],
        "role_labels": {"Trainer_1": "trainer-1"},
    }


def test_a_record_of_the_previous_version_still_describes(
    k8s: KubernetesScheduler, kube_client: KubeClient, kube_namespace: str, session_name: str
) -> None:
    # the app the previous version's record describes (it never schedules: no such node)
    role = Role(
        "Trainer_1",
        BUSYBOX,
        entrypoint="sleep",
        args=["600"],
        env={"API_TOKEN": SECRET, "LR": "0.1"},
        num_replicas=2,
        max_retries=2,
        retry_policy=RetryPolicy.REPLICA,
        resource=Resource(cpu=1, gpu=0, memMB=128, capabilities=dict(NOWHERE)),
        port_map={"c10d": 29500},
        mounts=parse_mounts(
            ["type=bind,src=/tmp,dst=/host-tmp,readonly", "type=volume,src=datasets,dst=/data"]
        ),
    )
    cfg = {"namespace": kube_namespace}
    app_id = k8s.submit(AppDef("upgraded", [role]), cfg)
    name = app_id.split(":", 1)[1]
    # what the previous version left: a record ConfigMap, and no record on the Jobs
    old = json.dumps(_previous_version_record(name, session_name), sort_keys=True)
    _, job = _job_record(kube_client, kube_namespace, f"{name}-trainer-1-0")
    labels = {k: v for k, v in job["metadata"]["labels"].items() if "role" not in k}
    labels.pop("anylaunch.io/replica-id")
    kube_client.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels},
            "data": {"app.json": old},
        },
        kube_namespace,
    )
    unmark = {"metadata": {"annotations": {RECORD: None}}}
    kube_client.patch("batch/v1", "Job", kube_namespace, f"{name}-trainer-1-0", unmark)

    desc = k8s.describe(app_id)
    assert desc is not None and desc.state in (AppState.SUBMITTED, AppState.PENDING)
    described = desc.roles[0]
    assert (described.name, described.args, described.num_replicas) == ("Trainer_1", ["600"], 2)
    assert (described.max_retries, described.retry_policy) == (2, RetryPolicy.REPLICA)
    assert described.env == {"API_TOKEN": "***", "LR": "0.1"}
    assert (described.resource.cpu, described.resource.memMB) == (1, 128)
    assert described.resource.capabilities == NOWHERE
    assert described.port_map == {"c10d": 29500}
    assert described.mounts == role.mounts
    assert [(rs.role, [r.id for r in rs.replicas]) for rs in desc.roles_statuses] == [
        ("Trainer_1", [0, 1])
    ]
    assert {a.app_id: a.name for a in k8s.list(cfg)}[app_id] == "upgraded"
    # the logs know its replicas from the old record (none has started: no lines)
    assert list(k8s.log_iter(app_id, "Trainer_1", 1)) == []
    with pytest.raises(InvalidSpecError, match=r"has 2 replica\(s\)"):
        k8s.log_iter(app_id, "Trainer_1", 2)
    k8s.cancel(app_id)
    desc = k8s.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED
    assert desc.roles[0].args == ["600"]  # the old record, now carrying the cancel mark
    assert (
        "anylaunch.io/cancelled"
        in _record(kube_client, kube_namespace, name)["metadata"]["annotations"]
    )


def test_a_record_too_long_for_an_annotation_gets_a_configmap(
    k8s: KubernetesScheduler, kube_client: KubeClient, kube_namespace: str
) -> None:
    """A record over the annotation budget (the server allows 256 KiB for all of an object's
    annotations) is written to a ConfigMap first; the app describes, and cancels, as any."""
    long_args = [f"--arg-{i}={'x' * 1000}" for i in range(210)]
    role = Role(
        "main",
        BUSYBOX,
        entrypoint="sleep",
        args=["600", *long_args],
        resource=Resource(cpu=1, gpu=0, memMB=128, capabilities=dict(NOWHERE)),
    )
    info = k8s.submit_dryrun(AppDef("long", [role]), {"namespace": kube_namespace})
    assert [o["kind"] for o in info.request.objects] == ["ConfigMap", "Job"]
    app_id = k8s.schedule(info)
    name = app_id.split(":", 1)[1]
    job = kube_client.get("batch/v1", "Job", kube_namespace, f"{name}-main-0")
    assert job is not None and RECORD not in (job["metadata"].get("annotations") or {})
    desc = k8s.describe(app_id)
    assert desc is not None and desc.state in (AppState.SUBMITTED, AppState.PENDING)
    assert desc.roles[0].args == role.args
    k8s.cancel(app_id)
    desc = k8s.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED
    assert kube_client.get("batch/v1", "Job", kube_namespace, f"{name}-main-0") is None


def test_a_cancel_that_finds_the_record_configmap_created_meanwhile_adds_its_mark(
    k8s: KubernetesScheduler, kube_client: KubeClient, kube_namespace: str
) -> None:
    """Two cancels of one app race: the later one's create of the record ConfigMap meets the
    earlier one's (409) and adds its marks to it rather than failing."""
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "raced-app", "labels": {"anylaunch.io/app-id": "raced-app"}},
        "data": {"app.json": "{}"},
    }
    first = k8s._create_or_mark(kube_namespace, configmap)
    assert first["metadata"].get("annotations") in (None, {})
    marked = {**configmap, "metadata": {**configmap["metadata"], "annotations": {"k": "v"}}}
    second = k8s._create_or_mark(kube_namespace, marked)
    assert second["metadata"]["annotations"] == {"k": "v"}
    stored = kube_client.get("v1", "ConfigMap", kube_namespace, "raced-app")
    assert stored["metadata"]["annotations"] == {"k": "v"}
    assert stored["data"] == {"app.json": "{}"}
