"""TorchX's module path of the ``local_docker`` scheduler: its public names, from
:mod:`anylaunch.schedulers.docker.scheduler` (the code, and its description)."""

from anylaunch.schedulers.docker.request import DockerAppRequest, DockerOpts
from anylaunch.schedulers.docker.scheduler import DockerScheduler, create_scheduler

__all__ = ["DockerAppRequest", "DockerOpts", "DockerScheduler", "create_scheduler", "has_docker"]


def has_docker(docker_host: str | None = None) -> bool:
    """True if the ``docker`` package is installed and a Docker engine answers (TorchX's
    ``has_docker``): the engine at ``docker_host``, by default the SDK's (``$DOCKER_HOST``).

    >>> has_docker("unix:///nonexistent/docker.sock")
    False

    Args:
        docker_host: the engine's address, e.g. ``unix:///var/run/docker.sock``
    """
    from anylaunch.schedulers.docker.engine import connect
    from anylaunch.schedulers.docker.request import DockerEngineUnavailableError
    from anylaunch.sdk import MissingDependencyError

    try:
        client = connect(docker_host, docker_host or "$DOCKER_HOST")
    except (MissingDependencyError, DockerEngineUnavailableError):
        return False
    client.close()
    return True
