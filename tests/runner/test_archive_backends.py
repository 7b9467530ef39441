"""The archive on every real backend of the suite: an app ends, the backend is made to forget
it with its own tool, and a new process still gets its outcome, logs and definition.

For each backend (local_cwd, local_docker, Kubernetes, Slurm, AWS Batch on moto, the LSF
stand-in) an app that prints to stdout and stderr (its secret env value too) and exits 3 is
run to its end by a Runner configured (``ANYLAUNCH_ARCHIVE_URL``) to archive it, then removed
the way an operator or the backend itself removes it:

- local_cwd: its state directory is deleted;
- local_docker: ``docker rm`` of its containers (and its network);
- Kubernetes: its Job is deleted (as a TTL or ``kubectl delete job`` does), pods with it;
- Slurm: its log files are deleted (slurmdbd's accounting still has the job);
- AWS Batch: its CloudWatch log stream is deleted (moto never forgets a job);
- LSF: the stand-in's job records are purged (LSF forgets a job after ``CLEAN_PERIOD``)
  and its output files deleted.

Then the real CLI, in a new process, says ``status`` (the final state; "from the archive"
where the backend forgot the app), ``log`` (every line) and ``describe`` (the definition,
secret masked). The secret value is in no file of the archive. Every backend runs with a
``file://`` and with an ``s3://`` archive (S3 on moto).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import anylaunch.specs as specs
from anylaunch.runner import get_runner
from anylaunch.runner.archive import ARCHIVE_URL_ENV
from anylaunch.specs import AppState

# fixtures asked for by name (request.getfixturevalue), beside tests/runner/conftest.py's
from tests.schedulers.aws.moto_env import (  # noqa: F401
    batch_docker,
    batch_queue,
    moto_aws,
    moto_server,
    s3_prefix,
)
from tests.schedulers.lsf.conftest import lsf_cluster  # noqa: F401
from tests.schedulers.slurm.cluster import slurm_cluster  # noqa: F401

WAIT_S = 180.0  # a safety net against a hung app, not a measurement
CLI_TIMEOUT_S = 120
ROLE = "w"
# every line the app prints; its secret goes to both streams
SCRIPT = (
    "echo out-1; echo err-1 >&2; "
    'echo "token=$API_TOKEN"; echo "token=$API_TOKEN" >&2; '
    "echo out-2; echo err-2 >&2; exit 3"
)
LINES = ["out-1", "err-1", "out-2", "err-2", "token=***"]


@dataclass
class Backend:
    """A backend as this test uses it: how to run the app there and how to make it forget."""

    scheduler: str
    image: str
    cfg: dict[str, Any]
    forget: Callable[[str], None]
    #: whether the backend itself no longer knows the app once ``forget`` ran (Slurm's
    #: accounting and moto's Batch keep a job's record: only its logs are gone there)
    forgets_app: bool = True


def _app_id(handle: str) -> str:
    return handle.rsplit("/", 1)[1]


# --- the backends -------------------------------------------------------------------------------


def _local_cwd(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    state = Path(os.environ["ANYLAUNCH_LOCAL_STATE_DIR"])
    return Backend("local_cwd", str(tmp_path), {}, lambda handle: shutil.rmtree(state))


def _local_docker(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    from anylaunch.schedulers.docker.request import LABEL_APP_ID

    client = request.getfixturevalue("docker_client")
    image = request.getfixturevalue("busybox_image")

    def forget(handle: str) -> None:
        app_id = _app_id(handle)
        containers = client.containers.list(all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"})
        assert containers, f"no container of {app_id}"
        for container in containers:  # docker rm
            container.remove(force=True)
        for network in client.networks.list(names=[app_id]):
            network.remove()

    return Backend("local_docker", image, {}, forget)


def _kubernetes(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    from anylaunch.schedulers.kubernetes.names import LABEL_APP_ID
    from tests.schedulers.kubernetes.kube_cluster import BUSYBOX, wait_for

    client = request.getfixturevalue("kube_client")
    namespace = request.getfixturevalue("kube_namespace")
    request.getfixturevalue("kubelet")

    def forget(handle: str) -> None:
        name = _app_id(handle).split(":", 1)[1]
        selector = f"{LABEL_APP_ID}={name}"
        jobs = list(client.list("batch/v1", "Job", namespace, selector))
        assert jobs, f"no Job of {name}"
        for job in jobs:  # what a TTL (or kubectl delete job) does: the Job and its pods
            client.delete("batch/v1", "Job", namespace, job["metadata"]["name"], "Background")
        wait_for(
            lambda: not list(client.list("v1", "Pod", namespace, selector)),
            WAIT_S,
            f"the pods of {name} to be deleted",
        )

    return Backend("kubernetes", BUSYBOX, {"namespace": namespace}, forget)


def _slurm(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    request.getfixturevalue("slurm_cluster")
    job_dir = tmp_path / "job"

    def forget(handle: str) -> None:
        logs = job_dir / f"slurm-{_app_id(handle)}"
        assert logs.is_dir(), logs
        shutil.rmtree(logs)  # a purged cluster disk

    return Backend("slurm", ".", {"job_dir": str(job_dir)}, forget, forgets_app=False)


def _aws_batch(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    from tests.schedulers.aws.moto_env import BATCH_IMAGE, boto3_client

    request.getfixturevalue("moto_aws")
    request.getfixturevalue("batch_docker")
    queue = request.getfixturevalue("batch_queue")

    def forget(handle: str) -> None:
        name = _app_id(handle).split(":", 1)[1]
        batch, logs = boto3_client("batch"), boto3_client("logs")
        jobs = batch.list_jobs(jobQueue=queue, filters=[{"name": "JOB_NAME", "values": [name]}])
        ids = [j["jobId"] for j in jobs["jobSummaryList"] if j["jobName"] == name]
        assert len(ids) == 1, jobs
        job = batch.describe_jobs(jobs=ids)["jobs"][0]
        stream = job["container"]["logStreamName"]
        group = (
            job["container"]
            .get("logConfiguration", {})
            .get("options", {})
            .get("awslogs-group", "/aws/batch/job")
        )
        logs.delete_log_stream(logGroupName=group, logStreamName=stream)  # an expired stream

    return Backend("aws_batch", BATCH_IMAGE, {"queue": queue}, forget, forgets_app=False)


def _lsf(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    cluster = request.getfixturevalue("lsf_cluster")

    def forget(handle: str) -> None:
        app_id = _app_id(handle)
        records = [j for j in cluster.jobs() if app_id in j["name"]]
        assert records, f"no LSF job of {app_id} in {cluster.jobs()}"
        for job in records:  # past CLEAN_PERIOD: mbatchd forgets the job
            (cluster.state_dir / "jobs" / f"{job['key']}.json").unlink()
        shutil.rmtree(cluster.jobdir / app_id)

    return Backend("lsf", ".", {"jobdir": str(cluster.jobdir)}, forget)


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Backend]] = {
    "local_cwd": _local_cwd,
    "local_docker": _local_docker,
    "kubernetes": _kubernetes,
    "slurm": _slurm,
    "aws_batch": _aws_batch,
    "lsf": _lsf,
}
# "option": the archive is the run's ``archive_url`` option (no archive configured while it
# runs); the new process is told where records are
CASES = [(name, kind) for name in BACKENDS for kind in ("file", "s3")] + [("local_cwd", "option")]


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This test's own local state dir and anylaunch home, no user config."""
    from tests.schedulers.kubernetes.kube_cluster import kubeconfig

    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ANYLAUNCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no user-level .anylaunchconfig
    for name in ("ANYLAUNCHCONFIG", "ANYLAUNCH_DEBUG", "ANYLAUNCH_PARENT_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    if kubeconfig() is not None:
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig()))
    yield


