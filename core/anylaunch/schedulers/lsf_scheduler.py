"""TorchX's module path of the ``lsf`` scheduler.

It exposes the scheduler (:class:`LsfScheduler`), its run options (:class:`LsfOpts`), its dry-
run request (:class:`LsfRequest`) and the registry's factory (:func:`create_scheduler`). The
code, and the description of the scheduler, are in :mod:`anylaunch.schedulers.lsf.scheduler`.
"""

from anylaunch.schedulers.lsf.names import LsfOpts, LsfRequest
from anylaunch.schedulers.lsf.scheduler import LsfScheduler, create_scheduler

__all__ = [
    "LsfOpts",
    "LsfRequest",
    "LsfScheduler",
    "create_scheduler",
]
