"""TorchX's module path of the ``kubernetes`` scheduler: its public names, from
:mod:`anylaunch.schedulers.kubernetes.scheduler` (the code, and its description)."""

from anylaunch.schedulers.kubernetes.request import KubernetesRequest
from anylaunch.schedulers.kubernetes.scheduler import (
    KubernetesOpts,
    KubernetesScheduler,
    create_scheduler,
)

__all__ = ["KubernetesOpts", "KubernetesRequest", "KubernetesScheduler", "create_scheduler"]