def _archive_url(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if kind == "s3":
        return str(request.getfixturevalue("s3_prefix"))
    return (tmp_path / "archive").as_uri()


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI in a new process, with this test's environment (archive URL included)."""
    return subprocess.run(
        [sys.executable, "-m", "anylaunch.cli.main", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )


def _archived_files(url: str) -> dict[str, str]:
    """Every file of the archive (path -> text)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    fs.invalidate_cache()
    return {path: fs.cat_file(path).decode(errors="replace") for path in fs.find(root)}


@pytest.mark.parametrize(("backend_name", "archive"), CASES, ids=[f"{b}-{a}" for b, a in CASES])
def test_a_forgotten_app_is_answered_from_the_archive_by_a_new_process(
    backend_name: str,
    archive: str,
    env: None,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = BACKENDS[backend_name](request, tmp_path)
    url = _archive_url(archive, request, tmp_path)
    cfg = dict(backend.cfg)
    if archive == "option":
        cfg["archive_url"] = url
        monkeypatch.delenv(ARCHIVE_URL_ENV, raising=False)
    else:
        monkeypatch.setenv(ARCHIVE_URL_ENV, url)
    secret = f"tok-{uuid.uuid4().hex}"
    role = specs.Role(
        ROLE,
        backend.image,
        entrypoint="sh",
        args=["-c", SCRIPT],
        env={"API_TOKEN": secret, "LR": "0.1"},
        resource=specs.Resource(cpu=1, gpu=0, memMB=64),
    )
    with get_runner(f"ar{uuid.uuid4().hex[:6]}") as runner:
        handle = runner.run(specs.AppDef("archived", [role]), backend.scheduler, cfg)
        try:
            status = runner.wait(handle, wait_interval=0.5, timeout=WAIT_S)
            assert status is not None and status.state == AppState.FAILED, status
            backend.forget(handle)
            monkeypatch.setenv(ARCHIVE_URL_ENV, url)
            _check_answers_from_a_new_process(backend, handle, secret, tmp_path / "cli")
        finally:  # whatever the backend still has of it (nothing once forgotten)
            with contextlib.suppress(Exception):
                runner.delete(handle)
    files = _archived_files(url)
    assert any(path.endswith("/status.json") for path in files), sorted(files)
    assert [path for path, text in files.items() if secret in text] == []
    # what the app printed is there, its secret masked
    assert any("token=***" in text for path, text in files.items() if "/logs/" in path), files


def _check_answers_from_a_new_process(
    backend: Backend, handle: str, secret: str, cwd: Path
) -> None:
    cwd.mkdir()
    shown = _cli("status", handle, cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    assert "FAILED" in shown.stdout, shown.stdout
    if backend.forgets_app:
        assert "from the archive at" in shown.stdout, shown.stdout

    logged = _cli("log", handle, cwd=cwd)
    assert logged.returncode == 0, logged.stderr
    printed = logged.stdout.splitlines()
    for line in LINES:
        assert f"{ROLE}/0 {line}" in printed, (line, logged.stdout)

    described = _cli("describe", "--json", handle, cwd=cwd)
    assert described.returncode == 0, described.stderr
    roles = json.loads(described.stdout)["AppDef"]["roles"]
    assert [r["name"] for r in roles] == [ROLE], roles
    if backend.forgets_app:  # the archived definition: the role whole, its secret masked
        assert roles[0]["args"] == ["-c", SCRIPT], roles
        assert roles[0]["env"]["API_TOKEN"] == "***" and roles[0]["env"]["LR"] == "0.1", roles

    for out in (shown, logged, described):
        assert secret not in out.stdout + out.stderr
