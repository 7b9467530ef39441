"""The kubernetes scheduler: offline dryrun, and against the real kube-apiserver of
scripts/provision/30-kubernetes.sh: every rendered object validated by the server, overlays
(blocklisted locally, invalid ones rejected with the server's message), the lifecycle
(submit/describe/cancel/list/delete) with pending reasons, bounded describe calls, and the
Volcano mode against the Volcano Job CRD. Pods that really run: test_kubernetes_pods.py."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml

from anylaunch.schedulers.kubernetes.client import (
    KubeClient,
    KubernetesApiError,
    KubernetesSchedulerError,
    KubernetesValidationError,
)
from anylaunch.schedulers.kubernetes.scheduler import VOLCANO_API_VERSION
from anylaunch.schedulers.kubernetes_scheduler import KubernetesScheduler, create_scheduler
from anylaunch.specs import AppDef, AppState, Resource, RetryPolicy, Role, macros, parse_mounts
from anylaunch.specs.errors import InvalidRunConfigException, InvalidSpecError
from anylaunch.specs.overlays import JOIN, InvalidOverlayError, set_overlay
from tests.schedulers.kubernetes.conftest import CountingClient
from tests.schedulers.kubernetes.kube_cluster import wait_for

ITYPE = "node.kubernetes.io/instance-type"
NOWHERE = "anylaunch-no-such-instance-type"  # no node has it: pods stay Pending (unschedulable)


def kitchen_sink(image: str = "busybox:latest") -> AppDef:
    """Two roles using every Role feature the pod rendering covers."""
    trainer = Role(
        "Trainer_1",
        image,
        entrypoint="sh",
        args=["-c", "echo ${replica_id} of ${app_id}; echo $$ANYLAUNCH_RANK0_HOST"],
        env={
            "API_TOKEN": "s3cr3t",
            "LR": "0.1",
            "POD_NAME": "$(fieldRef:metadata.name)",
            "CPU_LIMIT": "$(resourceFieldRef:limits.cpu)",
            "RUN": macros.app_id,
        },
        num_replicas=2,
        max_retries=2,
        retry_policy=RetryPolicy.REPLICA,
        resource=Resource(
            cpu=2,
            gpu=1,
            memMB=4096,
            capabilities={ITYPE: "p4d.24xlarge"},
            devices={"example.com/fpga": 1},
        ),
        port_map={"c10d": 29500, "tensorboard": 6006},
        mounts=parse_mounts(
            [
                "type=bind,src=/tmp,dst=/host-tmp,readonly",
                "type=volume,src=datasets,dst=/data",
                "type=device,src=/dev/null,dst=/dev/mine",
            ]
        ),
    )
    reader = Role(
        "reader",
        image,
        entrypoint="cat",
        args=["/data/x"],
        resource=Resource(cpu=1, gpu=0, memMB=512),
    )
    return AppDef("Kitchen Sink", [trainer, reader])


def containers(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job["spec"]["template"]["spec"]["containers"])


# --- offline ---------------------------------------------------------------------------------


def test_dryrun_needs_no_cluster_and_prints_yaml_with_secrets_masked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    info = create_scheduler("offline").submit_dryrun(kitchen_sink(), {"namespace": "ml"})
    request = info.request
    name = request.name
    assert request.app_id == f"ml:{name}" and name.startswith("kitchen-sink-")

    text = str(info)
    docs = list(yaml.safe_load_all(text))
    # the rank-0 Job first: it carries the app record, so the app exists from the first write
    assert [d["kind"] for d in docs] == ["Job", "Service", "Job", "Job"]
    assert "s3cr3t" not in text and "'***'" in text
    record = json.loads(docs[0]["metadata"]["annotations"]["anylaunch.io/record"])
    assert record["roles"][0]["env"]["API_TOKEN"] == "***"
    assert [
        d for d in docs[1:] if "anylaunch.io/record" in d["metadata"].get("annotations", {})
    ] == []
    # printing masks a copy: the request still carries the real value
    env0 = {e["name"]: e for e in containers(request.objects[0])[0]["env"]}
    assert env0["API_TOKEN"]["value"] == "s3cr3t"

    job0, job1, reader = docs[0], docs[2], docs[3]
    assert [j["metadata"]["name"] for j in (job0, job1, reader)] == [
        f"{name}-trainer-1-0",
        f"{name}-trainer-1-1",
        f"{name}-reader-0",
    ]
    assert job0["spec"]["backoffLimit"] == 2
    c0, c1 = containers(job0)[0], containers(job1)[0]
    # every "$" doubled: the kubelet turns "$$" back into "$" (and leaves "$(X)" alone)
    assert c1["command"] == ["sh", "-c", f"echo 1 of ml:{name}; echo $$ANYLAUNCH_RANK0_HOST"]
    assert c0["resources"] == {
        "limits": {
            "cpu": "2000m",
            "memory": "4096Mi",
            "nvidia.com/gpu": "1",
            "example.com/fpga": "1",
        },
        "requests": {
            "cpu": "1900m",
            "memory": "3072Mi",
            "nvidia.com/gpu": "1",
            "example.com/fpga": "1",
        },
    }
    env0 = {e["name"]: e for e in c0["env"]}
    env1 = {e["name"]: e for e in c1["env"]}
    # rank 0 finds itself through the downward API; the others through the headless Service
    assert env0["ANYLAUNCH_RANK0_HOST"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env1["ANYLAUNCH_RANK0_HOST"]["value"] == f"trainer-1-0.{name}"
    assert env1["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env1["CPU_LIMIT"]["valueFrom"]["resourceFieldRef"] == {
        "containerName": "trainer-1",
        "resource": "limits.cpu",
    }
    assert env1["RUN"]["value"] == f"ml:{name}"  # macros.app_id is the full app id
    pod1 = job1["spec"]["template"]["spec"]
    assert (pod1["hostname"], pod1["subdomain"]) == ("trainer-1-1", name)
    assert pod1["nodeSelector"] == {ITYPE: "p4d.24xlarge"}
    volumes = {v["name"]: v for v in pod1["volumes"]}
    assert volumes["dshm"] == {"name": "dshm", "emptyDir": {"medium": "Memory"}}
    assert volumes["mount-0"]["hostPath"] == {"path": "/tmp"}
    assert volumes["mount-1"]["persistentVolumeClaim"] == {
        "claimName": "datasets",
        "readOnly": False,
    }
    assert volumes["mount-2"]["hostPath"] == {"path": "/dev/null"}
    mounts = {m["mountPath"]: m for m in c1["volumeMounts"]}
    assert set(mounts) == {"/dev/shm", "/host-tmp", "/data", "/dev/mine"}
    assert mounts["/host-tmp"]["readOnly"] is True
    assert c1["securityContext"] == {"privileged": True}  # device mounts need it
    assert c1["ports"] == [
        {"name": "c10d", "containerPort": 29500},
        {"name": "tensorboard", "containerPort": 6006},
    ]
    assert "securityContext" not in containers(reader)[0]
    service = docs[1]["spec"]
    assert service["clusterIP"] == "None" and service["publishNotReadyAddresses"] is True
    assert {p["port"] for p in service["ports"]} == {29500, 6006}


def test_dryrun_with_validate_spec_needs_a_cluster(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubernetesSchedulerError, match="KUBECONFIG"):
        create_scheduler("offline").submit_dryrun(kitchen_sink(), {"validate_spec": True})


@pytest.mark.parametrize(
    ("cfg", "field"),
    [
        ({"namespace": "Not_Valid"}, "namespace"),
        ({"mode": "slurm"}, "mode"),
        ({"queue": "q"}, "queue"),
        ({"mode": "volcano", "rank0_host": "pod_ip"}, "rank0_host"),
        ({"rank0_host": "carrier-pigeon"}, "rank0_host"),
        ({"image_pull_policy": "Sometimes"}, "image_pull_policy"),
        ({"reserved_memmb": -1}, "reserved_memmb"),
        ({"namespac": "x"}, "namespac"),
    ],
)
def test_bad_run_options_name_the_option(cfg: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        create_scheduler("offline").submit_dryrun(kitchen_sink(), cfg)
    assert field in str(e.value)


def test_blocklisted_overlay_fields_are_refused_before_any_api_call() -> None:
    app = kitchen_sink()
    set_overlay(
        app.roles[0],
        "kubernetes",
        "V1Pod",
        {"spec": {JOIN("containers", on="name"): [{"name": "trainer-1", "image": "evil"}]}},
    )
    with pytest.raises(InvalidOverlayError, match="image"):
        create_scheduler("offline").submit_dryrun(app, {})
    job_level = kitchen_sink()
    set_overlay(job_level, "kubernetes", "V1Job", {"spec": {"template": {"spec": {}}}})
    with pytest.raises(InvalidOverlayError, match="template"):
        create_scheduler("offline").submit_dryrun(job_level, {})


@pytest.mark.parametrize(
    ("kind", "overlay", "field"),
    [
        ("V1Pod", {"metadata": {"labels": {"anylaunch.io/app-id": "x"}}}, "anylaunch.io/app-id"),
        ("V1Job", {"metadata": {"labels": {"anylaunch.io/role": "x"}}}, "anylaunch.io/role"),
        (
            "V1Job",
            {"metadata": {"annotations": {"anylaunch.io/cancelled": "yes"}}},
            "anylaunch.io/cancelled",
        ),
        (
            "V1Pod",
            {"metadata": {"labels": {"app.kubernetes.io/managed-by": "me"}}},
            "app.kubernetes.io/managed-by",
        ),
        (
            "V1Pod",
            {
                "spec": {
                    JOIN("containers", on="name"): [
                        {"name": "trainer-1", "resources": {"limits": {"cpu": "64"}}}
                    ]
                }
            },
            "resources",
        ),
    ],
    ids=["pod-app-id", "job-role", "job-cancelled-mark", "managed-by", "role-resources"],
)
def test_overlays_cannot_touch_what_anylaunch_owns(
    kind: str, overlay: dict[str, Any], field: str
) -> None:
    app = kitchen_sink()
    set_overlay(app.roles[0], "kubernetes", kind, overlay)
    with pytest.raises(InvalidOverlayError) as raised:
        create_scheduler("offline").submit_dryrun(app, {})
    assert field in str(raised.value)


def test_overlays_apply_app_level_then_role_level_per_replica() -> None:
    app = kitchen_sink()
    set_overlay(
        app, "kubernetes", "V1Pod", {"spec": {"tolerations": [{"key": "a", "operator": "Exists"}]}}
    )
    set_overlay(
        app.roles[0],
        "kubernetes",
        "V1Pod",
        {
            "metadata": {"annotations": {"replica": "${replica_id}"}},
            "spec": {"tolerations": [{"key": "b", "operator": "Exists"}]},
        },
    )
    set_overlay(app.roles[0], "kubernetes", "V1Job", {"spec": {"activeDeadlineSeconds": 600}})
    objects = create_scheduler("offline").submit_dryrun(app, {}).request.objects
    jobs = [o for o in objects if o["kind"] == "Job"]
    assert [j["spec"]["template"]["metadata"]["annotations"]["replica"] for j in jobs[:2]] == [
        "0",
        "1",
    ]
    assert [t["key"] for t in jobs[0]["spec"]["template"]["spec"]["tolerations"]] == ["a", "b"]
    assert [t["key"] for t in jobs[2]["spec"]["template"]["spec"]["tolerations"]] == ["a"]
    assert [j["spec"].get("activeDeadlineSeconds") for j in jobs] == [600, 600, None]


def test_a_lone_pod_gets_no_service_and_reads_its_own_ip() -> None:
    """One replica in all: no headless Service (nobody to find by name), rank 0's address
    from the downward API; two replicas: the Service, and rank 1 finds rank 0 by name."""
    one = AppDef("lone", [Role("main", "busybox", entrypoint="true")])
    request = create_scheduler("offline").submit_dryrun(one, {}).request
    assert [o["kind"] for o in request.objects] == ["Job"]
    assert not request.rank0_pod_ip
    (env,) = [
        e for e in containers(request.objects[0])[0]["env"] if e["name"] == "ANYLAUNCH_RANK0_HOST"
    ]
    assert env["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"

    two = AppDef("pair", [Role("main", "busybox", entrypoint="true", num_replicas=2)])
    objects = create_scheduler("offline").submit_dryrun(two, {}).request.objects
    assert [o["kind"] for o in objects] == ["Job", "Service", "Job"]
    rank1_env = {e["name"]: e for e in containers(objects[2])[0]["env"]}
    assert rank1_env["ANYLAUNCH_RANK0_HOST"]["value"].endswith(f".{objects[1]['metadata']['name']}")


# --- against the API server ------------------------------------------------------------------


@pytest.fixture
def service_account(kube_client: KubeClient, kube_namespace: str) -> str:
    name = "anylaunch-runner"
    if kube_client.get("v1", "ServiceAccount", kube_namespace, name) is None:
        kube_client.request(
            "POST",
            f"/api/v1/namespaces/{kube_namespace}/serviceaccounts",
            body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        )
    return name


@pytest.fixture
def priority_class(kube_client: KubeClient) -> Any:
    name = f"anylaunch-test-{int(time.time() * 1000) % 10**9}"
    path = "/apis/scheduling.k8s.io/v1/priorityclasses"
    kube_client.request(
        "POST",
        path,
        body={
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": 1000,
        },
    )
    yield name
    kube_client.request("DELETE", f"{path}/{name}")


def test_every_rendered_object_is_valid_for_the_api_server(
    k8s: KubernetesScheduler,
    kube_client: KubeClient,
    kube_namespace: str,
    service_account: str,
    priority_class: str,
) -> None:
    cfg = {
        "namespace": kube_namespace,
        "service_account": service_account,
        "priority_class": priority_class,
        "validate_spec": True,
    }
    for mode in ("jobs", "volcano"):
        # validate_spec: the server dry-runs every object, Volcano task pods as Pods
        request = k8s.submit_dryrun(kitchen_sink(), {**cfg, "mode": mode}).request
        for obj in request.objects:
            echoed = kube_client.create(obj, kube_namespace, dry_run=True)
            assert echoed["metadata"]["name"] == obj["metadata"]["name"]
        if mode == "jobs":
            job = kube_client.create(request.objects[0], kube_namespace, dry_run=True)
            pod = job["spec"]["template"]["spec"]
            # the server parsed and normalized what was sent (quantities, defaults)
            assert pod["containers"][0]["resources"]["limits"] == {
                "cpu": "2",
                "memory": "4Gi",
                "nvidia.com/gpu": "1",
                "example.com/fpga": "1",
            }
            assert pod["serviceAccountName"] == service_account
            assert pod["priorityClassName"] == priority_class
        else:
            assert len(request.embedded_objects) == 3
            for pod in request.embedded_objects:
                echoed = kube_client.create(pod, kube_namespace, dry_run=True)
                assert echoed["kind"] == "Pod"
                # pod admission ran: the priority class resolved to its value
                assert echoed["spec"]["priority"] == 1000
    # pod_ip mode: the placeholder rank-0 host is a plain string the server accepts
    k8s.submit_dryrun(kitchen_sink(), {**cfg, "rank0_host": "pod_ip"})


def test_a_missing_service_account_is_reported_by_the_server(
    k8s: KubernetesScheduler, kube_namespace: str
) -> None:
    request = k8s.submit_dryrun(
        kitchen_sink(),
        {"namespace": kube_namespace, "mode": "volcano", "service_account": "nobody"},
    ).request
    # the ServiceAccount admission plugin refuses the pods (403), quoted as the server said it
    with pytest.raises(KubernetesApiError, match='serviceaccount "nobody" not found'):
        k8s.validate_request(request)


def _app_objects(client: KubeClient, namespace: str, name: str) -> dict[str, int]:
    selector = f"anylaunch.io/app-id={name}"
    return {
        kind: len(client.list(api, kind, namespace, selector))
        for api, kind in (("v1", "ConfigMap"), ("v1", "Service"), ("batch/v1", "Job"))
    }


@pytest.mark.parametrize(
    ("kind", "overlay", "server_says"),
    [
        ("V1Pod", {"spec": {"dnsPolicy": "Sometimes"}}, 'Unsupported value: "Sometimes"'),
        ("V1Job", {"spec": {"backoffLimit": -1}}, "must be greater than or equal to 0"),
        ("V1Pod", {"spec": {"hostname": "Not A Hostname"}}, "spec.template.spec.hostname"),
    ],
)
def test_an_invalid_overlay_is_rejected_with_the_servers_message_and_nothing_is_created(
    k8s: KubernetesScheduler,
    kube_client: KubeClient,
    kube_namespace: str,
    kind: str,
    overlay: dict[str, Any],
    server_says: str,
) -> None:
    app = AppDef("bad", [Role("w", "busybox", entrypoint="true", resource=Resource(1, 0, 128))])
    set_overlay(app.roles[0], "kubernetes", kind, overlay)
    info = k8s.submit_dryrun(app, {"namespace": kube_namespace})  # offline: nothing checked yet
    with pytest.raises(KubernetesValidationError) as e:
        k8s.schedule(info)
    assert server_says in str(e.value)
    assert str(e.value).startswith(f"Job {info.request.name}-w-0=")
    assert _app_objects(kube_client, kube_namespace, info.request.name) == {
        "ConfigMap": 0,
        "Service": 0,
        "Job": 0,
    }


def test_an_allowed_overlay_reaches_the_api_server_and_the_app_is_still_tracked(
    k8s: KubernetesScheduler, kube_client: KubeClient, kube_namespace: str
) -> None:
    app = AppDef("ovl", [Role("w", "busybox", entrypoint="true", resource=Resource(1, 0, 128))])
    set_overlay(
        app.roles[0],
        "kubernetes",
        "V1Pod",
        {
            "metadata": {"labels": {"team": "ml"}},
            "spec": {
                JOIN("containers", on="name"): [
                    {"name": "sidecar", "image": "busybox", "command": ["true"]}
                ]
            },
        },
    )
    info = k8s.submit_dryrun(app, {"namespace": kube_namespace})
    app_id = k8s.schedule(info)
    job = kube_client.get("batch/v1", "Job", kube_namespace, f"{info.request.name}-w-0")
    assert job is not None
    template = job["spec"]["template"]
    assert template["metadata"]["labels"]["team"] == "ml"
    assert template["metadata"]["labels"]["anylaunch.io/app-id"] == info.request.name
    assert [c["name"] for c in template["spec"]["containers"]] == ["w", "sidecar"]
    assert k8s.describe(app_id) is not None  # still found through its own labels


def test_an_invalid_volcano_overlay_is_rejected_by_the_crd_schema(
    k8s: KubernetesScheduler, kube_namespace: str
) -> None:
    app = kitchen_sink()
    set_overlay(app, "kubernetes", "VolcanoJob", {"spec": {"policies": [{"event": "Sometimes"}]}})
    info = k8s.submit_dryrun(app, {"namespace": kube_namespace, "mode": "volcano"})
    with pytest.raises(KubernetesValidationError, match='Unsupported value: "Sometimes"'):
        k8s.schedule(info)


def unschedulable_app(replicas: int = 2) -> AppDef:
    """An app no node can run (its instance type exists nowhere): it stays Pending."""
    resource = Resource(cpu=1, gpu=0, memMB=128, capabilities={ITYPE: NOWHERE})
    return AppDef(
        "stuck",
        [
            Role(
                "trainer",
                "busybox",
                entrypoint="sleep",
                args=["600"],
                num_replicas=replicas,
                resource=resource,
            ),
            Role("ps", "busybox", entrypoint="sleep", args=["600"], resource=resource),
        ],
    )


def test_lifecycle_submit_describe_list_cancel_delete(
    k8s: KubernetesScheduler, kube_client: KubeClient, kube_namespace: str, session_name: str
) -> None:
    app = unschedulable_app()
    cfg = {"namespace": kube_namespace}
    app_id = k8s.submit(app, cfg)
    name = app_id.split(":", 1)[1]
    # the record is on the rank-0 Job: no ConfigMap until a cancel needs one
    assert _app_objects(kube_client, kube_namespace, name) == {
        "ConfigMap": 0,
        "Service": 1,
        "Job": 3,
    }

    def pending_with_reason() -> Any:
        desc = k8s.describe(app_id)
        assert desc is not None
        reps = [r for rs in desc.roles_statuses for r in rs.replicas]
        if desc.state == AppState.PENDING and all(
            "Unschedulable" in r.structured_error_msg for r in reps
        ):
            return desc
        return None

    # the Job controller makes the pods, kube-scheduler finds no node for them
    desc = wait_for(pending_with_reason, 60, "the pods to be reported unschedulable")
    assert "Unschedulable" in desc.msg and "didn't match" in desc.msg
    assert [(rs.role, [r.id for r in rs.replicas]) for rs in desc.roles_statuses] == [
        ("trainer", [0, 1]),
        ("ps", [0]),
    ]
    assert [r.hostname.startswith(f"{name}-trainer-") for r in desc.roles_statuses[0].replicas] == [
        True,
        True,
    ]
    assert [(r.name, r.num_replicas, r.args, r.resource.capabilities) for r in desc.roles] == [
        (role.name, role.num_replicas, role.args, role.resource.capabilities) for role in app.roles
    ]
    assert desc.metadata["namespace"] == kube_namespace

    listed = {a.app_id: a for a in k8s.list(cfg)}
    assert listed[app_id].state == AppState.PENDING
    assert listed[app_id].app_handle == f"kubernetes://{session_name}/{app_id}"
    assert listed[app_id].name == "stuck"

    k8s.cancel(app_id)
    desc = k8s.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED
    assert all(r.state == AppState.CANCELLED for rs in desc.roles_statuses for r in rs.replicas)
    # the workload is deleted; the record stays so the app still describes as CANCELLED
    objects = _app_objects(kube_client, kube_namespace, name)
    assert objects == {"ConfigMap": 1, "Service": 0, "Job": 0}
    k8s.cancel(app_id)  # idempotent
    assert {a.app_id: a.state for a in k8s.list(cfg)}[app_id] == AppState.CANCELLED

    k8s.delete(app_id)
    assert k8s.describe(app_id) is None
    assert app_id not in {a.app_id for a in k8s.list(cfg)}
    assert _app_objects(kube_client, kube_namespace, name) == {
        "ConfigMap": 0,
        "Service": 0,
        "Job": 0,
    }
    k8s.delete(app_id)  # a no-op now
    assert k8s.describe(f"{kube_namespace}:no-such-app") is None
    assert k8s.describe("not an app id") is None


def test_describe_takes_three_list_calls_whatever_the_replica_or_app_count(
    k8s: KubernetesScheduler, counting_client: CountingClient, kube_namespace: str
) -> None:
    cfg = {"namespace": kube_namespace}
    app_ids = [k8s.submit(unschedulable_app(replicas=4), cfg) for _ in range(3)]
    counting_client.calls.clear()
    desc = k8s.describe(app_ids[0])
    assert desc is not None and sum(len(rs.replicas) for rs in desc.roles_statuses) == 5
    assert len(counting_client.calls) == 3
    assert all(call.startswith("GET ") for call in counting_client.calls)
    counting_client.calls.clear()
    many = k8s.describe_many([*app_ids, f"{kube_namespace}:gone-app"])
    assert len(counting_client.calls) == 3
    assert [many[a] is not None for a in app_ids] == [True, True, True]
    assert many[f"{kube_namespace}:gone-app"] is None
    counting_client.calls.clear()
    assert {a.app_id for a in k8s.list(cfg)} >= set(app_ids)
    assert len(counting_client.calls) == 3


def test_a_plain_app_is_created_without_a_dry_run_and_a_volcano_one_with(
    k8s: KubernetesScheduler, counting_client: CountingClient, kube_namespace: str
) -> None:
    # a rejected create rolls the others back (see the invalid-overlay test): the dry run
    # only pays where the server would not check everything at creation
    cfg = {"namespace": kube_namespace}
    counting_client.calls.clear()
    k8s.submit(unschedulable_app(replicas=1), cfg)
    # one write per Job (the record rides on the rank-0 one, written first), a Service for
    # the two replicas, nothing else
    posts = [c for c in counting_client.calls if not c.startswith("GET ")]
    jobs = f"POST /apis/batch/v1/namespaces/{kube_namespace}/jobs"
    services = f"POST /api/v1/namespaces/{kube_namespace}/services"
    assert posts == [jobs, services, jobs], posts

    counting_client.calls.clear()  # the pods of a Volcano job: its CRD does not check them
    k8s.submit(kitchen_sink(), {**cfg, "mode": "volcano"})
    dry_runs = [c for c in counting_client.calls if c.endswith("(dry run)")]
    assert dry_runs, counting_client.calls


def _patch_status(client: KubeClient, namespace: str, name: str, status: dict[str, Any]) -> None:
    client.request(
        "PATCH",
        f"/apis/{VOLCANO_API_VERSION}/namespaces/{namespace}/jobs/{name}/status",
        body={"status": status},
        content_type="application/merge-patch+json",
    )


def test_volcano_mode_renders_a_volcano_job_and_follows_its_status(
    k8s: KubernetesScheduler, kube_client: KubeClient, kube_namespace: str
) -> None:
    cfg = {
        "namespace": kube_namespace,
        "mode": "volcano",
        "queue": "research",
        "validate_spec": True,
    }
    info = k8s.submit_dryrun(kitchen_sink(), cfg)
    name = info.request.name
    vcjob = info.request.objects[1]
    spec = vcjob["spec"]
    assert (vcjob["apiVersion"], vcjob["kind"]) == (VOLCANO_API_VERSION, "Job")
    assert (spec["schedulerName"], spec["queue"], spec["minAvailable"], spec["maxRetry"]) == (
        "volcano",
        "research",
        3,
        2,
    )
    assert [t["name"] for t in spec["tasks"]] == ["trainer-1-0", "trainer-1-1", "reader-0"]
    # REPLICA retries restart the task; the default (APPLICATION) restarts the job
    assert {p["action"] for p in spec["tasks"][0]["policies"]} == {"RestartTask"}
    assert {p["action"] for p in spec["tasks"][2]["policies"]} == {"RestartJob"}
    env1 = {e["name"]: e for e in spec["tasks"][1]["template"]["spec"]["containers"][0]["env"]}
    assert env1["ANYLAUNCH_RANK0_HOST"]["value"] == f"{name}-trainer-1-0-0.{name}"

    app_id = k8s.schedule(info)
    desc = k8s.describe(app_id)
    assert desc is not None and desc.state == AppState.SUBMITTED  # no Volcano controller here
    # play Volcano's controller: its status drives the app's
    _patch_status(
        kube_client, kube_namespace, name, {"state": {"phase": "Running"}, "retryCount": 1}
    )
    desc = k8s.describe(app_id)
    assert desc is not None and (desc.state, desc.num_restarts) == (AppState.RUNNING, 1)
    _patch_status(
        kube_client,
        kube_namespace,
        name,
        {"state": {"phase": "Pending", "message": "queue research is full"}},
    )
    desc = k8s.describe(app_id)
    assert (
        desc is not None and desc.state == AppState.PENDING and desc.msg == "queue research is full"
    )

    k8s.cancel(app_id)
    desc = k8s.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED
    assert kube_client.get(VOLCANO_API_VERSION, "Job", kube_namespace, name) is None
    k8s.delete(app_id)
    assert k8s.describe(app_id) is None


def test_volcano_completion_and_failure(
    k8s: KubernetesScheduler, kube_client: KubeClient, kube_namespace: str
) -> None:
    cfg = {"namespace": kube_namespace, "mode": "volcano"}
    for phase, state in (("Completed", AppState.SUCCEEDED), ("Failed", AppState.FAILED)):
        app_id = k8s.submit(kitchen_sink(), cfg)
        _patch_status(
            kube_client, kube_namespace, app_id.split(":")[1], {"state": {"phase": phase}}
        )
        desc = k8s.describe(app_id)
        assert desc is not None and desc.state == state
        k8s.cancel(app_id)  # terminal: a no-op
        desc = k8s.describe(app_id)
        assert desc is not None and desc.state == state


@pytest.mark.parametrize(
    ("cfg", "field"),
    [
        ({"service_account": "Bad Account"}, "service_account"),
        ({"priority_class": "UPPER_case"}, "priority_class"),
    ],
)
def test_names_no_cluster_accepts_are_rejected_at_dryrun(cfg: dict[str, Any], field: str) -> None:
    from anylaunch.runner import get_runner
    from anylaunch.specs import AppDef, Resource, Role

    app = AppDef("x", [Role("w", "busybox:latest", entrypoint="true", resource=Resource(1, 0, 64))])
    with get_runner() as runner, pytest.raises(InvalidSpecError) as err:
        runner.dryrun(app, "kubernetes", cfg)
    assert err.value.field == field


@pytest.mark.parametrize("scheduler", ["kubernetes", "kubernetes_mcad", "aws_batch"])
@pytest.mark.parametrize("image", ["", ".", "/some/dir"])
def test_a_directory_or_empty_image_is_rejected_where_containers_run(
    scheduler: str, image: str
) -> None:
    from anylaunch.runner import get_runner
    from anylaunch.specs import AppDef, Resource, Role

    app = AppDef("x", [Role("w", image, entrypoint="true", resource=Resource(1, 0, 64))])
    cfg = {"queue": "q"} if scheduler == "aws_batch" else {}
    with get_runner() as runner, pytest.raises(InvalidSpecError) as err:
        runner.dryrun(app, scheduler, cfg)
    assert err.value.field == "Role[w].image"


def test_a_claim_name_that_is_no_object_name_is_rejected() -> None:
    from anylaunch.runner import get_runner
    from anylaunch.specs import AppDef, Resource, Role, VolumeMount

    role = Role(
        "w",
        "busybox:latest",
        entrypoint="true",
        resource=Resource(1, 0, 64),
        mounts=[VolumeMount(src="Bad_Claim", dst_path="/data")],
    )
    with get_runner() as runner, pytest.raises(InvalidSpecError, match="PersistentVolumeClaim"):
        runner.dryrun(AppDef("x", [role]), "kubernetes", {})
