"""TorchX's module path of the ``lsf`` scheduler: its public names, from
:mod:`anylaunch.schedulers.lsf.scheduler` (the code, and its description)."""

from anylaunch.schedulers.lsf.names import LsfOpts, LsfRequest
from anylaunch.schedulers.lsf.scheduler import LsfScheduler, create_scheduler

__all__ = ["LsfOpts", "LsfRequest", "LsfScheduler", "create_scheduler"]
