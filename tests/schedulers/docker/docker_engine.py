"""The Docker engine and images the tests run on, for any test directory that needs them.

``scripts/provision/10-docker.sh`` starts one dockerd per machine (socket
``/run/anylaunch-backends/docker/docker.sock``, exported as ``DOCKER_HOST``), a local registry
(``ANYLAUNCH_DOCKER_REGISTRY``, default ``127.0.0.1:5555``) and builds the images below.

Use from another test directory (e.g. Kubernetes or AWS Batch tests) by re-exporting the
fixtures in that directory's ``conftest.py``::

    from tests.schedulers.docker.docker_engine import (  # noqa: F401 (fixtures)
        busybox_image, docker_client, python_image,
    )
"""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.backends import require_backend

#: Where the provisioning script puts the engine's socket.
DEFAULT_DOCKER_HOST = "unix:///run/anylaunch-backends/docker/docker.sock"
#: What brings the engine (and images) up.
PROVISION = "bash scripts/provision/10-docker.sh (source it to export DOCKER_HOST)"
#: busybox-static with every applet (sh, nc, wget, httpd, ...); made by the provisioning script.
BUSYBOX_IMAGE = "busybox:latest"
#: Debian bookworm minbase with python3 (Python 3.11); made by the provisioning script.
PYTHON_IMAGE = "anylaunch-python:3.11"
DEFAULT_REGISTRY = "127.0.0.1:5555"


def docker_host() -> str:
    """``$DOCKER_HOST``, else the provisioned socket."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


def connect() -> Any | None:
    """A connected ``docker.DockerClient``, or None when no engine answers."""
    import docker

    try:
        client = docker.DockerClient(base_url=docker_host(), version="auto", timeout=60)
        client.api.ping()
    except Exception:
        return None
    return client


def require_engine() -> Any:
    """The engine's client; skips the test (fails it in CI) when there is no engine."""
    client = connect()
    require_backend("dockerd", client is not None, PROVISION)
    return client


def require_image(client: Any, image: str) -> str:
    """``image`` after checking the engine has it (skip locally, fail in CI)."""
    import docker

    try:
        client.api.inspect_image(image)
        found = True
    except docker.errors.ImageNotFound:
        found = False
    require_backend(f"docker image {image}", found, PROVISION)
    return image


def registry_address() -> str:
    """The local registry's ``host:port``."""
    return os.environ.get("ANYLAUNCH_DOCKER_REGISTRY") or DEFAULT_REGISTRY


def require_registry() -> str:
    """The local registry's ``host:port`` after checking it answers."""
    address = registry_address()
    try:
        with urllib.request.urlopen(f"http://{address}/v2/", timeout=5) as response:
            up = response.status == 200
    except OSError:
        up = False
    require_backend(f"docker registry at {address}", up, PROVISION)
    return address


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A client of the provisioned engine (the test skips, or fails in CI, without one)."""
    client = require_engine()
    yield client
    client.close()


@pytest.fixture(scope="session")
def busybox_image(docker_client: Any) -> str:
    """``busybox:latest``, present in the engine."""
    return require_image(docker_client, BUSYBOX_IMAGE)


@pytest.fixture(scope="session")
def python_image(docker_client: Any) -> str:
    """``anylaunch-python:3.11``, present in the engine."""
    return require_image(docker_client, PYTHON_IMAGE)


@pytest.fixture(scope="session")
def docker_registry(docker_client: Any) -> str:
    """``host:port`` of the local registry the engine can push to."""
    return require_registry()
