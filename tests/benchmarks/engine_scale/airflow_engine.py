"""The Airflow adapter of the engine-scale harness: a fresh triggerer per run (its process
tree is what :class:`~tests.benchmarks.engine_scale.harness.TreeSampler` samples), the DAG run,
and its task instances (each task's end)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.benchmarks.engine_scale.harness import TreeSampler, measure_run, parse_time
from tests.deployments.airflow_deployment import AirflowDeployment
from tests.deployments.processes import wait_until

TERMINAL = ("success", "failed")


def fresh_triggerer(airflow: AirflowDeployment) -> int:
    """Restarts the triggerer and waits until it heartbeats; returns its PID."""
    airflow.daemons["triggerer"].stop()
    started = time.time()
    airflow.restart("triggerer")

    def beating() -> bool:
        health = airflow.get("/api/v2/monitor/health")["triggerer"]
        beat = health.get("latest_triggerer_heartbeat")
        return bool(health.get("status") == "healthy" and beat and parse_time(beat) > started)

    wait_until(beating, 120, "the restarted triggerer's heartbeat", interval=0.5)
    return airflow.daemons["triggerer"].pid


def idle_triggerer_cpu_per_s(airflow: AirflowDeployment, seconds: float = 30.0) -> float:
    """CPU seconds per second a freshly restarted triggerer with no triggers uses (Airflow's
    own loops: heartbeats, trigger assignment queries): the floor under every waiter's
    ``triggerer_cpu_s``, which ``triggerer_idle_cpu_s`` (this rate times the run's wall time)
    states in each entry."""
    pid = fresh_triggerer(airflow)
    time.sleep(5.0)  # past the start-up work
    with TreeSampler(pid) as sampler:
        time.sleep(seconds)
    return sampler.cpu_s / seconds


def task_instances(airflow: AirflowDeployment, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    """Every mapped instance of task ``app`` in the run."""
    found: list[dict[str, Any]] = []
    offset = 0
    while True:
        page = airflow.get(
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances?limit=100&offset={offset}"
        )["task_instances"]
        found += [ti for ti in page if ti["task_id"] == "app"]
        if len(page) < 100:
            return found
        offset += 100


def _ended(state: str | None) -> str | None:
    return state if state in TERMINAL else None


def run_dag(
    airflow: AirflowDeployment,
    dag_id: str,
    conf: Mapping[str, Any],
    timeout: float,
    load: Callable[[], Counter[str]] | None = None,
    audit: Path | None = None,
) -> dict[str, Any]:
    """Triggers ``dag_id`` on a fresh triggerer and waits for the run to end
    (:func:`measure_run`). Returns the measurements (without delays) and the task
    instances."""
    sampler = TreeSampler(fresh_triggerer(airflow))
    measured = measure_run(
        lambda: airflow.trigger(dag_id, conf),
        lambda run_id: _ended(airflow.dag_run_state(dag_id, run_id)),
        sampler,
        timeout,
        f"run of {dag_id}",
        load,
        audit,
    )
    measured["triggerer_cpu_s"] = measured["cpu_s"]
    measured["triggerer_supervisor_cpu_s"] = round(sampler.root_cpu_s, 2)
    measured["triggerer_peak_rss_mb"] = measured["peak_rss_mib"]
    measured["tis"] = task_instances(airflow, dag_id, measured["run_id"])
    return measured
