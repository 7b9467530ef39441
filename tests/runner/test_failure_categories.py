"""Each failure category, produced by a real backend and read by the one classifier
(``anylaunch.runner.failures``) that every engine's failure metadata and retry option use."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import anylaunch.specs as specs
from anylaunch.runner import Runner, get_runner
from anylaunch.runner.failures import FailureCategory, decision_category, failure_category
from anylaunch.runner.watch import StartupTimedOut, WatchPolicy


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runner]:
    from tests.schedulers.docker.docker_engine import docker_host
    from tests.schedulers.kubernetes.kube_cluster import kubeconfig

    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    # the provisioned backends, also when the provisioning exports are not in the env
    monkeypatch.setenv("DOCKER_HOST", docker_host())
    if kubeconfig() is not None:
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig()))
    session = f"fc{time.time_ns() % 10**8}"
    with get_runner(session) as runner:
        yield runner
        # a local_docker app keeps its containers and network until deleted: the engine's
        # address pool holds ~30 networks, so leaving them behind breaks later runs
        for app in runner.list("local_docker"):
            if f"://{session}/" in app.app_handle:
                runner.delete(app.app_handle)


def _app(
    name: str, image: str, entrypoint: str, args: list[str], cpu: int = 1, memMB: int = 128
) -> specs.AppDef:
    res = specs.Resource(cpu=cpu, gpu=0, memMB=memMB)
    return specs.AppDef(
        name, [specs.Role("w", image, entrypoint=entrypoint, args=args, resource=res)]
    )


def _final(runner: Runner, handle: str) -> specs.AppStatus:
    status = runner.wait(handle, wait_interval=0.5, timeout=300)
    assert status is not None
    return status


def test_a_non_zero_exit_is_an_application_failure(runner: Runner) -> None:
    app = _app("exits", ".", sys.executable, ["-c", "raise SystemExit(3)"])
    status = _final(runner, runner.run(app, "local_cwd"))
    assert failure_category(status) == FailureCategory.APPLICATION


def test_a_cancel_is_cancelled(runner: Runner) -> None:
    app = _app("sleeps", ".", sys.executable, ["-c", "import time; time.sleep(60)"])
    handle = runner.run(app, "local_cwd")
    runner.cancel(handle)
    assert failure_category(_final(runner, handle)) == FailureCategory.CANCELLED


def test_a_replica_killed_from_outside_is_an_infrastructure_failure(runner: Runner) -> None:
    script = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    status = _final(
        runner, runner.run(_app("killed", ".", sys.executable, ["-c", script]), "local_cwd")
    )
    assert failure_category(status) == FailureCategory.INFRASTRUCTURE


def test_exceeding_a_memory_limit_is_out_of_memory(runner: Runner, python_image: str) -> None:
    app = _app(
        "hungry", python_image, "python3", ["-c", "x = bytearray(512 * 1024 * 1024)"], memMB=64
    )
    status = _final(runner, runner.run(app, "local_docker"))
    assert failure_category(status) == FailureCategory.OUT_OF_MEMORY


def test_a_killed_container_is_an_infrastructure_failure(
    runner: Runner, busybox_image: str, docker_client: Any
) -> None:
    handle = runner.run(_app("victim", busybox_image, "sh", ["-c", "sleep 120"]), "local_docker")
    app_id = handle.rsplit("/", 1)[1]
    deadline = time.monotonic() + 120
    while not (containers := docker_client.containers.list(filters={"name": app_id})):
        assert time.monotonic() < deadline, "the container never ran"
        time.sleep(0.2)
    for container in containers:
        container.kill()  # as a daemon restart or an admin would
    assert failure_category(_final(runner, handle)) == FailureCategory.INFRASTRUCTURE


def test_a_request_no_node_can_take_is_a_startup_failure(
    runner: Runner, kube_namespace: str, kubelet: str, busybox_image: str
) -> None:
    app = _app("greedy", busybox_image, "sh", ["-c", "true"], cpu=512)  # 512 CPUs: no node
    handle = runner.run(app, "kubernetes", cfg={"namespace": kube_namespace})
    try:
        policy = WatchPolicy(0.5, startup_timeout=15, handle=handle)
        while True:
            decision = policy.observe(runner.status(handle), time.time())
            if decision.kind != "poll":
                break
            time.sleep(decision.after)
        assert isinstance(decision, StartupTimedOut)
        assert "Unschedulable" in (decision.status.msg or ""), decision.status.msg
        assert decision_category(decision) == FailureCategory.STARTUP
    finally:
        runner.cancel(handle)
