"""The kubernetes scheduler's capacity check against the real API server and node: an app
bigger than the node is refused naming the node and the numbers, a small one fits, a
ResourceQuota that forbids it is named, and the check only reads (three list calls, nothing
created). kubernetes_mcad has no signal."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from anylaunch.schedulers.common.capacity import CanRun
from anylaunch.schedulers.kubernetes.capacity import parse_quantity, pod_requests
from anylaunch.schedulers.kubernetes.client import KubeClient, KubernetesSchedulerError
from anylaunch.schedulers.kubernetes_mcad_scheduler import KubernetesMCADScheduler
from anylaunch.schedulers.kubernetes_scheduler import KubernetesScheduler
from anylaunch.specs import AppDef, ArraySpec, Resource, Role
from tests.schedulers.kubernetes.conftest import CountingClient
from tests.schedulers.kubernetes.kube_cluster import BUSYBOX

pytestmark = pytest.mark.usefixtures("kubelet")


def app(cpu: int, replicas: int = 1, mem: int = 256, **kwargs: Any) -> AppDef:
    role = Role(
        "w",
        BUSYBOX,
        entrypoint="true",
        num_replicas=replicas,
        resource=Resource(cpu=cpu, gpu=0, memMB=mem),
    )
    return AppDef("cap", [role], **kwargs)


def check(
    k8s: KubernetesScheduler, application: AppDef, namespace: str, reserved_millicpu: int = 100
) -> Any:
    """The check with the cfg resolved as the Runner resolves it; ``reserved_millicpu`` is
    taken off each pod's cpu request: small requests fit next to other tests' pods (each of
    those asks 900m of the node's 2 CPUs, so at least 200m stay free)."""
    cfg = {"namespace": namespace, "reserved_millicpu": reserved_millicpu}
    return k8s.check_capacity(application, k8s.run_opts().resolve(cfg))


def reads_only(client: CountingClient, calls: int) -> None:
    """The check made ``calls`` API calls, every one a GET (it created nothing)."""
    assert len(client.calls) == calls, client.calls
    assert all(call.startswith("GET ") for call in client.calls), client.calls


def test_an_app_bigger_than_the_node_is_no_naming_the_node_and_numbers(
    k8s: KubernetesScheduler, counting_client: CountingClient, kube_namespace: str, kubelet: str
) -> None:
    answer = check(k8s, app(cpu=64), kube_namespace)
    assert answer.can_run == CanRun.NO, answer
    # the pod's real request: 64 CPUs less the 100m reserved for the node's daemons
    assert "replica w/0 needs 63.9 CPU" in answer.reason, answer.reason
    assert f"({kubelet})" in answer.reason, answer.reason
    assert answer.calls == 3
    reads_only(counting_client, 3)
    jobs = counting_client.request("GET", f"/apis/batch/v1/namespaces/{kube_namespace}/jobs")
    assert jobs["items"] == []


def test_a_small_app_fits(
    k8s: KubernetesScheduler, counting_client: CountingClient, kube_namespace: str, kubelet: str
) -> None:
    answer = check(k8s, app(cpu=1, replicas=2), kube_namespace, reserved_millicpu=950)
    assert answer.can_run == CanRun.YES, answer
    assert kubelet in answer.reason and "2 replica(s)" in answer.reason
    assert answer.calls == 3
    reads_only(counting_client, 3)


def test_an_array_asks_for_one_index(
    k8s: KubernetesScheduler, counting_client: CountingClient, kube_namespace: str
) -> None:
    # 100 indices of 50m could never run together on a 2-CPU node; one index can start
    application = app(cpu=1, array=ArraySpec(100))
    answer = check(k8s, application, kube_namespace, reserved_millicpu=950)
    assert answer.can_run == CanRun.YES, answer
    assert "1 replica(s)" in answer.reason
    # the server's version (whether arrays run as one Indexed Job) is asked once
    assert answer.calls == len(counting_client.calls) in (3, 4)


@pytest.fixture(scope="module")
def quota_namespace(kube_client: KubeClient) -> Iterator[str]:
    """A fresh namespace of this module's quotas (no pod runs in it), deleted after."""
    name = f"anylaunch-quota-{uuid.uuid4().hex[:8]}"
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    kube_client.request("POST", "/api/v1/namespaces", body=body)
    yield name
    with contextlib.suppress(KubernetesSchedulerError):
        kube_client.request("DELETE", f"/api/v1/namespaces/{name}")


@pytest.mark.parametrize(
    ("hard", "application", "said"),
    [
        ({"requests.cpu": "500m"}, app(cpu=1), "requests.cpu hard 500m, used 0, the app asks 900m"),
        ({"pods": "1"}, app(cpu=1, replicas=2), "pods hard 1, used 0, the app asks 2"),
        ({"count/jobs.batch": "1"}, app(cpu=1, replicas=2), "count/jobs.batch hard 1"),
    ],
)
def test_a_quota_that_forbids_the_app_is_no_naming_it(
    k8s: KubernetesScheduler,
    counting_client: CountingClient,
    kube_client: KubeClient,
    quota_namespace: str,
    hard: dict[str, str],
    application: AppDef,
    said: str,
) -> None:
    name = f"tight-{uuid.uuid4().hex[:6]}"
    path = f"/api/v1/namespaces/{quota_namespace}/resourcequotas"
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}}
    kube_client.request("POST", path, body={**quota, "spec": {"hard": hard}})
    try:
        answer = check(k8s, application, quota_namespace)
    finally:
        kube_client.request("DELETE", f"{path}/{name}")
    assert answer.can_run == CanRun.NO, answer
    assert f"ResourceQuota {name} refuses the app: {said}" in answer.reason, answer.reason
    assert answer.calls == 1  # the quota decided: nodes and pods were not read
    reads_only(counting_client, 1)


def test_a_quota_with_room_lets_the_node_decide(
    k8s: KubernetesScheduler,
    counting_client: CountingClient,
    kube_client: KubeClient,
    quota_namespace: str,
) -> None:
    path = f"/api/v1/namespaces/{quota_namespace}/resourcequotas"
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "roomy"}}
    kube_client.request("POST", path, body={**quota, "spec": {"hard": {"requests.cpu": "64"}}})
    try:
        answer = check(k8s, app(cpu=1), quota_namespace, reserved_millicpu=950)
    finally:
        kube_client.request("DELETE", f"{path}/roomy")
    assert answer.can_run == CanRun.YES, answer
    reads_only(counting_client, 3)


def test_quantities_and_requests_read_as_the_kube_scheduler_counts() -> None:
    assert parse_quantity("100m") * 10 == 1
    assert parse_quantity("24581692Ki") == 24581692 * 1024
    assert parse_quantity("1.5G") == 1_500_000_000
    with pytest.raises(KubernetesSchedulerError, match="not a Kubernetes resource quantity"):
        parse_quantity("lots")
    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            {"resources": {"limits": {"nvidia.com/gpu": "1"}}},  # request defaults to limit
        ],
        "initContainers": [{"resources": {"requests": {"cpu": "3"}}}],
        "overhead": {"memory": "128Mi"},
    }
    assert pod_requests(spec) == {
        "cpu": 3,
        "memory": (1024 + 128) * 2**20,
        "nvidia.com/gpu": 1,
    }


def test_mcad_has_no_signal() -> None:
    answer = KubernetesMCADScheduler("t").check_capacity(app(cpu=1), {})
    assert answer.can_run == CanRun.UNKNOWN
    assert "MCAD" in answer.reason and answer.calls == 0
