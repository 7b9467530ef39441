"""The provisioned Kubernetes cluster (scripts/provision/30-kubernetes.sh), as pytest fixtures.

Reusable from any test directory::

    from tests.schedulers.kubernetes import kube_cluster

    kube_client = kube_cluster.kube_client          # the API server (session)
    kube_namespace = kube_cluster.kube_namespace    # a fresh namespace (session)
    kubelet = kube_cluster.kubelet                  # a Ready node that runs pods (session)

Without the cluster these skip locally and fail under CI=true (tests/backends.py).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from anylaunch.schedulers.kubernetes.client import (
    KubeClient,
    KubernetesApiError,
    KubernetesSchedulerError,
)
from tests.backends import require_backend

HOW = (
    "bash scripts/provision/10-docker.sh && . scripts/provision/30-kubernetes.sh "
    "(it exports KUBECONFIG=/var/lib/anylaunch-backends/kubernetes/admin.kubeconfig)"
)
DEFAULT_KUBECONFIG = "/var/lib/anylaunch-backends/kubernetes/admin.kubeconfig"
NODE = os.environ.get("ANYLAUNCH_KUBERNETES_NODE", "anylaunch-node")
#: Images present on the node (built locally by 10-docker.sh; no registry is reachable).
BUSYBOX = "busybox:latest"
PYTHON = "anylaunch-python:3.11"


def kubeconfig() -> str | None:
    """$KUBECONFIG, else the provisioned cluster's kubeconfig if it exists."""
    path = os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
    return path if os.path.exists(path) else None


def cluster_client() -> KubeClient | None:
    """A client of a live API server, or None."""
    config = kubeconfig()
    if config is None:
        return None
    try:
        client = KubeClient.from_config(config)
        client.request("GET", "/version")
    except KubernetesSchedulerError:
        return None
    return client


def node_ready(client: KubeClient, node: str = NODE) -> bool:
    """True if ``node`` reports Ready."""
    try:
        obj = client.request("GET", f"/api/v1/nodes/{node}")
    except KubernetesApiError:
        return False
    conditions = obj.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.25) -> Any:
    """Polls ``predicate()`` until it returns something truthy (returned) or fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def kube_client() -> KubeClient:
    """The provisioned API server."""
    client = cluster_client()
    require_backend("kubernetes API server", client is not None, HOW)
    assert client is not None
    return client


@contextlib.contextmanager
def fresh_namespace(client: KubeClient) -> Iterator[str]:
    """A new namespace (with its default service account), deleted on exit."""
    name = f"anylaunch-test-{uuid.uuid4().hex[:8]}"
    client.request(
        "POST",
        "/api/v1/namespaces",
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )
    try:
        # the ServiceAccount admission plugin refuses pods until the default account exists
        wait_for(lambda: _sa_exists(client, name), 30, "the namespace's default service account")
        yield name
    finally:
        with contextlib.suppress(KubernetesSchedulerError):
            client.request("DELETE", f"/api/v1/namespaces/{name}")


@pytest.fixture(scope="session")
def kube_namespace(kube_client: KubeClient) -> Iterator[str]:
    """A namespace of this test session, deleted after."""
    with fresh_namespace(kube_client) as name:
        yield name


@pytest.fixture
def own_namespace(kube_client: KubeClient) -> Iterator[str]:
    """A namespace of this test alone: no process-wide watch of the session's namespace,
    started by an earlier test, serves it (a test counting the watches it starts)."""
    with fresh_namespace(kube_client) as name:
        yield name


def _sa_exists(client: KubeClient, namespace: str) -> bool:
    try:
        client.request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
    except KubernetesApiError:
        return False
    return True


@pytest.fixture(scope="session")
def kubelet(kube_client: KubeClient) -> str:
    """A Ready node whose kubelet runs pods on the local Docker engine; its name."""
    require_backend("kubelet (a Ready node)", node_ready(kube_client), HOW)
    return NODE
