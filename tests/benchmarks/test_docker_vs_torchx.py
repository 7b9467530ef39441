"""anylaunch vs TorchX 0.7.0 on local_docker, same engine, same image, same machine, one run.

Each side runs the same probe in its own interpreter (TorchX from its throwaway environment
under ``.cache/``, made by the torchx_python fixture in conftest.py): launch an echo app and poll its
status every 20 ms until it succeeded, for 1 and 4 replicas. Medians are printed and kept in
``benchmark.extra_info``; nothing is asserted on wall time.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from pytest_benchmark.fixture import BenchmarkFixture

from tests.schedulers.docker.docker_engine import (
    BUSYBOX_IMAGE,
    docker_host,
    require_engine,
    require_image,
)

REPO = Path(__file__).resolve().parents[2]

# {package} is anylaunch or torchx: the two share this API (read torchx as anylaunch)
PROBE = """
import json, statistics, sys, time
import docker
from {package}.runner import get_runner
from {package}.specs import AppDef, Role

replicas, rounds = int(sys.argv[1]), int(sys.argv[2])
runner = get_runner("bench")
launch, done = [], []
for _ in range(rounds):
    role = Role("echo", image="{image}", entrypoint="echo", args=["hi"], num_replicas=replicas)
    t0 = time.perf_counter()
    handle = runner.run(AppDef("bench", roles=[role]), "local_docker")
    t1 = time.perf_counter()
    while True:
        status = runner.status(handle)
        if status is not None and status.is_terminal():
            break
        time.sleep(0.02)
    t2 = time.perf_counter()
    assert status.state.name == "SUCCEEDED", status
    launch.append(t1 - t0)
    done.append(t2 - t0)
    app_id = handle.rsplit("/", 1)[1]
    client = docker.from_env()
    for label in ("anylaunch.app-id", "torchx.pytorch.org/app-id"):
        for c in client.containers.list(all=True, filters={{"label": f"{{label}}={{app_id}}"}}):
            c.remove(force=True)
    for n in client.networks.list(names=[app_id]):
        if n.name == app_id:
            n.remove()
print(json.dumps({{"launch_s": statistics.median(launch), "done_s": statistics.median(done)}}))
"""


def probe(python: Path, package: str, replicas: int, rounds: int = 3) -> dict[str, float]:
    env = {**os.environ, "DOCKER_HOST": docker_host()}
    code = PROBE.format(package=package, image=BUSYBOX_IMAGE)
    out = subprocess.run(
        [str(python), "-c", code, str(replicas), str(rounds)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_local_docker_vs_torchx(benchmark: BenchmarkFixture, torchx_python: Path) -> None:
    client = require_engine()
    require_image(client, BUSYBOX_IMAGE)
    client.close()

    def measure() -> dict[str, float]:
        values = {}
        for replicas in (1, 4):
            ours = probe(Path(sys.executable), "anylaunch", replicas)
            theirs = probe(torchx_python, "torchx", replicas)
            for metric in ("launch_s", "done_s"):
                values[f"{replicas}_replica_{metric}_anylaunch"] = ours[metric]
                values[f"{replicas}_replica_{metric}_torchx"] = theirs[metric]
        return values

    try:
        values = benchmark.pedantic(measure, rounds=1, iterations=1)
    finally:
        # TorchX puts every app on one shared network that it never removes
        import docker

        client = docker.DockerClient(base_url=docker_host(), version="auto")
        for network in client.networks.list(names=["torchx"]):
            if network.name != "torchx":  # the filter matches parts of names
                continue
            with contextlib.suppress(docker.errors.APIError):  # still in use: keep it
                network.remove()
        client.close()
    benchmark.extra_info.update(values)
    print("\nlocal_docker, anylaunch vs torchx 0.7.0 (median seconds, lower is better):")
    for key, value in values.items():
        print(f"  {key:40s} {value:8.3f}")
    assert statistics.fmean(values.values()) > 0
