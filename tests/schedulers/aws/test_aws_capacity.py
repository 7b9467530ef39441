"""The AWS schedulers' capacity checks on the moto server (real botocore over HTTP): a Batch
job queue that is ENABLED takes the app, a DISABLED or missing one refuses it, an app needing
more vCPUs than the managed compute environments allow, or GPUs where none may be launched,
never starts; SageMaker has no signal."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from anylaunch.runner import get_runner
from anylaunch.schedulers.aws_batch_scheduler import AWSBatchScheduler
from anylaunch.schedulers.aws_sagemaker_scheduler import AWSSageMakerScheduler
from anylaunch.schedulers.common.capacity import CanRun
from anylaunch.specs import AppDef, Resource, Role
from tests.schedulers.aws.moto_env import COMPUTE_ENV, boto3_client


def app(cpu: int = 1, replicas: int = 1, gpu: int = 0) -> AppDef:
    res = Resource(cpu=cpu, gpu=gpu, memMB=512)
    return AppDef(
        "cap", [Role("w", "busybox:latest", entrypoint="true", num_replicas=replicas, resource=res)]
    )


def check(application: AppDef, queue: str) -> Any:
    batch = AWSBatchScheduler("captest")
    return batch.check_capacity(application, batch.run_opts().resolve({"queue": queue}))


@pytest.fixture(scope="module")
def queues(batch_queue: str) -> Iterator[dict[str, str]]:
    """A DISABLED queue (on the shared unmanaged compute environment) and an ENABLED one on
    a managed EC2 compute environment of maxvCpus 4 and instanceTypes optimal; removed after."""
    batch, iam, ec2 = boto3_client("batch"), boto3_client("iam"), boto3_client("ec2")
    tag = uuid.uuid4().hex[:8]
    role = iam.get_role(RoleName="anylaunch-test-batch")["Role"]["Arn"]
    profile = iam.create_instance_profile(InstanceProfileName=f"anylaunch-cap-{tag}")
    ce = batch.create_compute_environment(
        computeEnvironmentName=f"anylaunch-cap-{tag}",
        type="MANAGED",
        state="ENABLED",
        serviceRole=role,
        computeResources={
            "type": "EC2",
            "minvCpus": 0,
            "maxvCpus": 4,
            "desiredvCpus": 0,
            "instanceTypes": ["optimal"],
            "subnets": [ec2.describe_subnets()["Subnets"][0]["SubnetId"]],
            "securityGroupIds": [ec2.describe_security_groups()["SecurityGroups"][0]["GroupId"]],
            "instanceRole": profile["InstanceProfile"]["Arn"],
        },
    )
    made = {
        "disabled": (f"anylaunch-cap-off-{tag}", "DISABLED", COMPUTE_ENV),
        "managed": (f"anylaunch-cap-max4-{tag}", "ENABLED", ce["computeEnvironmentArn"]),
    }
    for name, state, env in made.values():
        batch.create_job_queue(
            jobQueueName=name,
            state=state,
            priority=1,
            computeEnvironmentOrder=[{"order": 1, "computeEnvironment": env}],
        )
    yield {key: name for key, (name, _, _) in made.items()}
    arn = ce["computeEnvironmentArn"]
    steps: list[Any] = []
    for name, _, _ in made.values():
        steps.append(lambda n=name: batch.update_job_queue(jobQueue=n, state="DISABLED"))
        steps.append(lambda n=name: batch.delete_job_queue(jobQueue=n))
    steps.append(lambda: batch.update_compute_environment(computeEnvironment=arn, state="DISABLED"))
    steps.append(lambda: batch.delete_compute_environment(computeEnvironment=arn))
    steps.append(lambda: iam.delete_instance_profile(InstanceProfileName=f"anylaunch-cap-{tag}"))
    for step in steps:  # each on its own: one failing must not leave the rest behind
        with contextlib.suppress(Exception):
            step()


def test_an_enabled_queue_takes_the_app(moto_aws: str, batch_queue: str) -> None:
    with get_runner("captest") as runner:
        answer = runner.check_capacity(app(cpu=2, replicas=2), "aws_batch", {"queue": batch_queue})
    assert answer.can_run == CanRun.YES, answer
    assert f"job queue {batch_queue} is ENABLED" in answer.reason
    assert f"{COMPUTE_ENV} is UNMANAGED" in answer.reason  # no bound on its instances
    assert answer.calls == 2


def test_a_disabled_queue_refuses_the_app(moto_aws: str, queues: dict[str, str]) -> None:
    answer = check(app(), queues["disabled"])
    assert answer.can_run == CanRun.NO, answer
    assert f"job queue {queues['disabled']} is DISABLED" in answer.reason
    assert answer.calls == 1


def test_a_missing_queue_refuses_the_app(moto_aws: str) -> None:
    answer = check(app(), "anylaunch-no-such-queue")
    assert answer.can_run == CanRun.NO, answer
    assert "no job queue anylaunch-no-such-queue" in answer.reason
    assert answer.calls == 1


def test_an_app_bigger_than_max_vcpus_never_starts(moto_aws: str, queues: dict[str, str]) -> None:
    answer = check(app(cpu=4, replicas=2), queues["managed"])  # a multi-node job: 8 at once
    assert answer.can_run == CanRun.NO, answer
    assert "the app needs 8 vCPUs at once" in answer.reason
    assert "allow at most 4 (maxvCpus)" in answer.reason
    assert answer.calls == 2
    fits = check(app(cpu=2, replicas=2), queues["managed"])
    assert fits.can_run == CanRun.YES, fits
    assert "allow 4 vCPUs (maxvCpus), the app needs 4" in fits.reason


def test_a_gpu_app_where_no_gpu_instance_may_launch_never_starts(
    moto_aws: str, queues: dict[str, str]
) -> None:
    answer = check(app(gpu=1), queues["managed"])
    assert answer.can_run == CanRun.NO, answer
    assert "launch no GPU instance type (instanceTypes: optimal)" in answer.reason


def test_sagemaker_has_no_signal() -> None:
    answer = AWSSageMakerScheduler("t").check_capacity(app(), {})
    assert answer.can_run == CanRun.UNKNOWN
    assert "SageMaker" in answer.reason and answer.calls == 0
