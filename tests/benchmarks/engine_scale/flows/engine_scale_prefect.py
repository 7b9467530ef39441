"""The Prefect flows of the engine-scale benchmark, deployed from source to the benchmark's
Prefect deployment (a real server and a process worker): each maps a task over ``n`` jobs on
Kubernetes pods (tests/benchmarks/engine_scale/workload.py), all waiting at once in the
flow-run process (a thread pool as wide as the map).

- ``engine-scale-anylaunch``: anylaunch's ``AnylaunchJob`` block (scheduler ``kubernetes``;
  trigger, wait for completion, fetch the result) in a task mapped over ``n`` apps
- ``engine-scale-incumbent``: prefect-kubernetes's ``KubernetesJob`` block, the same way, in a
  task mapped over ``n`` Job manifests with the same pod

Both run one task per job with their block's job interface, so the engine does the same work
for each (a flow that launches with ``launch_app`` and waits with ``wait_for_app``, so that a
retried wait reattaches, runs two task runs per job: twice the engine's own task overhead).

Both poll every ``POLL_S`` seconds (the KubernetesJob block's default). The task run that
ends when job ``i`` is seen to end is named ``app-{i}``: the benchmark reads its end time from
the API. ``delete_after_completion`` is off so that the benchmark can read the pods' exits
afterwards (the block would otherwise spend one more request per job deleting it).
"""

from __future__ import annotations

import os
from typing import Any

from prefect import flow, task, unmapped
from prefect.task_runners import ThreadPoolTaskRunner

from anylaunch.specs.serialize import appdef_to_dict
from prefect_anylaunch import AnylaunchJob
from tests.benchmarks.engine_scale import workload

POLL_S = 5
#: wide enough for every mapped task to wait at once (threads start as tasks are submitted)
MAX_WORKERS = 1024


def _anylaunch_job(index: int, sleep_s: int, namespace: str) -> AnylaunchJob:
    app = workload.sleeper_app(
        workload.K8S_IMAGE, workload.K8S_RESOURCE, workload.bench_env(index, sleep_s)
    )
    return AnylaunchJob(
        app=appdef_to_dict(app),
        scheduler="kubernetes",
        cfg=workload.k8s_cfg(namespace),
        poll_interval_s=POLL_S,
    )


@task(task_run_name="app-{index}")
def run_anylaunch_job(index: int, sleep_s: int, namespace: str) -> dict[str, Any]:
    job_run = _anylaunch_job(index, sleep_s, namespace).trigger()
    job_run.wait_for_completion()
    return job_run.fetch_result()


@flow(name="engine-scale-anylaunch", task_runner=ThreadPoolTaskRunner(max_workers=MAX_WORKERS))
def engine_scale_anylaunch(n: int = 5, sleep_s: int = 20, namespace: str = "default") -> None:
    run_anylaunch_job.map(list(range(n)), unmapped(sleep_s), unmapped(namespace)).result()


def _manifest(index: int, sleep_s: int, run: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"engine-scale-{run}-{index}"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [workload.k8s_container(index, sleep_s)],
                }
            },
        },
    }


@task(task_run_name="app-{index}")
def run_k8s_job(index: int, sleep_s: int, namespace: str, run: str) -> dict[str, Any]:
    from prefect_kubernetes.credentials import KubernetesClusterConfig, KubernetesCredentials
    from prefect_kubernetes.jobs import KubernetesJob

    job = KubernetesJob(
        v1_job=_manifest(index, sleep_s, run),
        credentials=KubernetesCredentials(
            cluster_config=KubernetesClusterConfig.from_file(os.environ["KUBECONFIG"])
        ),
        namespace=namespace,
        interval_seconds=POLL_S,
        delete_after_completion=False,
    )
    job_run = job.trigger()
    job_run.wait_for_completion()
    return dict(job_run.fetch_result())


@flow(name="engine-scale-incumbent", task_runner=ThreadPoolTaskRunner(max_workers=MAX_WORKERS))
def engine_scale_incumbent(n: int = 5, sleep_s: int = 20, namespace: str = "default") -> None:
    from prefect.runtime import flow_run

    run = str(flow_run.id)[:8]
    run_k8s_job.map(list(range(n)), unmapped(sleep_s), unmapped(namespace), unmapped(run)).result()
