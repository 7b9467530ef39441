"""The moto server (scripts/provision/40-moto.sh) as pytest fixtures, for any test directory.

Import the fixtures into a test module or conftest.py to use them there::

    from tests.schedulers.aws.moto_env import batch_docker, batch_queue, moto_aws  # noqa: F401

- ``moto_aws`` (per test): AWS_ENDPOINT_URL, fake credentials and the region set in the
  environment for the test only, so boto3's standard chain (and so the schedulers) reach moto;
  yields the endpoint URL. Skips locally / fails in CI when the server is not running.
- ``batch_queue`` (per session): a Batch compute environment and job queue; yields the queue.
- ``batch_docker``: additionally requires that moto runs Batch jobs as real containers (the
  Docker engine from 10-docker.sh, with the ``busybox:latest`` image).
- ``s3_prefix`` (per test): an empty ``s3://`` prefix in a bucket on moto's S3. With the
  environment of ``moto_aws`` (``AWS_ENDPOINT_URL``, which botocore honours and so s3fs,
  through aiobotocore) the plain URL works in this process and in any process started with
  that environment: nothing endpoint-specific goes into the URL.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.backends import require_backend

HOW = "bash scripts/provision/40-moto.sh (after scripts/provision/10-docker.sh for Batch jobs)"
DEFAULT_URL = "http://127.0.0.1:15000"
MOTO_DOCKER_HOST_FILE = "/run/anylaunch-backends/moto/docker_host"
QUEUE = "anylaunch-test-queue"
COMPUTE_ENV = "anylaunch-test-ce"
BATCH_IMAGE = "busybox:latest"
S3_BUCKET = "anylaunch-test"


def moto_url() -> str:
    """Where the moto server listens (``$ANYLAUNCH_MOTO_URL``, else the provisioned default)."""
    return os.environ.get("ANYLAUNCH_MOTO_URL", DEFAULT_URL).rstrip("/")


def aws_settings() -> dict[str, str]:
    """The environment that points boto3's standard chain at moto."""
    return {
        "AWS_ENDPOINT_URL": moto_url(),
        "AWS_ACCESS_KEY_ID": os.environ.get("ANYLAUNCH_MOTO_ACCESS_KEY_ID", "testing"),
        "AWS_SECRET_ACCESS_KEY": os.environ.get("ANYLAUNCH_MOTO_SECRET_ACCESS_KEY", "testing"),
        "AWS_DEFAULT_REGION": os.environ.get("ANYLAUNCH_MOTO_REGION", "us-east-1"),
    }


def moto_running() -> bool:
    """True if the moto server answers."""
    try:
        with urllib.request.urlopen(f"{moto_url()}/moto-api/data.json", timeout=3):
            return True
    except OSError:
        return False


def moto_runs_containers() -> bool:
    """True if moto was started with a reachable Docker engine that has the Batch test image."""
    docker_host = os.environ.get("DOCKER_HOST", "")
    try:
        with open(MOTO_DOCKER_HOST_FILE) as f:
            moto_docker_host = f.read().strip()
    except OSError:
        moto_docker_host = ""
    if not docker_host or moto_docker_host != docker_host:
        return False
    try:
        import docker

        client = docker.from_env()
        try:
            client.images.get(BATCH_IMAGE)
        finally:
            client.close()
    except Exception:
        return False
    return True


def boto3_client(service: str) -> Any:
    """A boto3 client for moto with explicit settings (touches no environment)."""
    import boto3

    settings = aws_settings()
    return boto3.session.Session(
        aws_access_key_id=settings["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=settings["AWS_SECRET_ACCESS_KEY"],
        region_name=settings["AWS_DEFAULT_REGION"],
    ).client(service, endpoint_url=settings["AWS_ENDPOINT_URL"])


def ensure_batch_queue(queue: str = QUEUE, compute_env: str = COMPUTE_ENV) -> str:
    """Creates (once) an IAM service role, an EC2 compute environment and a job queue."""
    batch = boto3_client("batch")
    if batch.describe_job_queues(jobQueues=[queue])["jobQueues"]:
        return queue
    iam = boto3_client("iam")
    try:
        role_arn = iam.create_role(
            RoleName="anylaunch-test-batch", AssumeRolePolicyDocument=json.dumps({})
        )["Role"]["Arn"]
    except iam.exceptions.EntityAlreadyExistsException:
        role_arn = iam.get_role(RoleName="anylaunch-test-batch")["Role"]["Arn"]
    # another test run sharing the server may create these at the same time
    with contextlib.suppress(batch.exceptions.ClientException):
        batch.create_compute_environment(
            computeEnvironmentName=compute_env,
            type="UNMANAGED",
            state="ENABLED",
            serviceRole=role_arn,
        )
    with contextlib.suppress(batch.exceptions.ClientException):
        batch.create_job_queue(
            jobQueueName=queue,
            state="ENABLED",
            priority=1,
            computeEnvironmentOrder=[{"order": 1, "computeEnvironment": compute_env}],
        )
    if not batch.describe_job_queues(jobQueues=[queue])["jobQueues"]:
        pytest.fail(f"moto did not create the Batch job queue {queue}")
    return queue


def ensure_bucket(bucket: str = S3_BUCKET) -> str:
    """Creates (once) an S3 bucket on moto; returns its name."""
    s3 = boto3_client("s3")
    # another test run sharing the server may create it at the same time
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=bucket)
    return bucket


def set_batch_job_transition(transition: dict[str, Any] | None) -> None:
    """Sets (or with None, unsets) how moto moves Batch jobs between states (server-wide)."""
    action = "set-transition" if transition is not None else "unset-transition"
    body: dict[str, Any] = {"model_name": "batch::job"}
    if transition is not None:
        body["transition"] = transition
    request = urllib.request.Request(
        f"{moto_url()}/moto-api/state-manager/{action}",
        data=json.dumps(body).encode(),
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


@contextmanager
def batch_job_transition(transition: dict[str, Any]) -> Iterator[None]:
    """Holds a moto state transition for Batch jobs while the block runs."""
    set_batch_job_transition(transition)
    try:
        yield
    finally:
        set_batch_job_transition(None)


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """Polls ``check`` until it returns something truthy (returned) or fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def moto_server() -> str:
    """The moto server's URL (skips locally, fails in CI, when it is not running)."""
    require_backend("moto", moto_running(), HOW)
    return moto_url()


@pytest.fixture
def moto_aws(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Points boto3's standard chain at moto for this test; yields the endpoint URL."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in aws_settings().items():
        monkeypatch.setenv(name, value)
    return moto_server


@pytest.fixture(scope="session")
def batch_queue(moto_server: str) -> str:
    """A job queue on moto's AWS Batch (created once)."""
    return ensure_batch_queue()


@pytest.fixture(scope="session")
def batch_docker(moto_server: str) -> None:
    """Requires that moto runs Batch jobs as containers on the Docker engine."""
    require_backend(
        "dockerd for moto's AWS Batch",
        moto_runs_containers(),
        f"bash scripts/provision/10-docker.sh, then {HOW} with DOCKER_HOST exported",
    )


@pytest.fixture
def s3_prefix(moto_aws: str) -> str:
    """An empty ``s3://`` prefix of this test in a bucket on moto (see the module doc)."""
    return f"s3://{ensure_bucket()}/{uuid.uuid4().hex[:12]}"
