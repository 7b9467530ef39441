"""Engine-scale benchmark (issue 19): N deferred Airflow tasks waiting at once on real jobs, with
anylaunch and with what users run today, on one multi-process Airflow deployment
(tests/deployments: scheduler with the LocalExecutor, triggerer, dag-processor, api-server,
PostgreSQL).

- kubernetes: ``AnylaunchOperator(deferrable=True, scheduler="kubernetes")`` vs the
  cncf.kubernetes provider's deferrable ``KubernetesPodOperator``; same busybox pods (``sleep``),
  same namespace kind (a fresh one per run), same poll interval (2 s, the provider's default).
  ``api_requests`` counts every request the API server served meanwhile (waiters, controllers,
  kubelet, other users of the cluster), by verb and resource in ``api_requests_by_kind``.
  ``engine_api_requests`` counts, from the API server's audit log, only the requests the Airflow
  side made in the run's namespace (operators, triggers), by kind in
  ``engine_api_requests_by_kind``; ``control_plane_api_requests``, ``bench_api_requests`` (this
  benchmark's own client) and ``other_api_requests`` (other namespaces) are the rest.
  Without an audit log (an API server started before 30-kubernetes.sh enabled it)
  ``engine_api_requests`` is null. ``triggerer_idle_cpu_s`` is what the same triggerer uses
  with no triggers over the run's wall time (Airflow's own loops), the floor under
  ``triggerer_cpu_s``. ``kubelet_report_median_s`` and ``after_report_median_s``/``_p95_s``
  split the delay where the kubelet reported the exit (see ``harness.delay_split``).
- slurm: ``AnylaunchOperator(scheduler="slurm")`` vs ``sbatch`` + a deferrable trigger polling
  ``squeue -j``/``sacct -j`` per job (naive_slurm.py). ``api_requests`` counts slurmctld RPCs
  (``sdiag``; sacct's slurmdbd queries are not in it).
- local_cwd: anylaunch only.

Run with ``bash scripts/bench.sh engine-scale [N ...]``; results go to
``.benchmarks/engine_scale.json`` and ``.benchmarks/engine_scale.png``. Nothing asserts on
time: a run fails only if a task did not succeed or a job's end could not be found.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks.engine_scale import airflow_engine, harness, kube
from tests.benchmarks.engine_scale.report import record
from tests.deployments.airflow_deployment import DAGS as DEPLOYMENT_DAGS
from tests.deployments.airflow_deployment import AirflowDeployment
from tests.deployments.conftest import postgres
from tests.deployments.postgres import Postgres
from tests.deployments.processes import wait_until
from tests.schedulers.kubernetes import kube_cluster
from tests.schedulers.slurm.cluster import SlurmCluster, slurm_cluster

__all__ = ["postgres", "slurm_cluster"]
kube_client = kube_cluster.kube_client
kubelet = kube_cluster.kubelet

HERE = Path(__file__).resolve().parent
NS = [int(n) for n in os.environ.get("ANYLAUNCH_ENGINE_SCALE_N", "50 200 500").split()]
SLEEP_S = int(os.environ.get("ANYLAUNCH_ENGINE_SCALE_SLEEP_S", "30"))
# which waiters to run on Kubernetes (default both; e.g. "anylaunch" while tuning it)
K8S_TOOLS = os.environ.get("ANYLAUNCH_ENGINE_SCALE_K8S_TOOLS", "anylaunch kpo").split()


def _timeout(n: int) -> float:
    return SLEEP_S + 300 + 6 * n  # a safety net, never a measurement


@pytest.fixture(scope="module")
def airflow(
    postgres: Postgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AirflowDeployment]:
    root = tmp_path_factory.mktemp("engine-scale")
    dags = root / "dags"
    dags.mkdir()
    # the deployment's own DAGs (its start() waits for them) beside the benchmark's
    for source in (*DEPLOYMENT_DAGS.glob("*.py"), *(HERE / "dags").glob("*.py")):
        (dags / source.name).symlink_to(source)
    deployment = AirflowDeployment(
        root,
        postgres,
        extra_env={
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__PARALLELISM": "8",
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "1024",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        },
    )
    try:
        deployment.start()
        for backend, tool in (
            ("k8s", "anylaunch"),
            ("k8s", "kpo"),
            ("local_cwd", "anylaunch"),
            ("slurm", "anylaunch"),
            ("slurm", "naive"),
        ):
            dag_id = f"engine_scale_{backend}_{tool}"
            wait_until(lambda d=dag_id: deployment.get(f"/api/v2/dags/{d}"), 180, f"DAG {dag_id}")
            deployment.request("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
        yield deployment
    finally:
        deployment.stop()


@pytest.fixture(scope="session")
def bench_client(kube_client: Any) -> Any:
    return kube.bench_client()


@pytest.mark.parametrize("n", NS)
def test_kubernetes(n: int, airflow: AirflowDeployment, bench_client: Any, kubelet: str) -> None:
    kube.warn_without_audit_log()
    entries, runs = [], []
    for tool in K8S_TOOLS:
        with kube.namespace(bench_client) as namespace:
            measured = airflow_engine.run_dag(
                airflow,
                f"engine_scale_k8s_{tool}",
                {"n": n, "sleep_s": SLEEP_S, "namespace": namespace},
                _timeout(n),
                load=lambda: harness.scrape_apiserver(bench_client),
                audit=harness.AUDIT_LOG,
            )
            exits = harness.pod_container_exits(namespace)
            ends = {i: e.end for i, e in exits.items()}
            entry = harness.summarize(measured, ends, "api_requests")
        runs.append((tool, entry, measured, namespace, exits))
    # a watch is logged only once it ends: restart the triggerer (ending its watches) before
    # reading the audit log of every run
    idle = airflow_engine.idle_triggerer_cpu_per_s(airflow)  # restarts it too
    for tool, entry, measured, namespace, exits in runs:
        entry["triggerer_idle_cpu_s"] = round(idle * entry["wall_s"], 2)
        kube.read_audit(entry, measured, namespace, exits)
        record("kubernetes", n, tool, entry)
        entries.append(entry)
    for entry in entries:  # both waiters measured, even if one had a failed task
        kube.check(entry, n)


@pytest.mark.parametrize("n", NS)
def test_local_cwd(n: int, airflow: AirflowDeployment, tmp_path: Path) -> None:
    with harness.scratch_dir(tmp_path / "ends") as out:
        measured = airflow_engine.run_dag(
            airflow,
            "engine_scale_local_cwd_anylaunch",
            {"n": n, "sleep_s": SLEEP_S, "out": str(out)},
            _timeout(n),
        )
        entry = harness.summarize(measured, harness.noted_ends(out), "api_requests")
    record("local_cwd", n, "anylaunch", entry)
    kube.check(entry, n)


@pytest.mark.parametrize("n", NS)
def test_slurm(
    n: int, airflow: AirflowDeployment, slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    entries = []
    for tool in ("anylaunch", "naive"):
        with harness.scratch_dir(tmp_path / f"ends-{tool}") as out:
            measured = airflow_engine.run_dag(
                airflow,
                f"engine_scale_slurm_{tool}",
                {"n": n, "sleep_s": SLEEP_S, "out": str(out)},
                _timeout(n),
                load=harness.sdiag_rpcs,
            )
            entry = harness.summarize(measured, harness.noted_ends(out), "api_requests")
        record("slurm", n, tool, entry)
        entries.append(entry)
    for entry in entries:  # both waiters measured, even if one had a failed task
        kube.check(entry, n)
