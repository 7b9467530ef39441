"""Engine-scale benchmark, Dagster (issue 32): one run's op waiting at once on N Kubernetes
pods, with anylaunch's Dagster resource and with dagster-k8s's ``execute_k8s_job``, on a real
code server, daemon and run worker (dagster_engine.py, flows/engine_scale_dagster.py).

Per run: ``engine_cpu_s`` and ``peak_rss_mib`` of the run worker's process tree (started for
the run; every job waits in it); ``engine_api_requests`` (by kind in
``engine_api_requests_by_kind``): the requests the Dagster side made in the run's namespace,
from the API server's audit log, as for Airflow; ``api_requests``: every client's
(``apiserver_request_total``); ``delay_median_s``/``_p95_s``: from each pod container's exit
to the op's event-log entry for that job. Results: ``.benchmarks/engine_scale_dagster.json``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.benchmarks.engine_scale import dagster_engine, harness, kube
from tests.benchmarks.engine_scale.dagster_engine import BenchDagster
from tests.schedulers.kubernetes import kube_cluster

kube_client = kube_cluster.kube_client
kubelet = kube_cluster.kubelet

NS = [int(n) for n in os.environ.get("ANYLAUNCH_ENGINE_SCALE_N", "50 200 500").split()]


@pytest.fixture(scope="module")
def dagster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BenchDagster]:
    deployment = dagster_engine.start(tmp_path_factory.mktemp("engine-scale-dagster"))
    try:
        yield deployment
    finally:
        deployment.stop()


@pytest.fixture(scope="session")
def bench_client(kube_client: Any) -> Any:
    return kube.bench_client()


@pytest.mark.parametrize("n", NS)
def test_dagster_kubernetes(n: int, dagster: BenchDagster, bench_client: Any, kubelet: str) -> None:
    kube.measure_tools(
        "dagster",
        n,
        bench_client,
        lambda tool, parameters: dagster_engine.run_job(
            dagster,
            tool,
            parameters,
            kube.timeout(n),
            load=lambda: harness.scrape_apiserver(bench_client),
            audit=harness.AUDIT_LOG,
        ),
        keep=("run_workers",),
    )
