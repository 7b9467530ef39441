"""Engine-scale benchmark, Prefect (issue 32): N tasks of one flow run waiting at once on
Kubernetes pods, with anylaunch's Prefect tasks and with prefect-kubernetes's KubernetesJob
block, on a real Prefect server and worker (prefect_engine.py, flows/engine_scale_prefect.py).

Per run, on a freshly restarted worker: ``engine_cpu_s`` and ``peak_rss_mib`` of the worker's
process tree (the worker and the flow-run process it starts, where every task waits);
``engine_api_requests`` (by kind in ``engine_api_requests_by_kind``): the requests the Prefect
side made in the run's namespace, from the API server's audit log, as for Airflow;
``api_requests``: every client's (``apiserver_request_total``); ``delay_median_s``/``_p95_s``:
from each pod container's exit to the end time of its task run (``app-{i}``) in the API.
Results: ``.benchmarks/engine_scale_prefect.json``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.benchmarks.engine_scale import harness, kube, prefect_engine
from tests.deployments.conftest import postgres
from tests.deployments.postgres import Postgres
from tests.deployments.prefect_deployment import PrefectDeployment
from tests.schedulers.kubernetes import kube_cluster

__all__ = ["postgres"]
kube_client = kube_cluster.kube_client
kubelet = kube_cluster.kubelet

NS = [int(n) for n in os.environ.get("ANYLAUNCH_ENGINE_SCALE_N", "50 200 500").split()]


@pytest.fixture(scope="module")
def prefect(
    postgres: Postgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrefectDeployment]:
    deployment = prefect_engine.start(tmp_path_factory.mktemp("engine-scale-prefect"), postgres)
    try:
        yield deployment
    finally:
        deployment.stop()


@pytest.fixture(scope="session")
def bench_client(kube_client: Any) -> Any:
    return kube.bench_client()


@pytest.mark.parametrize("n", NS)
def test_prefect_kubernetes(
    n: int, prefect: PrefectDeployment, bench_client: Any, kubelet: str
) -> None:
    kube.measure_tools(
        "prefect",
        n,
        bench_client,
        lambda tool, parameters: prefect_engine.run_flow(
            prefect,
            tool,
            parameters,
            kube.timeout(n),
            load=lambda: harness.scrape_apiserver(bench_client),
            audit=harness.AUDIT_LOG,
        ),
    )
