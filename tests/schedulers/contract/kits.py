"""One kit per scheduler: how the contract suite reaches its real backend and what the backend
can show. Every kit's backend is the one its own scheduler tests use (a missing backend skips
locally and fails under CI=true).

What cannot run here is played at one seam only: no MCAD controller exists for Kubernetes
1.20, so the suite patches the AppWrapper's status as MCAD would; moto completes SageMaker
training jobs at once, so the SageMaker kit never holds a running app.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from anylaunch.schedulers import get_scheduler_factory
from anylaunch.schedulers.api import Scheduler, Stream
from anylaunch.specs import AppDef, Resource, Role

#: The role every contract app has.
ROLE = "contract"
#: What the succeeding app prints.
GREETING = "hello from the contract suite"
SAGEMAKER_CFG = {
    "role_arn": "arn:aws:iam::123456789012:role/sagemaker",
    "output_path": "s3://anylaunch-test/out/",
}
SAGEMAKER_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainer:1"

#: Every scheduler, each on its real backend (or, for LSF, a contract-enforcing fake).
SCHEDULERS = (
    "local_cwd",
    "local_docker",
    "slurm",
    "lsf",
    "kubernetes",
    "kubernetes_mcad",
    "aws_batch",
    "aws_sagemaker",
)


@dataclass
class Kit:
    """A scheduler on its real backend, as the contract suite drives it."""

    name: str
    scheduler: Scheduler[Any]
    cfg: dict[str, Any]
    image: str
    resource: Resource
    #: the backend runs the app's command for real (exit codes, output, a long-running app)
    runs: bool = True
    #: its output can be read back through log_iter
    logs: bool = True
    #: describe returns None once the app was deleted
    delete_forgets: bool = True
    #: plays the missing controller: called with (app_id, state name) to move the app on
    drive: Callable[[str, str], None] | None = None
    #: an app id of the backend's form that names no app, made from a real one
    unknown: Callable[[str], str] = field(default=lambda app_id: f"{app_id[:-4]}zzzz")

    @property
    def streams(self) -> tuple[Stream, ...]:
        return self.scheduler.log_streams

    def app(self, script: str) -> AppDef:
        """One replica running ``sh -c script``."""
        if self.name == "aws_sagemaker":
            role = Role(
                ROLE,
                SAGEMAKER_IMAGE,
                entrypoint="python",
                args=["-c", script],
                resource=self.resource,
            )
        else:
            role = Role(
                ROLE, self.image, entrypoint="sh", args=["-c", script], resource=self.resource
            )
        return AppDef("contract", [role])


def _scheduler(name: str, session: str, **params: Any) -> Scheduler[Any]:
    return get_scheduler_factory(name)(session, **params)


def make_kit(
    name: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Kit:
    """The kit of scheduler ``name`` once its backend is there."""
    session = f"contract-{uuid.uuid4().hex[:8]}"
    small = Resource(cpu=1, gpu=0, memMB=128)
    if name == "local_cwd":
        sched = _scheduler(name, session, state_dir=str(tmp_path / "state"))
        return Kit(name, sched, {"log_dir": str(tmp_path / "logs")}, str(tmp_path), small)
    if name == "local_docker":
        from tests.schedulers.docker.docker_engine import BUSYBOX_IMAGE, docker_host

        request.getfixturevalue("busybox_image")
        sched = _scheduler(name, session, docker_host=docker_host())
        return Kit(name, sched, {}, BUSYBOX_IMAGE, small)
    if name == "slurm":
        request.getfixturevalue("slurm_cluster")  # sets SLURM_CONF

        def unknown_job(app_id: str) -> str:
            return str(int(app_id.split("+")[0]) + 900_000)

        return Kit(
            name,
            _scheduler(name, session),
            {"job_dir": str(tmp_path / "slurm-job")},
            "",
            small,
            delete_forgets=False,  # Slurm keeps finished jobs for MinJobAge / in accounting
            unknown=unknown_job,
        )
    if name == "lsf":
        cluster = request.getfixturevalue("lsf_cluster")  # stand-ins on PATH
        return Kit(
            name,
            _scheduler(name, session),
            {"jobdir": str(cluster.jobdir)},
            ".",
            small,
            delete_forgets=False,  # LSF keeps finished jobs in its history (CLEAN_PERIOD)
        )
    if name in ("kubernetes", "kubernetes_mcad"):
        from tests.schedulers.docker.docker_engine import BUSYBOX_IMAGE
        from tests.schedulers.kubernetes.kube_cluster import kubeconfig

        request.getfixturevalue("kubelet")  # a node that runs pods
        config = kubeconfig()
        assert config is not None
        monkeypatch.setenv("KUBECONFIG", config)
        namespace = request.getfixturevalue("kube_namespace")
        cfg = {"namespace": namespace}
        sched = _scheduler(name, session)
        # the test node has 2 cores shared with other tests' pods: request no cpu
        resource = Resource(cpu=0, gpu=0, memMB=128)
        if name == "kubernetes":
            return Kit(name, sched, cfg, BUSYBOX_IMAGE, resource)
        from anylaunch.schedulers.kubernetes.mcad import MCAD_API_VERSION

        client = request.getfixturevalue("kube_client")

        def play_mcad(app_id: str, state: str) -> None:
            # MCAD's CRD has no status subresource: MCAD patches the object itself
            name_ = app_id.split(":", 1)[1]
            client.patch(
                MCAD_API_VERSION,
                "AppWrapper",
                namespace,
                name_,
                {"status": {"state": state, "message": f"contract: {state}"}},
            )

        return Kit(
            name, sched, cfg, BUSYBOX_IMAGE, resource, runs=False, logs=False, drive=play_mcad
        )
    if name == "aws_batch":
        from tests.schedulers.docker.docker_engine import BUSYBOX_IMAGE

        request.getfixturevalue("moto_aws")
        request.getfixturevalue("batch_docker")  # moto runs the jobs as containers
        queue = request.getfixturevalue("batch_queue")
        return Kit(
            name,
            _scheduler(name, session),
            {"queue": queue},
            BUSYBOX_IMAGE,
            small,
            delete_forgets=False,  # Batch keeps ended jobs (at least 7 days on AWS)
        )
    if name == "aws_sagemaker":
        from anylaunch.specs import named_resources

        request.getfixturevalue("moto_aws")
        return Kit(
            name,
            _scheduler(name, session),
            dict(SAGEMAKER_CFG),
            SAGEMAKER_IMAGE,
            named_resources["aws_m5.xlarge"],
            runs=False,  # moto completes a training job at once, without running it
            logs=False,
            delete_forgets=False,  # training jobs cannot be deleted on SageMaker
        )
    raise AssertionError(f"no kit for {name}")
