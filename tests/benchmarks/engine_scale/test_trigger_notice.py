"""How soon anylaunch's own part notices a finished pod (issue 19), without the engine's loops.

The engine-scale delay (a job's end to its task instance's ``end_date``) includes Airflow's
triggerer: its trigger runner hands events to its supervisor once a second and the supervisor
writes them to the database in its own loop. This benchmark measures only what anylaunch
controls: N ``AnylaunchAppTrigger`` instances run in one event loop, as a triggerer runs them,
each waiting on its own pod on the real API server, and the delay is from each pod container's
exit (the Docker engine's ``FinishedAt``) to the moment its trigger yields the event that ends
the task. Recorded as the ``anylaunch_trigger`` waiter of the kubernetes rows (delays only).

Run with ``bash scripts/bench.sh engine-scale [N ...]`` (``-k trigger_notice`` for this alone).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from types import SimpleNamespace
from typing import Any

import pytest

from tests.benchmarks.engine_scale import harness
from tests.benchmarks.engine_scale.report import record
from tests.benchmarks.engine_scale.test_engine_scale import NS, SLEEP_S, _namespace, bench_client
from tests.schedulers.kubernetes import kube_cluster

__all__ = ["bench_client"]
kube_client = kube_cluster.kube_client
kubelet = kube_cluster.kubelet


async def _first_event(trigger: Any, deadline_s: float) -> tuple[float, str]:
    event = await asyncio.wait_for(trigger.run().__anext__(), deadline_s)
    return time.time(), type(event).__name__


@pytest.mark.parametrize("n", NS)
def test_kubernetes_trigger_notice(
    n: int, bench_client: Any, kubelet: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_anylaunch.triggers import AnylaunchAppTrigger
    from anylaunch.runner import get_runner
    from anylaunch.specs import AppDef, Resource, Role

    config = kube_cluster.kubeconfig()
    assert config is not None
    monkeypatch.setenv("KUBECONFIG", config)
    with _namespace(bench_client) as namespace:
        cfg = {"namespace": namespace, "image_pull_policy": "Never", "reserved_millicpu": 990}

        def launch(runner: Any, i: int) -> Any:
            """Launches app ``i`` and returns its trigger, as a task that defers at once."""
            role = Role(
                "sleeper",
                kube_cluster.BUSYBOX,
                entrypoint="sh",
                args=["-c", 'sleep "$SLEEP_S"'],
                env={"BENCH_INDEX": str(i), "SLEEP_S": str(SLEEP_S)},
                resource=Resource(cpu=1, gpu=0, memMB=128),
            )
            handle = runner.run(AppDef("sleeper", [role]), "kubernetes", cfg)
            trigger = AnylaunchAppTrigger(handle, poll_interval=2.0)
            trigger.task_instance = SimpleNamespace(
                task_id="app", dag_id="notice", run_id="r", map_index=i
            )
            return trigger

        async def main() -> list[tuple[float, str]]:
            # each trigger starts right after its launch, while the next ones launch (launching
            # them all first would count the launch loop's time in the early pods' delays)
            deadline = SLEEP_S + 300 + 6 * n  # a safety net, never a measurement
            waits = []
            with get_runner("notice") as runner:
                for i in range(n):
                    trigger = await asyncio.to_thread(launch, runner, i)
                    waits.append(asyncio.create_task(_first_event(trigger, deadline)))
            return list(await asyncio.gather(*waits))

        events = asyncio.run(main())
        ends = harness.pod_container_ends(namespace)
    assert {kind for _, kind in events} == {"TaskSuccessEvent"}
    delays = [at - ends[i] for i, (at, _) in enumerate(events) if i in ends]
    assert len(delays) == n, f"{n - len(delays)} pod ends not found"
    entry = {
        "tasks": n,
        "delays_measured": len(delays),
        "delay_median_s": round(statistics.median(delays), 3),
        "delay_p95_s": round(harness.p95(delays), 3),
    }
    print(entry)
    record("kubernetes", n, "anylaunch_trigger", entry)
