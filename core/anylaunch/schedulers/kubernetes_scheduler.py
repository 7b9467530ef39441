"""TorchX's module path of the ``kubernetes`` scheduler.

It exposes the scheduler (:class:`KubernetesScheduler`), its run options
(:class:`KubernetesOpts`), its dry-run request (:class:`KubernetesRequest`) and the registry's
factory (:func:`create_scheduler`). The code, and the description of the scheduler, are in
:mod:`anylaunch.schedulers.kubernetes.scheduler`.
"""

from anylaunch.schedulers.kubernetes.request import KubernetesRequest
from anylaunch.schedulers.kubernetes.scheduler import (
    KubernetesOpts,
    KubernetesScheduler,
    create_scheduler,
)

__all__ = [
    "KubernetesOpts",
    "KubernetesRequest",
    "KubernetesScheduler",
    "create_scheduler",
]
