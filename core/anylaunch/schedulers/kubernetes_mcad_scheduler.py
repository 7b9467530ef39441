"""TorchX's module path of the ``kubernetes_mcad`` scheduler: its public names, from
:mod:`anylaunch.schedulers.kubernetes.mcad` (the code, and its description)."""

from anylaunch.schedulers.kubernetes.mcad import (
    KubernetesMCADOpts,
    KubernetesMCADScheduler,
    create_scheduler,
)
from anylaunch.schedulers.kubernetes.request import KubernetesRequest

__all__ = ["KubernetesMCADOpts", "KubernetesMCADScheduler", "KubernetesRequest", "create_scheduler"]
