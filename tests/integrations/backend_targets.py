"""One small real app on each real backend, for the Airflow, Prefect and Dagster tests.

A test that takes the ``backend`` fixture runs once per backend (local_docker, slurm,
aws_batch, kubernetes) and gets a :class:`Target`: the scheduler, the run options that reach
the provisioned backend, a session of its own, and the app to launch there. The backends come
from the fixtures of their scheduler tests, so a missing one skips locally and fails under
CI=true. Apps the test left on docker or kubernetes (containers, Jobs) are deleted after it.

pytest finds fixtures by name in the test module, so a module imports ``backend`` (defined
here as ``backend_fixture``, so the test's argument does not shadow an import) together with
the backends' own fixtures it builds on::

    from tests.integrations.backend_targets import (  # noqa: F401 (fixtures)
        backend_fixture, batch_docker, batch_queue, busybox_image, docker_client, ...
    )
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from anylaunch.specs import AppDef, Resource, Role, macros, parse_app_handle
from tests.schedulers.aws.moto_env import batch_docker, batch_queue, moto_aws, moto_server
from tests.schedulers.docker.docker_engine import BUSYBOX_IMAGE, busybox_image, docker_client
from tests.schedulers.kubernetes.kube_cluster import (
    kube_client,
    kube_namespace,
    kubeconfig,
    kubelet,
)
from tests.schedulers.slurm.cluster import slurm_cluster

__all__ = [
    "BACKENDS",
    "Target",
    "app_dict",
    "backend_fixture",
    "batch_docker",
    "batch_queue",
    "busybox_image",
    "docker_client",
    "hello_app",
    "kube_client",
    "kube_namespace",
    "kubelet",
    "log_line",
    "moto_aws",
    "moto_server",
    "slurm_cluster",
]

#: The real backends every orchestrator runs an app on.
BACKENDS = ("local_docker", "slurm", "aws_batch", "kubernetes")
#: The app's only role.
ROLE = "hello"
# small enough for every backend: kubernetes requests no cpu (the test node has 2 cores and
# other tests' pods), aws_batch needs cpu and memory, slurm runs the host's sh (no image)
_RESOURCES = {
    "local_docker": Resource(cpu=1, gpu=0, memMB=128),
    "slurm": Resource(cpu=1, gpu=0, memMB=128),
    "aws_batch": Resource(cpu=1, gpu=0, memMB=128),
    "kubernetes": Resource(cpu=0, gpu=0, memMB=128),
}
_IMAGES = {
    "local_docker": BUSYBOX_IMAGE,
    "slurm": "",
    "aws_batch": BUSYBOX_IMAGE,
    "kubernetes": BUSYBOX_IMAGE,
}
#: Where apps leave something behind once they ended (deleted after the test).
_DELETE_AFTER = ("local_docker", "kubernetes")


def hello_app(scheduler: str) -> AppDef:
    """The app launched on ``scheduler``: one replica printing one line naming its app id
    (a macro the scheduler fills in), so the line proves which app wrote it.

    >>> hello_app("slurm").roles[0].args
    ['-c', 'echo on slurm: app ${app_id}']
    """
    role = Role(
        ROLE,
        image=_IMAGES[scheduler],
        entrypoint="sh",
        args=["-c", f"echo on {scheduler}: app {macros.app_id}"],
        resource=Resource.copy(_RESOURCES[scheduler]),
    )
    return AppDef("hello", [role])


def app_dict(scheduler: str) -> dict[str, Any]:
    """:func:`hello_app` as the plain dict an AppDef's dict form is (for Prefect blocks)."""
    (role,) = hello_app(scheduler).roles
    resource = role.resource
    return {
        "name": "hello",
        "roles": [
            {
                "name": role.name,
                "image": role.image,
                "entrypoint": role.entrypoint,
                "args": list(role.args),
                "resource": {"cpu": resource.cpu, "gpu": resource.gpu, "memMB": resource.memMB},
            }
        ],
    }


def log_line(app_handle: str) -> str:
    """The line the app of ``app_handle`` prints, as orchestrators log it (``role/replica``)."""
    scheduler, _, app_id = parse_app_handle(app_handle)
    return f"{ROLE}/0 on {scheduler}: app {app_id}"


@dataclass
class Target:
    """Where a test launches its app: scheduler, run options and a session of its own."""

    scheduler: str
    cfg: dict[str, Any] = field(default_factory=dict)
    session: str = field(default_factory=lambda: f"orch-{uuid.uuid4().hex[:8]}")

    def app(self) -> AppDef:
        return hello_app(self.scheduler)

    def app_dict(self) -> dict[str, Any]:
        return app_dict(self.scheduler)

    def assert_launched_here(self, app_handle: str) -> None:
        """The handle names this target's scheduler and session."""
        parsed = parse_app_handle(app_handle)
        assert (parsed.scheduler_backend, parsed.session_name) == (self.scheduler, self.session)

    def delete_apps(self) -> None:
        """Deletes this session's apps (only ours: list() shows every session's)."""
        from anylaunch.runner import get_runner

        with get_runner(self.session) as runner:
            for app in runner.list(self.scheduler, self.cfg):
                if parse_app_handle(app.app_handle).session_name == self.session:
                    runner.delete(app.app_handle)


def _target(
    scheduler: str,
    request: pytest.FixtureRequest,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Target:
    """The target of ``scheduler`` once its backend is there (skip/fail otherwise)."""
    if scheduler == "local_docker":
        request.getfixturevalue("busybox_image")  # the engine, with the image
        return Target(scheduler)
    if scheduler == "slurm":
        request.getfixturevalue("slurm_cluster")  # sets SLURM_CONF
        # a job_dir both nodes see (the app's output files go there)
        return Target(scheduler, {"job_dir": str(tmp_path / "slurm-job")})
    if scheduler == "aws_batch":
        request.getfixturevalue("moto_aws")  # points boto3's standard chain at moto
        request.getfixturevalue("batch_docker")  # moto runs the jobs as containers
        return Target(scheduler, {"queue": request.getfixturevalue("batch_queue")})
    if scheduler == "kubernetes":
        request.getfixturevalue("kubelet")  # a node that runs pods
        config = kubeconfig()
        assert config is not None  # kubelet found the cluster through it
        monkeypatch.setenv("KUBECONFIG", config)
        return Target(scheduler, {"namespace": request.getfixturevalue("kube_namespace")})
    raise AssertionError(f"no target for {scheduler}")


@pytest.fixture(name="backend", params=BACKENDS)
def backend_fixture(
    request: pytest.FixtureRequest, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Target]:
    """A real backend to launch :func:`hello_app` on (one test run per backend)."""
    target = _target(request.param, request, tmp_path, monkeypatch)
    yield target
    if target.scheduler in _DELETE_AFTER:
        target.delete_apps()
