"""The Dagster jobs of the engine-scale benchmark, served by the benchmark's code server: one
op that launches ``n`` jobs on Kubernetes pods (tests/benchmarks/engine_scale/workload.py) and
waits for all of them at once, a thread per job, in the run worker (the in-process executor:
a step process per job would cost a Python process each).

- ``engine_scale_anylaunch``: ``AnylaunchResource.run`` (scheduler ``kubernetes``)
- ``engine_scale_incumbent``: dagster-k8s's ``execute_k8s_job`` on the same pod

Each thread logs ``ENDED {i}`` to the run's event log once job ``i`` is seen to end: the
engine's record of that task's end, which the benchmark reads. Both wait with their defaults
(anylaunch polls every 10 s at most, woken by its watch; ``execute_k8s_job`` polls the Job
every 10 s until it runs, then follows the pod's log to its end).
"""

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import dagster as dg

from dagster_anylaunch import AnylaunchResource
from tests.benchmarks.engine_scale import workload

ENDED = "engine-scale: ended"


class BenchConfig(dg.Config):
    n: int = 5
    sleep_s: int = 20
    namespace: str = "default"


def _fan_out(context: dg.OpExecutionContext, n: int, one: Callable[[int], object]) -> None:
    def logged(i: int) -> None:
        one(i)
        context.log.info(f"{ENDED} {i}")

    with ThreadPoolExecutor(max_workers=n) as pool:
        errors = [f.exception() for f in [pool.submit(logged, i) for i in range(n)]]
    failed = [e for e in errors if e is not None]
    if failed:
        raise dg.Failure(f"{len(failed)} of {n} jobs failed; the first: {failed[0]!r}")


@dg.op
def wait_all_anylaunch(
    context: dg.OpExecutionContext, config: BenchConfig, anylaunch: AnylaunchResource
) -> None:
    def one(i: int) -> object:
        app = workload.sleeper_app(
            workload.K8S_IMAGE, workload.K8S_RESOURCE, workload.bench_env(i, config.sleep_s)
        )
        return anylaunch.run(context, app, cfg=workload.k8s_cfg(config.namespace), reattach=False)

    _fan_out(context, config.n, one)


@dg.op
def wait_all_incumbent(context: dg.OpExecutionContext, config: BenchConfig) -> None:
    from dagster_k8s import execute_k8s_job

    container = workload.k8s_container(0, config.sleep_s)

    def one(i: int) -> object:
        return execute_k8s_job(
            context,
            image=workload.K8S_IMAGE,
            command=container["command"],
            namespace=config.namespace,
            image_pull_policy="Never",
            env_vars=[f"{k}={v}" for k, v in workload.bench_env(i, config.sleep_s).items()],
            resources=container["resources"],
            load_incluster_config=False,
            kubeconfig_file=os.environ.get("KUBECONFIG"),
            k8s_job_name=f"engine-scale-{context.run_id[:8]}-{i}",
        )

    _fan_out(context, config.n, one)


@dg.job(executor_def=dg.in_process_executor)
def engine_scale_anylaunch() -> None:
    wait_all_anylaunch()


@dg.job(executor_def=dg.in_process_executor)
def engine_scale_incumbent() -> None:
    wait_all_incumbent()


defs = dg.Definitions(
    jobs=[engine_scale_anylaunch, engine_scale_incumbent],
    resources={"anylaunch": AnylaunchResource(scheduler="kubernetes")},
)
