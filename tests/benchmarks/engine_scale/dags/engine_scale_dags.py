"""The engine-scale benchmark's DAGs: one DAG per (backend, tool), each a run of ``params.n``
mapped tasks that all wait, deferred to the triggerer, on a job that sleeps
``params.sleep_s`` seconds. The mapped task ``i`` gets ``BENCH_INDEX=i`` in its job's
environment, which is how the benchmark pairs a job's end with its task instance.

- ``engine_scale_k8s_anylaunch``: ``AnylaunchOperator(scheduler="kubernetes", deferrable=True)``
- ``engine_scale_k8s_kpo``: the cncf.kubernetes provider's deferrable ``KubernetesPodOperator``
  on the same busybox image, command and namespace
- ``engine_scale_local_cwd_anylaunch``: ``AnylaunchOperator(scheduler="local_cwd")``
- ``engine_scale_slurm_anylaunch``: ``AnylaunchOperator(scheduler="slurm")``
- ``engine_scale_slurm_naive``: sbatch + a deferrable trigger polling ``squeue -j``/``sacct
  -j`` per job (TorchX's approach), see ``naive_slurm.py``

Every waiter polls every ``POLL_S`` seconds (the KubernetesPodOperator's default).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Param, task

import anylaunch.specs as specs
from airflow_anylaunch.operators import AnylaunchOperator
from tests.benchmarks.engine_scale.workload import (
    K8S_IMAGE,
    K8S_RESERVED,
    K8S_RESOURCE,
    SCRIPT,
    bench_env,
    sleeper_app,
)

POLL_S = 2.0
PARAMS = {
    "n": Param(5, type="integer"),
    "sleep_s": Param(20, type="integer"),
    "namespace": Param("default", type="string"),
    "out": Param("", type="string"),  # where local jobs note their end time
}


@task
def envs(params: dict[str, Any] | None = None) -> list[dict[str, str]]:
    """One environment per mapped task."""
    assert params is not None
    return [bench_env(i, params["sleep_s"], params["out"]) for i in range(int(params["n"]))]


def _dag(dag_id: str) -> DAG:
    return DAG(
        dag_id=dag_id,
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        params=PARAMS,
        max_active_tasks=1024,
    )


for backend, image, cfg, resource in (
    (
        "k8s",
        K8S_IMAGE,
        # 10m CPU and 64 MiB requested (limits: 1 CPU, 128 MiB): the 2-core node runs as
        # many of these pods at once as of the KubernetesPodOperator's (no requests)
        {"namespace": "{{ params.namespace }}", "image_pull_policy": "Never", **K8S_RESERVED},
        K8S_RESOURCE,
    ),
    ("local_cwd", "/tmp", {}, None),
    ("slurm", "/tmp", {}, specs.Resource(cpu=1, gpu=0, memMB=64)),
):
    with _dag(f"engine_scale_{backend}_anylaunch"):
        AnylaunchOperator.partial(
            task_id="app",
            app=sleeper_app(image, resource),
            scheduler="kubernetes" if backend == "k8s" else backend,
            cfg=cfg,
            deferrable=True,
            poll_interval=POLL_S,
            anylaunch_conn_id=None,
        ).expand(env=envs())

with _dag("engine_scale_k8s_kpo"):
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    KubernetesPodOperator.partial(
        task_id="app",
        name="sleeper",
        namespace="{{ params.namespace }}",
        image=K8S_IMAGE,
        image_pull_policy="Never",
        cmds=["sh", "-c", SCRIPT],
        kubernetes_conn_id=None,
        config_file=os.environ.get("KUBECONFIG"),
        in_cluster=False,
        deferrable=True,
        poll_interval=POLL_S,
        on_finish_action="keep_pod",  # the benchmark reads the pods' end times afterwards
    ).expand(env_vars=envs())

with _dag("engine_scale_slurm_naive"):
    from tests.benchmarks.engine_scale.naive_slurm import NaiveSlurmOperator

    NaiveSlurmOperator.partial(task_id="app", script=SCRIPT, poll_interval=POLL_S).expand(
        env=envs()
    )
