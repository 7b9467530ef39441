"""TorchX's module path of the ``local_docker`` scheduler.

It exposes the scheduler (:class:`DockerScheduler`), its run options (:class:`DockerOpts`), its
dry-run request (:class:`DockerAppRequest`) and the registry's factory
(:func:`create_scheduler`). The code, and the description of the scheduler, are in
:mod:`anylaunch.schedulers.docker.scheduler`.
"""

from anylaunch.schedulers.docker.request import DockerAppRequest, DockerOpts
from anylaunch.schedulers.docker.scheduler import DockerScheduler, create_scheduler

__all__ = [
    "DockerAppRequest",
    "DockerOpts",
    "DockerScheduler",
    "create_scheduler",
]
