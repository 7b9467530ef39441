"""The Docker engine calls of the ``local_docker`` scheduler: connecting, images, creating,
starting, stopping and removing an app's containers, reading them back, and recording events.

Every function takes a connected ``docker.DockerClient``; the ``docker`` SDK is imported
only when a function runs (its errors are looked up through :func:`require_sdk`).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from anylaunch.schedulers.docker.request import (
    _KIND_EVENT,
    _T,
    BACKEND,
    LABEL_APP_ID,
    LABEL_APP_NAME,
    LABEL_CANCEL_GRACE,
    LABEL_EVENT,
    LABEL_EVENT_DATA,
    LABEL_KIND,
    LABEL_SESSION,
    DockerAppRequest,
    DockerContainerRequest,
    DockerEngineUnavailableError,
    DockerImageNotFoundError,
    DockerSchedulerError,
)
from anylaunch.schedulers.docker.state import _Container
from anylaunch.sdk import require_sdk

__all__ = [
    "connect",
    "create_app",
    "engine_error",
    "ensure_image",
    "in_parallel",
    "inspect_app",
    "record_event",
    "remove",
    "remove_app",
    "start",
    "stderr_tail",
    "stop",
    "summaries",
]

log: logging.Logger = logging.getLogger(__name__)


def _docker() -> Any:
    return require_sdk("docker", extra="docker", scheduler=BACKEND)


def engine_error(e: Exception) -> str:
    """The engine's own explanation of a failed call (the SDK's message otherwise).

    >>> engine_error(ValueError("no such network"))
    'no such network'
    """
    return str(getattr(e, "explanation", None) or e)


def in_parallel(fn: Callable[[_T], None], items: Sequence[_T]) -> None:
    """Calls ``fn`` on every item, several at a time (engine calls wait on the engine, not
    on us); an exception from ``fn`` is raised once all are done.

    >>> seen = []
    >>> in_parallel(seen.append, [1, 2, 3])
    >>> sorted(seen)
    [1, 2, 3]
    """
    if len(items) <= 1:
        for item in items:
            fn(item)
        return
    from concurrent.futures import ThreadPoolExecutor

    # at most the SDK's connection pool size (10), so no connection is opened and discarded
    with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
        list(pool.map(fn, items))


def connect(docker_host: str | None, shown_as: str) -> Any:
    """A client of the engine at ``docker_host`` (the SDK's default, ``$DOCKER_HOST``, for
    None), after checking that the engine answers.

    Raises:
        MissingDependencyError: the ``docker`` package is not installed.
        DockerEngineUnavailableError: no engine answers (``shown_as`` names the address).
    """
    docker = _docker()
    try:
        if docker_host:
            client = docker.DockerClient(base_url=docker_host, version="auto")
        else:
            client = docker.from_env()
        client.api.ping()
    except Exception as e:  # the SDK raises DockerException, requests' or OSError here
        raise DockerEngineUnavailableError(
            "local_docker",
            f"no Docker engine answers at {shown_as} ({e})",
            "start the engine (in this project: bash scripts/provision/10-docker.sh) or set "
            "DOCKER_HOST to a running one",
        ) from None
    return client


def ensure_image(client: Any, image: str, docker_host: str) -> None:
    """Pulls ``image`` unless the engine has it.

    Raises:
        DockerImageNotFoundError: the engine neither has nor can pull the image.
    """
    docker = _docker()
    try:
        client.api.inspect_image(image)
        return
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError as e:
        raise DockerImageNotFoundError(
            f"the engine cannot look up image {image!r}: {engine_error(e)}. Fix: check the "
            "image reference"
        ) from None
    log.info("image %s is not in the engine; pulling it", image)
    try:
        client.api.pull(image)
        client.api.inspect_image(image)
    except docker.errors.APIError as e:
        raise DockerImageNotFoundError(
            f"image {image!r} is not in the Docker engine at {docker_host} and pulling "
            f"it failed: {engine_error(e)}. Fix: build or load it into the engine (docker "
            "build / docker load / docker import), or make its registry reachable"
        ) from None


def create_app(client: Any, request: DockerAppRequest) -> None:
    """Creates the app's network and containers, then starts them all at once (only the
    first ``request.start_first`` of an array); nothing is left behind when a step fails.

    Raises:
        DockerSchedulerError: the engine refused the network (the request was scheduled
            before) or a container (its reason is quoted).
    """
    docker = _docker()
    try:
        network_id = client.api.create_network(
            request.network,
            driver="bridge",
            labels=request.network_labels,
            check_duplicate=True,  # scheduling a request twice fails here, not later
        )["Id"]
    except docker.errors.APIError as e:
        raise DockerSchedulerError(
            f"could not create network {request.network} for app {request.app_id}: "
            f"{engine_error(e)}. Fix: dry-run the app again (for a new app id)"
        ) from e
    created: list[str] = []
    refused: list[tuple[DockerContainerRequest, Exception]] = []
    for current in request.containers:
        try:
            response = client.api.create_container_from_config(current.config, name=current.name)
        except docker.errors.APIError as e:
            refused.append((current, e))
            break
        created.append(response["Id"])

    def start_one(pair: tuple[DockerContainerRequest, str]) -> None:
        try:
            client.api.start(pair[1])
        except docker.errors.APIError as e:
            refused.append((pair[0], e))

    if not refused:
        # starting is the slow part (~0.3 s each): all at once (an array: its first K)
        pairs = list(zip(request.containers, created, strict=True))
        in_parallel(start_one, pairs[: request.start_first])
    if refused:
        remove(client, created, [network_id])
        current, error = min(refused, key=lambda r: request.containers.index(r[0]))
        raise DockerSchedulerError(
            f"the engine refused container {current.name} (role {current.role!r}, replica "
            f"{current.replica_id}) of app {request.app_id}: {engine_error(error)}. Fix: "
            "adjust the role (its resources, mounts or devices) to what this engine can run"
        ) from error


def remove(client: Any, container_ids: Iterable[str], networks: Iterable[str]) -> None:
    """Removes containers (forcibly, with their anonymous volumes), then networks; what is
    gone already is skipped."""
    docker = _docker()
    for container_id in container_ids:
        with contextlib.suppress(docker.errors.NotFound):
            client.api.remove_container(container_id, force=True, v=True)
    for network in networks:
        with contextlib.suppress(docker.errors.NotFound):
            client.api.remove_network(network)


def remove_app(client: Any, app_id: str) -> None:
    """Removes every container and the network of an app (stop it first)."""
    label = f"{LABEL_APP_ID}={app_id}"
    networks = [n["Id"] for n in client.api.networks(filters={"label": label})]
    remove(client, [c.id for c in inspect_app(client, app_id)], networks)


def summaries(client: Any, app_id: str | None = None) -> list[dict[str, Any]]:
    """The engine's list entries of one app's containers (every app's for None), in one
    call."""
    label = LABEL_APP_ID if app_id is None else f"{LABEL_APP_ID}={app_id}"
    found: list[dict[str, Any]] = client.api.containers(all=True, filters={"label": label})
    return found


def inspect_app(client: Any, app_id: str) -> list[_Container]:
    """Every container of the app, inspected (start and finish times, env, ports)."""
    docker = _docker()
    containers = []
    for summary in summaries(client, app_id):
        try:
            containers.append(_Container.from_inspect(client.api.inspect_container(summary["Id"])))
        except docker.errors.NotFound:
            continue  # removed meanwhile
    return containers


def stop(client: Any, containers: Sequence[_Container], grace: float) -> None:
    """Stops containers in parallel: SIGTERM, then SIGKILL after ``grace`` seconds."""
    docker = _docker()

    def stop_one(c: _Container) -> None:
        with contextlib.suppress(docker.errors.APIError):  # gone already: fine
            client.api.stop(c.id, timeout=max(0, round(grace)))

    in_parallel(stop_one, containers)


def start(client: Any, containers: Sequence[_Container]) -> None:
    """(Re)starts containers in parallel; one the engine refuses is left stopped, with a
    warning (a later describe starts it again, see ``_Verdict.resume``)."""
    docker = _docker()

    def start_one(c: _Container) -> None:
        try:
            client.api.start(c.id)
        except docker.errors.APIError as e:
            log.warning("could not restart container %s: %s", c.name, engine_error(e))

    in_parallel(start_one, containers)


def record_event(
    client: Any, app_id: str, name: str, event: str, data: Mapping[str, Any], like: _Container
) -> bool:
    """Creates the never-started container that records ``event``; False if it exists.

    Its unique name makes the event happen once, whichever process records it first. It
    carries the app's labels of ``like`` (never its role record) and ``data`` as JSON.

    Raises:
        DockerSchedulerError: the engine refused it for another reason than the name.
    """
    docker = _docker()
    labels = {
        k: v
        for k, v in like.labels.items()
        if k in (LABEL_APP_ID, LABEL_APP_NAME, LABEL_SESSION, LABEL_CANCEL_GRACE)
    }
    labels.update(
        {
            LABEL_KIND: _KIND_EVENT,
            LABEL_EVENT: event,
            LABEL_EVENT_DATA: json.dumps(dict(data), sort_keys=True),
        }
    )
    config = {
        # the app's own image (it exists while its containers do); never started
        "Image": like.image_id,
        "Entrypoint": ["/anylaunch-event"],
        "Cmd": [],
        "Labels": labels,
        "HostConfig": {"NetworkMode": "none"},
    }
    try:
        client.api.create_container_from_config(config, name=name)
    except docker.errors.APIError as e:
        if e.status_code == 409:
            return False
        raise DockerSchedulerError(
            f"could not record the {event} of app {app_id} in the engine: "
            f"{engine_error(e)}. Fix: check the engine's health (docker info)"
        ) from e
    return True


def stderr_tail(client: Any, container_id: str, lines: int = 20) -> list[str]:
    """The last ``lines`` lines a container wrote to stderr; [] when the engine cannot say
    (best effort: a failure message stands without them)."""
    from anylaunch.schedulers.api import split_lines

    try:
        raw = client.api.logs(container_id, stdout=False, stderr=True, tail=lines)
    except Exception:
        return []
    return [line.rstrip("\n") for line in split_lines(raw.decode("utf-8", "replace"))]
