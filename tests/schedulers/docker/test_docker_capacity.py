"""local_docker's capacity check against the real engine: one ``docker info`` (NCPU,
MemTotal), every container of the app on the engine's one host; a check creates nothing."""

from __future__ import annotations

from typing import Any

from anylaunch.schedulers.common.capacity import CanRun, Capacity
from anylaunch.schedulers.docker_scheduler import DockerScheduler
from anylaunch.specs import AppDef, Resource, Role
from anylaunch.specs.arrays import ArraySpec
from tests.schedulers.docker.docker_engine import docker_host


def app(image: str, cpu: int, replicas: int = 1, gpu: int = 0, **kw: Any) -> AppDef:
    role = Role(
        "w", image, entrypoint="true", num_replicas=replicas, resource=Resource(cpu, gpu, 64)
    )
    return AppDef("cap", [role], **kw)


def check(sched: DockerScheduler, a: AppDef) -> Capacity:
    return sched.check_capacity(a, sched.run_opts().resolve({}))


def made(client: Any, session: str) -> list[Any]:
    """What the session has on the engine (other tests share the engine)."""
    labels = {"label": f"anylaunch.session={session}"}
    return [
        *client.containers.list(all=True, filters=labels),
        *client.networks.list(filters=labels),
    ]


def test_fit_and_refusal_by_the_engines_cpus_and_nothing_is_created(
    scheduler: DockerScheduler, docker_client: Any, busybox_image: str, session_name: str
) -> None:
    ncpu = docker_client.info()["NCPU"]
    yes = check(scheduler, app(busybox_image, 1, replicas=ncpu))
    assert yes.can_run == CanRun.YES, yes
    assert yes.calls == 3  # the scheduler's first engine use connects: /_ping, /version, /info
    no = check(scheduler, app(busybox_image, 64))
    assert no.can_run == CanRun.NO
    assert no.calls == 1
    assert "replica w/0 needs 64 CPU" in no.reason and f"is {ncpu} CPU" in no.reason
    together = check(scheduler, app(busybox_image, 1, replicas=ncpu + 1))
    assert together.can_run == CanRun.NO and "after placing" in together.reason
    assert made(docker_client, session_name) == []


def test_gpus_the_engine_does_not_report_are_unknown_unless_cpus_already_say_no(
    scheduler: DockerScheduler, docker_client: Any, busybox_image: str
) -> None:
    assert not docker_client.info().get("DiscoveredDevices")  # this engine lists no GPUs
    unknown = check(scheduler, app(busybox_image, 1, gpu=1))
    assert unknown.can_run == CanRun.UNKNOWN and "does not report its GPUs" in unknown.reason
    assert check(scheduler, app(busybox_image, 64, gpu=1)).can_run == CanRun.NO


def test_an_array_is_checked_by_one_index(scheduler: DockerScheduler, busybox_image: str) -> None:
    assert check(scheduler, app(busybox_image, 1, array=ArraySpec(20))).can_run == CanRun.YES
    assert check(scheduler, app(busybox_image, 64, array=ArraySpec(20))).can_run == CanRun.NO


def test_through_the_runner(
    runner: Any, docker_client: Any, busybox_image: str, session_name: str
) -> None:
    assert runner.check_capacity(app(busybox_image, 1), "local_docker").can_run == CanRun.YES
    no = runner.check_capacity(app(busybox_image, 64), "local_docker", {})
    assert no.can_run == CanRun.NO and "replica w/0" in no.reason
    assert made(docker_client, session_name) == []


def test_an_engine_that_does_not_answer_is_unknown_through_the_runner(busybox_image: str) -> None:
    from anylaunch.runner import get_runner

    assert docker_host()  # the real one answers; this one does not
    with get_runner("cap", docker_host="unix:///nonexistent/docker.sock") as runner:
        answer = runner.check_capacity(app(busybox_image, 1), "local_docker")
    assert answer.can_run == CanRun.UNKNOWN and "/nonexistent/docker.sock" in answer.reason
