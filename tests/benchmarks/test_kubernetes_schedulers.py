"""Benchmarks of the Kubernetes schedulers: dryrun of a 250-replica app (offline), describing
many apps on the real API server in three calls, and an app's submit-to-SUCCEEDED latency on
the provisioned kubelet. Numbers go to ``benchmark.extra_info`` and are printed; nothing is
asserted on time. Run with `pytest tests/benchmarks/test_kubernetes_schedulers.py
--benchmark-enable`."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from typing import Any

from pytest_benchmark.fixture import BenchmarkFixture

from anylaunch.schedulers.kubernetes.client import KubeClient
from anylaunch.schedulers.kubernetes_mcad_scheduler import KubernetesMCADScheduler
from anylaunch.schedulers.kubernetes_scheduler import KubernetesScheduler
from anylaunch.specs import AppDef, AppState, Resource, Role
from tests.schedulers.kubernetes import kube_cluster
from tests.schedulers.kubernetes.conftest import CountingClient

# the cluster fixtures, used here as in tests/schedulers/kubernetes
kube_client = kube_cluster.kube_client
kube_namespace = kube_cluster.kube_namespace
kubelet = kube_cluster.kubelet

BIG_APP = AppDef(
    "big",
    [
        Role(
            f"role{i}",
            "img",
            entrypoint="sh",
            args=["-c", "echo ${replica_id} $${${rank0_env}}"],
            num_replicas=50,
            resource=Resource(4, 1, 8192),
        )
        for i in range(5)
    ],
)

COLD_DRYRUN = """
import time
t0 = time.perf_counter()
from anylaunch.schedulers.kubernetes_scheduler import create_scheduler
from anylaunch.specs import AppDef, Resource, Role
app = AppDef("x", [Role("r", "img", entrypoint="echo", num_replicas=2, resource=Resource(1, 0, 64))])
str(create_scheduler("s").submit_dryrun(app, {}))
print((time.perf_counter() - t0) * 1000)
"""


def test_dryrun_of_a_250_replica_app(benchmark: BenchmarkFixture) -> None:
    scheduler = KubernetesScheduler("bench")
    info = benchmark(scheduler.submit_dryrun, BIG_APP, {})
    # the service and 250 Jobs (the record rides on the first Job)
    assert [o["kind"] for o in info.request.objects[:2]] == ["Job", "Service"]
    assert len(info.request.objects) == 251
    mcad = benchmark.extra_info["mcad_dryrun_ms"] = _ms(
        lambda: KubernetesMCADScheduler("bench").submit_dryrun(BIG_APP, {})
    )
    start = time.perf_counter()
    text = str(info)
    benchmark.extra_info["yaml_ms"] = (time.perf_counter() - start) * 1000
    cold = subprocess.run(
        [sys.executable, "-c", COLD_DRYRUN], check=True, capture_output=True, text=True
    )
    benchmark.extra_info["cold_import_and_first_dryrun_ms"] = float(cold.stdout.strip())
    print(
        f"\nmcad dryrun: {mcad:.1f} ms; YAML of 251 objects ({len(text)} chars): "
        f"{benchmark.extra_info['yaml_ms']:.1f} ms; cold import + first dryrun: "
        f"{float(cold.stdout.strip()):.1f} ms"
    )


def _ms(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def test_describe_many_apps_in_three_calls(
    benchmark: BenchmarkFixture, kube_client: KubeClient, kube_namespace: str
) -> None:
    client = CountingClient(kube_client.api_client)
    scheduler = KubernetesScheduler(f"bench-{uuid.uuid4().hex[:6]}", client=client)
    nowhere = {"node.kubernetes.io/instance-type": "anylaunch-bench-nowhere"}  # stays Pending
    app = AppDef(
        "bench-describe",
        [
            Role(
                "r",
                "busybox",
                entrypoint="true",
                num_replicas=2,
                resource=Resource(1, 0, 64, capabilities=nowhere),
            )
        ],
    )
    cfg = {"namespace": kube_namespace}
    start = time.perf_counter()
    app_ids = [scheduler.submit(app, cfg) for _ in range(20)]
    submit_ms = (time.perf_counter() - start) * 1000 / len(app_ids)
    try:
        described = benchmark(scheduler.describe_many, app_ids)
        assert all(described[a] is not None for a in app_ids)
        client.calls.clear()
        scheduler.describe_many(app_ids)
        calls_per_round = len(client.calls)
        single_ms = _ms(lambda: scheduler.describe(app_ids[0]))
        benchmark.extra_info.update(
            apps=len(app_ids),
            calls_per_describe_many=calls_per_round,
            single_describe_ms=single_ms,
            submit_ms_per_app=submit_ms,
        )
        print(
            f"\n{len(app_ids)} apps described in {calls_per_round:g} calls; one describe "
            f"{single_ms:.1f} ms; submit {submit_ms:.1f} ms per app (validate + create)"
        )
        assert calls_per_round == 3
    finally:
        for app_id in app_ids:
            scheduler.delete(app_id)


def test_submit_to_succeeded_on_the_kubelet(
    benchmark: BenchmarkFixture, kubelet: str, kube_client: KubeClient, kube_namespace: str
) -> None:
    scheduler = KubernetesScheduler(f"bench-{uuid.uuid4().hex[:6]}", client=kube_client)
    app = AppDef(
        "bench-run",
        [
            Role(
                "r",
                kube_cluster.BUSYBOX,
                entrypoint="echo",
                args=["done"],
                resource=Resource(0, 0, 64),
            )
        ],
    )
    app_ids: list[str] = []

    def run_once() -> float:
        start = time.perf_counter()
        app_id = scheduler.submit(app, {"namespace": kube_namespace})
        app_ids.append(app_id)
        while True:
            desc = scheduler.describe(app_id)
            assert desc is not None
            if desc.state.is_terminal():
                assert desc.state == AppState.SUCCEEDED, desc
                return time.perf_counter() - start
            if time.perf_counter() - start > 120:
                raise TimeoutError(f"{app_id} did not finish in 120 s")
            time.sleep(0.1)

    try:
        seconds = benchmark.pedantic(run_once, rounds=1, iterations=1)
        logs = list(scheduler.log_iter(app_ids[-1], "r", 0))
        assert logs == ["done\n"]
        benchmark.extra_info["submit_to_succeeded_s"] = seconds
        print(f"\nsubmit -> SUCCEEDED on the kubelet: {seconds:.2f} s")
    finally:
        for app_id in app_ids:
            scheduler.delete(app_id)
