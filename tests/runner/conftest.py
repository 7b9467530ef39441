"""Real backends for the runner tests that need them (failure categories)."""

from tests.schedulers.docker.docker_engine import busybox_image, docker_client, python_image
from tests.schedulers.kubernetes.kube_cluster import kube_client, kube_namespace, kubelet

__all__ = [
    "busybox_image",
    "docker_client",
    "kube_client",
    "kube_namespace",
    "kubelet",
    "python_image",
]
