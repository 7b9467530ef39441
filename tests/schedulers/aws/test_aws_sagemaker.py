"""The aws_sagemaker scheduler: training-job requests checked against botocore's service model,
created, described and listed on a moto server through real botocore; the stop request (which
moto does not implement) proven by botocore's own validation and serialization."""

from __future__ import annotations

import contextlib
import json
import os
import time
from datetime import datetime, timedelta
from typing import Any

import pytest

import anylaunch
from anylaunch.runner import get_runner
from anylaunch.schedulers import get_scheduler_factory
from anylaunch.schedulers.api import Stream
from anylaunch.schedulers.aws.sagemaker import LOG_GROUP, _job_state
from anylaunch.schedulers.aws_sagemaker_scheduler import AWSSageMakerScheduler, SageMakerJobRequest
from anylaunch.schedulers.common.job_metadata import OWNER_KEY
from anylaunch.specs import AppDef, AppState, Resource, Role, macros, named_resources
from anylaunch.specs.errors import InvalidRunConfigException, InvalidSpecError, UnknownAppException
from anylaunch.specs.metadata_keys import ANYLAUNCH_CONTEXT_NAME, app_metadata
from tests.schedulers.aws.moto_env import boto3_client

SESSION = "smtest"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainer:1"
CFG: dict[str, Any] = {
    "role_arn": "arn:aws:iam::123456789012:role/sagemaker",
    "output_path": "s3://anylaunch-test/out/",
}


def sagemaker() -> AWSSageMakerScheduler:
    scheduler = get_scheduler_factory("aws_sagemaker")(SESSION)
    assert isinstance(scheduler, AWSSageMakerScheduler)
    return scheduler


def trainer(**kwargs: Any) -> Role:
    kwargs.setdefault("resource", named_resources["aws_m5.xlarge"])
    kwargs.setdefault("entrypoint", "python")
    return Role("trainer", IMAGE, **kwargs)


def request_of(app: AppDef, cfg: dict[str, Any]) -> dict[str, Any]:
    request = sagemaker().submit_dryrun(app, cfg).request
    assert isinstance(request, SageMakerJobRequest)
    return request.create_training_job


def assert_valid_for_aws(operation: str, params: dict[str, Any]) -> None:
    from botocore.session import get_session
    from botocore.validate import validate_parameters

    model = get_session().get_service_model("sagemaker").operation_model(operation)
    validate_parameters(params, model.input_shape)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")


