"""The kubernetes_mcad scheduler against the real kube-apiserver with the MCAD AppWrapper and
scheduler-plugins PodGroup CRDs installed (scripts/provision/30-kubernetes.sh): the wrapper and
every wrapped object validated by the server, overlays rejected with the server's message, and
the lifecycle driven by the AppWrapper status (MCAD's controller is played by patching it)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from anylaunch.schedulers.kubernetes.client import KubeClient, KubernetesValidationError
from anylaunch.schedulers.kubernetes.mcad import MCAD_API_VERSION, PODGROUP_API_VERSION
from anylaunch.schedulers.kubernetes_mcad_scheduler import KubernetesMCADScheduler, create_scheduler
from anylaunch.specs import AppDef, AppState, Resource, Role
from anylaunch.specs.overlays import InvalidOverlayError, set_overlay


def two_roles(max_retries: int = 0) -> AppDef:
    return AppDef(
        "wrapped",
        [
            Role(
                "trainer",
                "busybox:latest",
                entrypoint="sh",
                args=["-c", "echo ${replica_id}"],
                num_replicas=2,
                max_retries=max_retries,
                resource=Resource(cpu=2, gpu=1, memMB=2048),
                port_map={"c10d": 29500},
            ),
            Role(
                "ps",
                "busybox:latest",
                entrypoint="true",
                max_retries=max_retries,
                resource=Resource(1, 0, 256),
            ),
        ],
    )


def test_dryrun_is_offline_yaml(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    info = create_scheduler("offline").submit_dryrun(two_roles(), {"namespace": "ml"})
    docs = list(yaml.safe_load_all(str(info)))
    assert [(d["apiVersion"], d["kind"]) for d in docs] == [
        ("v1", "ConfigMap"),
        (MCAD_API_VERSION, "AppWrapper"),
    ]


def test_the_wrapper_and_every_wrapped_object_are_valid_for_the_api_server(
    mcad: KubernetesMCADScheduler, kube_client: KubeClient, kube_namespace: str
) -> None:
    cfg = {
        "namespace": kube_namespace,
        "coscheduler_name": "scheduler-plugins-scheduler",
        "priority": 5,
        "validate_spec": True,  # the server dry-runs the wrapper and each wrapped object
    }
    request = mcad.submit_dryrun(two_roles(max_retries=2), cfg).request
    name = request.name
    wrapper = request.objects[1]
    items = wrapper["spec"]["resources"]["GenericItems"]
    assert [i["generictemplate"]["kind"] for i in items] == [
        "PodGroup",
        "Pod",
        "Pod",
        "Pod",
        "Service",
    ]
    podgroup = items[0]["generictemplate"]
    assert podgroup["apiVersion"] == PODGROUP_API_VERSION and podgroup["spec"] == {"minMember": 3}
    pods = [i["generictemplate"] for i in items[1:4]]
    assert [p["metadata"]["name"] for p in pods] == [
        f"{name}-trainer-0",
        f"{name}-trainer-1",
        f"{name}-ps-0",
    ]
    for item, pod in zip(items[1:4], pods, strict=True):
        assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
        assert pod["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] == name
        assert pod["metadata"]["labels"]["appwrapper.mcad.ibm.com"] == name
        resources = pod["spec"]["containers"][0]["resources"]
        assert item["custompodresources"] == [
            {"replicas": 1, "requests": resources["requests"], "limits": resources["limits"]}
        ]
    env1 = {e["name"]: e for e in pods[1]["spec"]["containers"][0]["env"]}
    assert env1["ANYLAUNCH_RANK0_HOST"]["value"] == f"trainer-0.{name}"
    assert (pods[1]["spec"]["hostname"], pods[1]["spec"]["subdomain"]) == ("trainer-1", name)
    service = items[4]["generictemplate"]
    assert service["spec"]["clusterIP"] == "None" and service["metadata"]["name"] == name
    spec = wrapper["spec"]
    assert spec["priority"] == 5
    assert spec["schedulingSpec"] == {"minAvailable": 3, "requeuing": {"maxNumRequeuings": 2}}

    echoed = kube_client.create(wrapper, kube_namespace, dry_run=True)
    # the CRD's structural schema defaulted the requeuing policy: the server really checked it
    assert echoed["spec"]["schedulingSpec"]["requeuing"] == {
        "maxNumRequeuings": 2,
        "timeInSeconds": 300,
        "maxTimeInSeconds": 0,
        "growthType": "exponential",
        "numRequeuings": 0,
    }
    echoed_pg = kube_client.create(podgroup, kube_namespace, dry_run=True)
    assert echoed_pg["spec"]["minMember"] == 3


@pytest.mark.parametrize(
    ("target", "kind", "overlay", "server_says"),
    [
        ("app", "AppWrapper", {"spec": {"priority": "high"}}, "spec.priority"),
        ("role", "V1Pod", {"spec": {"dnsPolicy": "Sometimes"}}, 'Unsupported value: "Sometimes"'),
    ],
)
def test_an_invalid_overlay_is_rejected_with_the_servers_message(
    mcad: KubernetesMCADScheduler,
    kube_client: KubeClient,
    kube_namespace: str,
    target: str,
    kind: str,
    overlay: dict[str, Any],
    server_says: str,
) -> None:
    app = two_roles()
    set_overlay(app if target == "app" else app.roles[1], "kubernetes_mcad", kind, overlay)
    info = mcad.submit_dryrun(app, {"namespace": kube_namespace})
    with pytest.raises(KubernetesValidationError) as e:
        mcad.schedule(info)
    assert server_says in str(e.value)
    selector = f"anylaunch.io/app-id={info.request.name}"
    assert kube_client.list("v1", "ConfigMap", kube_namespace, selector) == []
    assert kube_client.list(MCAD_API_VERSION, "AppWrapper", kube_namespace, selector) == []


def test_kubernetes_pod_overlays_apply_too_and_the_blocklist_holds() -> None:
    app = two_roles()
    set_overlay(app.roles[0], "kubernetes", "V1Pod", {"spec": {"nodeSelector": {"a": "1"}}})
    set_overlay(app.roles[0], "kubernetes_mcad", "V1Pod", {"spec": {"nodeSelector": {"b": "2"}}})
    items = create_scheduler("x").submit_dryrun(app, {}).request.objects[1]["spec"]["resources"]
    pod = items["GenericItems"][0]["generictemplate"]
    assert pod["spec"]["nodeSelector"] == {"a": "1", "b": "2"}
    set_overlay(app, "kubernetes_mcad", "AppWrapper", {"metadata": {"name": "other"}})
    with pytest.raises(InvalidOverlayError, match=r"metadata\.name"):
        create_scheduler("x").submit_dryrun(app, {})


def _set_state(client: KubeClient, namespace: str, name: str, status: dict[str, Any]) -> None:
    # MCAD's CRD has no status subresource: MCAD patches the object itself
    client.patch(MCAD_API_VERSION, "AppWrapper", namespace, name, {"status": status})


def test_lifecycle_follows_the_appwrapper_status(
    mcad: KubernetesMCADScheduler, kube_client: KubeClient, kube_namespace: str, session_name: str
) -> None:
    cfg = {"namespace": kube_namespace}
    app_id = mcad.submit(two_roles(), cfg)
    name = app_id.split(":", 1)[1]
    desc = mcad.describe(app_id)
    assert desc is not None and desc.state == AppState.SUBMITTED  # not yet seen by MCAD
    assert [(rs.role, len(rs.replicas)) for rs in desc.roles_statuses] == [
        ("trainer", 2),
        ("ps", 1),
    ]

    _set_state(
        kube_client, kube_namespace, name, {"state": "Pending", "message": "insufficient quota"}
    )
    desc = mcad.describe(app_id)
    assert desc is not None and (desc.state, desc.msg) == (AppState.PENDING, "insufficient quota")
    # (a non-empty message: this 1.20 build decodes "" in custom resources as null)
    _set_state(kube_client, kube_namespace, name, {"state": "Running", "message": "dispatched"})
    desc = mcad.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING
    listed = {a.app_id: a for a in mcad.list(cfg)}
    assert listed[app_id].state == AppState.RUNNING
    assert listed[app_id].app_handle == f"kubernetes_mcad://{session_name}/{app_id}"

    mcad.cancel(app_id)
    desc = mcad.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED
    assert kube_client.get(MCAD_API_VERSION, "AppWrapper", kube_namespace, name) is None
    mcad.delete(app_id)
    assert mcad.describe(app_id) is None
    assert app_id not in {a.app_id for a in mcad.list(cfg)}

    for state, expected in (("Completed", AppState.SUCCEEDED), ("Failed", AppState.FAILED)):
        app_id = mcad.submit(two_roles(), cfg)
        _set_state(kube_client, kube_namespace, app_id.split(":", 1)[1], {"state": state})
        desc = mcad.describe(app_id)
        assert desc is not None and desc.state == expected
