"""AnylaunchAppTrigger on the real Kubernetes API server: woken by the scheduler's shared
watch, its lines exactly once (the final drain), and its task ended in the triggerer."""

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from anylaunch.runner import get_runner
from anylaunch.specs import AppDef, Resource, Role
from tests.schedulers.kubernetes import kube_cluster

kube_client = kube_cluster.kube_client
kube_namespace = kube_cluster.kube_namespace
kubelet = kube_cluster.kubelet

SCRIPT = "for i in 0 1 2; do echo line $i; done; sleep 3; echo over"


@pytest.fixture
def kube_env(monkeypatch: pytest.MonkeyPatch, kubelet: str) -> None:
    config = kube_cluster.kubeconfig()
    assert config is not None
    monkeypatch.setenv("KUBECONFIG", config)


def launch(namespace: str) -> str:
    role = Role(
        "job",
        kube_cluster.BUSYBOX,
        entrypoint="sh",
        args=["-c", SCRIPT],
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    cfg = {"namespace": namespace, "image_pull_policy": "Never", "reserved_millicpu": 990}
    with get_runner("trigger-watch") as runner:
        return runner.run(AppDef("trig", [role]), "kubernetes", cfg)


def test_a_kubernetes_trigger_is_woken_by_the_watch_and_ends_its_task(
    kube_env: None, kube_namespace: str
) -> None:
    from airflow.triggers.base import TaskSuccessEvent

    from airflow_anylaunch.triggers import AnylaunchAppTrigger, _StatusPoller

    handle = launch(kube_namespace)
    trigger = AnylaunchAppTrigger(handle, poll_interval=3600.0)
    trigger.task_instance = SimpleNamespace(task_id="app", dag_id="d", run_id="r", map_index=-1)
    pollers: list[_StatusPoller] = []

    async def main() -> Any:
        from airflow_anylaunch import triggers

        try:
            # a safety net only: the policy's backoff alone would also end it, later
            return await asyncio.wait_for(trigger.run().__anext__(), 600)
        finally:
            for making in triggers._POLLERS.get(asyncio.get_running_loop(), {}).values():
                pollers.append(making.result())

    event = asyncio.run(main())
    assert isinstance(event, TaskSuccessEvent) and event.xcoms is not None
    assert event.xcoms["return_value"]["state"] == "SUCCEEDED"  # type: ignore[index]
    (poller,) = pollers
    assert poller.waiter is not None  # the kubernetes scheduler offers a change feed
    poller.waiter.close()
    poller.runner.close()


def test_without_a_task_instance_the_event_carries_every_line_once(
    kube_env: None, kube_namespace: str
) -> None:
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    handle = launch(kube_namespace)
    trigger = AnylaunchAppTrigger(handle, poll_interval=3600.0, log_positions={"job/0": 1})
    event = asyncio.run(asyncio.wait_for(trigger.run().__anext__(), 600)).payload
    assert event["status"] == "success"
    assert event["log_positions"] == {"job/0": 4}
    assert event["log_tail"] == ["job/0 line 1", "job/0 line 2", "job/0 over"]
