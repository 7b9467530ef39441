"""Fixtures of the Kubernetes scheduler tests: the provisioned cluster (kube_cluster.py), a
namespace for the session, and schedulers whose apps are deleted after each test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from anylaunch.schedulers.kubernetes.client import KubeClient
from anylaunch.schedulers.kubernetes_mcad_scheduler import KubernetesMCADScheduler
from anylaunch.schedulers.kubernetes_scheduler import KubernetesScheduler
from tests.schedulers.kubernetes import kube_cluster

kube_client = kube_cluster.kube_client
kube_namespace = kube_cluster.kube_namespace
kubelet = kube_cluster.kubelet


class CountingClient(KubeClient):
    """A real client that records every request it sends (method and path)."""

    def __init__(self, api_client: Any) -> None:
        super().__init__(api_client)
        self.calls: list[str] = []

    def _send(self, method: str, path: str, *args: Any) -> Any:
        query = args[0] if args else None
        dry_run = " (dry run)" if query and "dryRun" in query else ""
        self.calls.append(f"{method} {path}{dry_run}")
        return super()._send(method, path, *args)


@pytest.fixture
def counting_client(kube_client: KubeClient) -> CountingClient:
    """A fresh client on the provisioned cluster that counts its API calls."""
    return CountingClient(kube_client.api_client)


@pytest.fixture
def session_name() -> str:
    """A session of its own, so a test's cleanup only touches its own apps."""
    return f"test-{uuid.uuid4().hex[:8]}"


def _cleanup(scheduler: Any, namespace: str, session: str) -> None:
    for app in scheduler.list({"namespace": namespace}):
        if app.app_handle.split("/")[2] == session:
            scheduler.delete(app.app_id)


@pytest.fixture
def k8s(
    counting_client: CountingClient, kube_namespace: str, session_name: str
) -> Iterator[KubernetesScheduler]:
    """The kubernetes scheduler on the provisioned cluster; the test's apps are deleted after."""
    scheduler = KubernetesScheduler(session_name, client=counting_client)
    yield scheduler
    _cleanup(scheduler, kube_namespace, session_name)


@pytest.fixture
def mcad(
    counting_client: CountingClient, kube_namespace: str, session_name: str
) -> Iterator[KubernetesMCADScheduler]:
    """The kubernetes_mcad scheduler on the provisioned cluster; apps deleted after."""
    scheduler = KubernetesMCADScheduler(session_name, client=counting_client)
    yield scheduler
    _cleanup(scheduler, kube_namespace, session_name)
