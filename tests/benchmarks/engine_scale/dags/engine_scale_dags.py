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

POLL_S = 2.0
#: the job of every task: sleep, then note the wall-clock time it ended (local backends)
SCRIPT = (
    'sleep "$SLEEP_S"; if [ -n "$BENCH_OUT" ]; then date +%s.%N > "$BENCH_OUT/$BENCH_INDEX"; fi'
)
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
    return [
        {"BENCH_INDEX": str(i), "SLEEP_S": str(params["sleep_s"]), "BENCH_OUT": params["out"]}
        for i in range(int(params["n"]))
    ]


def _dag(dag_id: str) -> DAG:
    return DAG(
        dag_id=dag_id,
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        params=PARAMS,
        max_active_tasks=1024,
    )


def _app(image: str, resource: specs.Resource | None = None) -> specs.AppDef:
    role = specs.Role(name="sleeper", image=image, entrypoint="sh", args=["-c", SCRIPT])
    if resource is not None:
        role.resource = resource
    return specs.AppDef(name="sleeper", roles=[role])


for backend, image, cfg, resource in (
    (
        "k8s",
        "busybox:latest",
        # 10m CPU and 64 MiB requested (limits: 1 CPU, 128 MiB): the 2-core node runs as
        # many of these pods at once as of the KubernetesPodOperator's (no requests)
        {
            "namespace": "{{ params.namespace }}",
            "image_pull_policy": "Never",
            "reserved_millicpu": 990,
            "reserved_memmb": 64,
        },
        specs.Resource(cpu=1, gpu=0, memMB=128),
    ),
    ("local_cwd", "/tmp", {}, None),
    ("slurm", "/tmp", {}, specs.Resource(cpu=1, gpu=0, memMB=64)),
):
    with _dag(f"engine_scale_{backend}_anylaunch"):
        AnylaunchOperator.partial(
            task_id="app",
            app=_app(image, resource),
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
        image="busybox:latest",
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
