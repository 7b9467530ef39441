"""TorchX's module path of the ``kubernetes_mcad`` scheduler.

It exposes the scheduler (:class:`KubernetesMCADScheduler`), its run options
(:class:`KubernetesMCADOpts`), its dry-run request (:class:`KubernetesRequest`) and the
registry's factory (:func:`create_scheduler`). The code, and the description of the scheduler,
are in :mod:`anylaunch.schedulers.kubernetes.mcad`.
"""

from anylaunch.schedulers.kubernetes.mcad import (
    KubernetesMCADOpts,
    KubernetesMCADScheduler,
    create_scheduler,
)
from anylaunch.schedulers.kubernetes.request import KubernetesRequest

__all__ = [
    "KubernetesMCADOpts",
    "KubernetesMCADScheduler",
    "KubernetesRequest",
    "create_scheduler",
]
