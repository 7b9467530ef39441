"""TorchX's module path of the ``slurm`` scheduler.

It exposes the scheduler (:class:`SlurmScheduler`), its run options (:class:`SlurmOpts`), its
dry-run request (:class:`SlurmBatchRequest`) and the registry's factory
(:func:`create_scheduler`). The code, and the description of the scheduler, are in
:mod:`anylaunch.schedulers.slurm.scheduler`.
"""

from anylaunch.schedulers.slurm.request import SlurmBatchRequest, SlurmOpts
from anylaunch.schedulers.slurm.scheduler import SlurmScheduler, create_scheduler

__all__ = [
    "SlurmBatchRequest",
    "SlurmOpts",
    "SlurmScheduler",
    "create_scheduler",
]
