"""TorchX's module path of the ``slurm`` scheduler: its public names, from
:mod:`anylaunch.schedulers.slurm.scheduler` (the code, and its description)."""

from anylaunch.schedulers.slurm.request import SlurmBatchRequest, SlurmOpts
from anylaunch.schedulers.slurm.scheduler import SlurmScheduler, create_scheduler

__all__ = ["SlurmBatchRequest", "SlurmOpts", "SlurmScheduler", "create_scheduler"]