def test_dryrun_offline_builds_a_training_job_aws_accepts(offline: None) -> None:
    role = trainer(
        entrypoint="torchrun",
        args=["--nnodes", "2", "train.py", "--run", macros.app_id, f"$${{{macros.rank0_env}}}"],
        num_replicas=2,
        env={"LR": "0.1", "WANDB_API_KEY": "s3cr3t"},
        resource=named_resources["aws_p3.2xlarge"],
        max_retries=2,
    )
    cfg = {
        **CFG,
        "use_spot_instances": True,
        "max_run": 3600,
        "max_wait": 7200,
        "volume_size": 100,
        "hyperparameters": {"epochs": "3"},
        "subnets": ["subnet-0abc"],
        "security_group_ids": ["sg-0abc"],
        "checkpoint_s3_uri": "s3://anylaunch-test/ckpt/",
    }
    info = sagemaker().submit_dryrun(AppDef("my_train", [role]), cfg)
    req = info.request.create_training_job
    assert_valid_for_aws("CreateTrainingJob", req)
    name = req["TrainingJobName"]
    assert name.startswith("my-train-") and info.request.job_name == name
    assert req["ResourceConfig"] == {
        "InstanceType": "ml.p3.2xlarge",
        "InstanceCount": 2,
        "VolumeSizeInGB": 100,
    }
    assert req["AlgorithmSpecification"] == {
        "TrainingImage": IMAGE,
        "TrainingInputMode": "File",
        "ContainerEntrypoint": ["torchrun"],
        "ContainerArguments": [
            "--nnodes",
            "2",
            "train.py",
            "--run",
            name,
            "${ANYLAUNCH_RANK0_HOST}",
        ],
    }
    env = req["Environment"]
    assert (env["LR"], env["ANYLAUNCH_RANK0_HOST"], env["ANYLAUNCH_ROLE_NAME"]) == (
        "0.1",
        "algo-1",
        "trainer",
    )
    assert req["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert req["EnableManagedSpotTraining"] is True
    assert req["VpcConfig"] == {"Subnets": ["subnet-0abc"], "SecurityGroupIds": ["sg-0abc"]}
    assert req["CheckpointConfig"] == {"S3Uri": "s3://anylaunch-test/ckpt/"}
    assert req["OutputDataConfig"] == {"S3OutputPath": "s3://anylaunch-test/out/"}
    assert req["RetryStrategy"] == {"MaximumRetryAttempts": 2}
    assert req["HyperParameters"] == {"epochs": "3"}
    tags = {t["Key"]: t["Value"] for t in req["Tags"]}
    assert tags["anylaunch/scheduler"] == "aws_sagemaker" and tags["anylaunch/session"] == SESSION
    printed = str(info)
    assert "s3cr3t" not in printed and "WANDB_API_KEY: '***'" in printed

    # the run option wins over the named resource
    override = request_of(AppDef("t", [trainer()]), {**CFG, "instance_type": "ml.g5.xlarge"})
    assert override["ResourceConfig"]["InstanceType"] == "ml.g5.xlarge"
    assert "VpcConfig" not in override and "EnableManagedSpotTraining" not in override


BAD_INPUTS = [
    ("AppDef.roles", CFG, [trainer(), Role("other", IMAGE, entrypoint="x")]),
    ("role_arn", {"output_path": "s3://b/"}, [trainer()]),
    ("instance_type", CFG, [trainer(resource=Resource(4, 0, 1024))]),
    ("output_path", {**CFG, "output_path": "my-bucket/out"}, [trainer()]),
    ("max_wait", {**CFG, "use_spot_instances": True}, [trainer()]),
    ("max_wait", {**CFG, "use_spot_instances": True, "max_run": 100, "max_wait": 50}, [trainer()]),
    ("max_wait", {**CFG, "max_wait": 50}, [trainer()]),
    ("security_group_ids", {**CFG, "subnets": ["subnet-1"]}, [trainer()]),
    ("Role[trainer].args[0]", CFG, [trainer(args=[macros.replica_id], num_replicas=2)]),
    (
        "CreateTrainingJob.AlgorithmSpecification.ContainerArguments[1]",
        CFG,
        [trainer(args=["-c", "x" * 300])],
    ),
    ("CreateTrainingJob.Environment", CFG, [trainer(env={f"V{i}": "1" for i in range(100)})]),
    (
        "CreateTrainingJob.ResourceConfig.InstanceType",
        {**CFG, "instance_type": "ml.p3.2xlarg"},
        [trainer()],
    ),
]


@pytest.mark.parametrize(("field", "cfg", "roles"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_rejected_at_dryrun_naming_the_field(
    offline: None, field: str, cfg: dict[str, Any], roles: list[Role]
) -> None:
    with pytest.raises(InvalidSpecError) as info:
        sagemaker().submit_dryrun(AppDef("bad", roles), cfg)
    assert info.value.field == field
    assert "Fix:" in str(info.value)
    if field in ("role_arn", "instance_type", "output_path", "max_wait", "security_group_ids"):
        assert isinstance(info.value, InvalidRunConfigException)


def test_a_near_miss_instance_type_gets_a_suggestion(offline: None) -> None:
    with pytest.raises(InvalidSpecError, match=r"Did you mean 'ml\.p3\.2xlarge'"):
        sagemaker().submit_dryrun(
            AppDef("t", [trainer()]), {**CFG, "instance_type": "ml.p3.2xlarg"}
        )


def test_every_training_job_status_maps_to_a_state() -> None:
    from botocore.session import get_session

    model = get_session().get_service_model("sagemaker")
    # Deleting: only an ended job can be deleted, but how it ended is no longer known
    for status in set(model.shape_for("TrainingJobStatus").enum) - {"Deleting"}:
        for secondary in model.shape_for("SecondaryStatus").enum:
            state = _job_state({"TrainingJobStatus": status, "SecondaryStatus": secondary})[0]
            assert state != AppState.UNKNOWN, (status, secondary)
    assert (
        _job_state({"TrainingJobStatus": "InProgress", "SecondaryStatus": "Downloading"})[0]
        == AppState.PENDING
    )
    assert (
        _job_state({"TrainingJobStatus": "InProgress", "SecondaryStatus": "Training"})[0]
        == AppState.RUNNING
    )
    assert (
        _job_state({"TrainingJobStatus": "Stopped", "SecondaryStatus": "Stopped"})[0]
        == AppState.CANCELLED
    )
    timeout = {"TrainingJobStatus": "Stopped", "SecondaryStatus": "MaxRuntimeExceeded"}
    assert _job_state(timeout) == (AppState.FAILED, "stopped: MaxRuntimeExceeded")
    failed = {"TrainingJobStatus": "Failed", "FailureReason": "AlgorithmError: exit 1"}
    assert _job_state(failed) == (AppState.FAILED, "AlgorithmError: exit 1")


# --- against moto (real botocore over HTTP) --------------------------------------------------


def schedule(app: AppDef) -> str:
    return sagemaker().submit(app, dict(CFG))


def test_create_describe_and_list(moto_aws: str) -> None:
    role = Role(
        "learner",
        IMAGE,
        entrypoint="python",
        args=["-m", "train", "--run", macros.app_id],
        num_replicas=2,
        resource=named_resources["aws_m5.xlarge"],
    )
    app_id = schedule(AppDef("sm create", [role]))
    assert app_id.startswith("sm-create-")

    # SageMaker stored exactly what was sent (botocore validated it client-side on the way)
    stored = boto3_client("sagemaker").describe_training_job(TrainingJobName=app_id)
    assert stored["ResourceConfig"]["InstanceCount"] == 2
    assert stored["AlgorithmSpecification"]["ContainerArguments"][-1] == app_id

    desc = sagemaker().describe(app_id)
    assert desc is not None and desc.state == AppState.SUCCEEDED  # moto completes jobs at once
    assert desc.ui_url and app_id in desc.ui_url
    [role_back] = desc.roles
    assert (role_back.name, role_back.image, role_back.num_replicas) == ("learner", IMAGE, 2)
    assert [role_back.entrypoint, *role_back.args] == ["python", "-m", "train", "--run", app_id]
    assert [r.hostname for r in desc.roles_statuses[0].replicas] == ["algo-1", "algo-2"]

    listed = {a.app_id: a for a in sagemaker().list()}
    assert listed[app_id].app_handle == f"aws_sagemaker://{SESSION}/{app_id}"
    assert (listed[app_id].name, listed[app_id].state) == ("sm create", AppState.SUCCEEDED)
    assert sagemaker().describe("no-such-job") is None
    with pytest.raises(UnknownAppException):
        sagemaker().log_iter("no-such-job", "trainer")


def test_describe_returns_the_job_metadata_from_the_tags_read_once(
    moto_aws: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.awsrequest import AWSResponse

    monkeypatch.setenv(ANYLAUNCH_CONTEXT_NAME, "ctx-1")
    owner = "airflow:dag/run/task"
    with get_runner("smtest") as runner:
        handle = runner.run(
            AppDef("sm meta", [trainer()]), "aws_sagemaker", dict(CFG), parent_run_id=owner
        )
    app_id = handle.rsplit("/", 1)[1]
    scheduler = sagemaker()
    calls: list[str] = []
    scheduler.client.meta.events.register(
        "before-call", lambda model, **_: calls.append(model.name)
    )
    want = {
        app_metadata.CONTEXT: "ctx-1",
        app_metadata.VERSION: anylaunch.__version__,
        app_metadata.SCHEDULER: "aws_sagemaker",
    }
    for _ in range(3):
        desc = scheduler.describe(app_id)
        assert desc is not None
        assert {k: desc.metadata.get(k) for k in want} == want
        # and the owner the reaper asks about (moto's describe returns no role env)
        assert desc.metadata[OWNER_KEY] == owner
    # polling a job costs one DescribeTrainingJob: its tags are read once per scheduler
    assert calls == [
        "DescribeTrainingJob",
        "ListTags",
        "DescribeTrainingJob",
        "DescribeTrainingJob",
    ]

    # without the sagemaker:ListTags permission describe still works, without the metadata
    def denied(model: Any, params: Any, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        error = {"Code": "AccessDeniedException", "Message": "not authorized: sagemaker:ListTags"}
        return AWSResponse(params["url"], 400, {}, _Body(b"")), {
            "Error": error,
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }

    other = sagemaker()
    other.client.meta.events.register("before-call.sagemaker.ListTags", denied)
    desc = other.describe(app_id)
    assert desc is not None and desc.state == AppState.SUCCEEDED
    assert app_metadata.SCHEDULER not in desc.metadata


class _Body:
    """The raw body botocore reads a response from."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Any:
        yield self.data


def test_stop_request_passes_botocore_validation_against_the_service_model(moto_aws: str) -> None:
    """moto does not implement StopTrainingJob, so the request is captured after botocore has
    validated the parameters against the real service model and serialized them, just before
    it would go on the wire; a request AWS would refuse never gets there."""
    from botocore.awsrequest import AWSResponse
    from botocore.exceptions import ParamValidationError

    app_id = schedule(AppDef("sm stop", [trainer()]))
    scheduler = sagemaker()
    sent: list[Any] = []

    def capture(request: Any, **_: Any) -> AWSResponse:
        sent.append(request)
        return AWSResponse(request.url, 200, {}, _Body(b"{}"))

    scheduler.client.meta.events.register("before-send.sagemaker.StopTrainingJob", capture)
    scheduler.cancel(app_id)  # moto says Completed: cancelling a finished job sends nothing
    assert sent == []

    scheduler._cancel_existing(app_id)
    [request] = sent
    assert request.method == "POST"
    assert request.headers["X-Amz-Target"] == b"SageMaker.StopTrainingJob"
    assert json.loads(request.body) == {"TrainingJobName": app_id}

    with pytest.raises(ParamValidationError):
        scheduler._cancel_existing("")  # TrainingJobName has a minimum length of 1
    assert len(sent) == 1


def test_logs_come_from_each_hosts_stream(moto_aws: str) -> None:
    app_id = schedule(AppDef("sm logs", [trainer(num_replicas=2)]))
    logs = boto3_client("logs")
    with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
        logs.create_log_group(logGroupName=LOG_GROUP)
    now = int(time.time() * 1000)
    for host, lines in ((1, ["epoch 1", "epoch 2", "done"]), (2, ["worker up"])):
        stream = f"{app_id}/algo-{host}-{now // 1000}"
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
        logs.put_log_events(
            logGroupName=LOG_GROUP,
            logStreamName=stream,
            logEvents=[
                {"timestamp": now - 3000 + 1000 * i, "message": m} for i, m in enumerate(lines)
            ],
        )
    scheduler = sagemaker()
    assert list(scheduler.log_iter(app_id, "trainer", 0)) == ["epoch 1\n", "epoch 2\n", "done\n"]
    assert list(scheduler.log_iter(app_id, "trainer", 1)) == ["worker up\n"]
    assert list(scheduler.log_iter(app_id, "trainer", 0, regex="^epoch")) == [
        "epoch 1\n",
        "epoch 2\n",
    ]
    middle = datetime.fromtimestamp((now - 2500) / 1000)
    assert list(scheduler.log_iter(app_id, "trainer", 0, since=middle)) == ["epoch 2\n", "done\n"]
    assert list(scheduler.log_iter(app_id, "trainer", 0, until=middle)) == ["epoch 1\n"]
    # the job is over (moto completes it at once): tailing returns what there is and stops
    assert list(scheduler.log_iter(app_id, "trainer", 1, should_tail=True)) == ["worker up\n"]
    with pytest.raises(InvalidSpecError, match="has 2 replica"):
        scheduler.log_iter(app_id, "trainer", 2)
    with pytest.raises(InvalidSpecError, match="Did you mean 'trainer'"):
        scheduler.log_iter(app_id, "trainr", 0)
    with pytest.raises(InvalidSpecError, match="combined"):
        scheduler.log_iter(app_id, "trainer", 0, streams=Stream.STDOUT)
    assert (
        list(scheduler.log_iter(app_id, "trainer", 0, since=datetime.now() + timedelta(hours=1)))
        == []
    )
