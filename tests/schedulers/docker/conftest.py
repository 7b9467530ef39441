"""Fixtures of the local_docker tests: the engine, its images, and a scheduler per test whose
apps are deleted afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from anylaunch.schedulers.docker_scheduler import DockerScheduler
from tests.schedulers.docker.docker_engine import (
    busybox_image,
    docker_client,
    docker_host,
    docker_registry,
    python_image,
)

__all__ = ["busybox_image", "docker_client", "docker_registry", "python_image"]


@pytest.fixture
def session_name() -> str:
    """A session of its own, so a test's cleanup only touches its own apps."""
    return f"test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def scheduler(docker_client: Any, session_name: str) -> Iterator[DockerScheduler]:
    """A local_docker scheduler on the provisioned engine; its session's apps are deleted
    (containers, networks) after the test."""
    sched = DockerScheduler(session_name, docker_host=docker_host(), start_timeout=30)
    yield sched
    for app in sched.list():
        if app.app_handle.split("/")[2] == session_name:
            sched.delete(app.app_id)
    sched.close()


@pytest.fixture
def runner(docker_client: Any, session_name: str) -> Iterator[Any]:
    """A Runner whose local_docker scheduler uses the provisioned engine; its session's apps
    are deleted after the test."""
    from anylaunch.runner import get_runner

    with get_runner(session_name, docker_host=docker_host()) as r:
        yield r
    sched = DockerScheduler(session_name, docker_host=docker_host())
    for app in sched.list():
        if app.app_handle.split("/")[2] == session_name:
            sched.delete(app.app_id)
    sched.close()
