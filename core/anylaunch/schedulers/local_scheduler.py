"""TorchX's module path of the ``local_cwd`` scheduler.

It exposes the scheduler (:class:`LocalScheduler`), its run options (:class:`LocalOpts`), its
dry-run request (:class:`LocalAppRequest`) and the registry's factory
(:func:`create_scheduler`). The code, and the description of the scheduler, are in
:mod:`anylaunch.schedulers.local.scheduler`.
"""

from anylaunch.schedulers.local.request import LocalAppRequest, LocalOpts
from anylaunch.schedulers.local.scheduler import LocalScheduler, create_scheduler

__all__ = [
    "LocalAppRequest",
    "LocalOpts",
    "LocalScheduler",
    "create_scheduler",
]
