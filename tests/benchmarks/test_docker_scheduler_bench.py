"""local_docker on the real engine: launch, describe, cancel and log-tail latencies, and the
workspace's plan/build/reuse times. Numbers go to ``benchmark.extra_info`` and are printed;
nothing is asserted on wall time. Run with ``pytest tests/benchmarks --benchmark-enable``."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from anylaunch.schedulers.docker_scheduler import DockerScheduler
from anylaunch.specs import AppDef, AppState, Role, Workspace
from anylaunch.workspace.docker_workspace import plan_workspace_image
from tests.schedulers.docker.docker_engine import (
    BUSYBOX_IMAGE,
    PYTHON_IMAGE,
    docker_host,
    require_engine,
    require_image,
)

WAIT_S = 60


@pytest.fixture
def sched() -> Iterator[DockerScheduler]:
    client = require_engine()
    require_image(client, BUSYBOX_IMAGE)
    require_image(client, PYTHON_IMAGE)
    client.close()
    session = f"bench-{uuid.uuid4().hex[:8]}"
    scheduler = DockerScheduler(session, docker_host=docker_host())
    yield scheduler
    for app in scheduler.list():
        if app.app_handle.split("/")[2] == session:
            scheduler.delete(app.app_id)
    scheduler.close()


def wait(sched: DockerScheduler, app_id: str, poll: float = 0.02) -> AppState:
    deadline = time.monotonic() + WAIT_S
    while True:
        desc = sched.describe(app_id)
        assert desc is not None
        if desc.state.is_terminal():
            return desc.state
        assert time.monotonic() < deadline
        time.sleep(poll)


def report(benchmark: BenchmarkFixture, name: str, values: dict[str, float]) -> None:
    benchmark.extra_info.update(values)
    print(f"\n{name}:")
    for key, value in values.items():
        print(f"  {key:32s} {value:10.4f}")


def test_docker_launch_describe_cancel(benchmark: BenchmarkFixture, sched: DockerScheduler) -> None:
    def echo(replicas: int) -> AppDef:
        role = Role("echo", image=BUSYBOX_IMAGE, entrypoint="echo", args=["hi"])
        role.num_replicas = replicas
        return AppDef("bench", [role])

    def measure() -> dict[str, float]:
        dryrun, schedule, done = [], [], []
        for _ in range(5):
            t0 = time.perf_counter()
            info = sched.submit_dryrun(echo(1), {})
            t1 = time.perf_counter()
            app_id = sched.schedule(info)
            t2 = time.perf_counter()
            assert wait(sched, app_id) == AppState.SUCCEEDED
            t3 = time.perf_counter()
            dryrun.append(t1 - t0)
            schedule.append(t2 - t1)
            done.append(t3 - t1)
            sched.delete(app_id)
        t0 = time.perf_counter()
        four = sched.schedule(sched.submit_dryrun(echo(4), {}))
        schedule_four = time.perf_counter() - t0
        assert wait(sched, four) == AppState.SUCCEEDED
        describes = []
        for _ in range(10):
            t1 = time.perf_counter()
            sched.describe(four)
            describes.append(time.perf_counter() - t1)
        sleeper = Role("s", image=BUSYBOX_IMAGE, entrypoint="sleep", args=["300"], num_replicas=4)
        running = sched.schedule(sched.submit_dryrun(AppDef("bench-cancel", [sleeper]), {}))
        while sched.describe(running).state != AppState.RUNNING:  # type: ignore[union-attr]
            time.sleep(0.02)
        t1 = time.perf_counter()
        sched.cancel(running)
        cancel = time.perf_counter() - t1
        assert sched.describe(running).state == AppState.CANCELLED  # type: ignore[union-attr]
        return {
            "dryrun_1_replica_ms": 1000 * statistics.median(dryrun),
            "schedule_1_replica_s": statistics.median(schedule),
            "schedule_to_succeeded_1_replica_s": statistics.median(done),
            "schedule_4_replicas_s": schedule_four,
            "describe_4_replicas_ms": 1000 * statistics.median(describes),
            "cancel_4_running_replicas_s": cancel,
        }

    values = benchmark.pedantic(measure, rounds=1, iterations=1)
    report(benchmark, "local_docker lifecycle", values)


def test_docker_tail_latency(benchmark: BenchmarkFixture, sched: DockerScheduler) -> None:
    """From a line being printed in the container to log_iter(should_tail=True) yielding it."""
    script = "import time\nfor i in range(50):\n    print(repr(time.time()), flush=True)\n    time.sleep(0.02)\n"
    role = Role("ticker", image=PYTHON_IMAGE, entrypoint="python3", args=["-c", script])

    def measure() -> dict[str, float]:
        app_id = sched.schedule(sched.submit_dryrun(AppDef("bench-tail", [role]), {}))
        latencies = [
            time.time() - float(line) for line in sched.log_iter(app_id, "ticker", should_tail=True)
        ]
        assert len(latencies) == 50, "every line written must be yielded by the tail"
        latencies.sort()
        return {
            "tail_latency_median_ms": 1000 * statistics.median(latencies),
            "tail_latency_p95_ms": 1000 * latencies[int(0.95 * len(latencies)) - 1],
        }

    values = benchmark.pedantic(measure, rounds=1, iterations=1)
    report(benchmark, "local_docker log tail", values)


def test_docker_workspace_plan_build_reuse(
    benchmark: BenchmarkFixture, sched: DockerScheduler, tmp_path: Path
) -> None:
    for i in range(500):
        sub = tmp_path / f"pkg{i % 20}"
        sub.mkdir(exist_ok=True)
        (sub / f"mod{i}.py").write_text(f"VALUE = {i}\n" * 50)
    workspace = Workspace({str(tmp_path): ""})

    def measure() -> dict[str, float]:
        t0 = time.perf_counter()
        plan = plan_workspace_image(BUSYBOX_IMAGE, workspace)
        t1 = time.perf_counter()
        assert sched.build_workspace_images([plan]) == [f"built {plan.image}"]
        t2 = time.perf_counter()
        assert sched.build_workspace_images([plan]) == [f"reused {plan.image}"]
        t3 = time.perf_counter()
        sched._client().api.remove_image(plan.image, force=True)
        return {
            "plan_500_files_ms": 1000 * (t1 - t0),
            "build_500_files_s": t2 - t1,
            "reuse_unchanged_ms": 1000 * (t3 - t2),
        }

    values: dict[str, Any] = benchmark.pedantic(measure, rounds=1, iterations=1)
    report(benchmark, "docker workspace", values)
