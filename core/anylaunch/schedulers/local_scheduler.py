"""TorchX's module path of the ``local_cwd`` scheduler: its public names, from
:mod:`anylaunch.schedulers.local.scheduler` (the code, and its description)."""

from anylaunch.schedulers.local.request import LocalAppRequest, LocalOpts
from anylaunch.schedulers.local.scheduler import LocalScheduler, create_scheduler

__all__ = ["LocalAppRequest", "LocalOpts", "LocalScheduler", "create_scheduler"]
