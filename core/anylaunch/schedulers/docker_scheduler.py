"""TorchX's module path of the ``local_docker`` scheduler: its public names, from
:mod:`anylaunch.schedulers.docker.scheduler` (the code, and its description)."""

from anylaunch.schedulers.docker.request import DockerAppRequest, DockerOpts
from anylaunch.schedulers.docker.scheduler import DockerScheduler, create_scheduler

__all__ = ["DockerAppRequest", "DockerOpts", "DockerScheduler", "create_scheduler"]
