"""The aws_batch scheduler: requests checked against botocore's service model offline, then
jobs submitted through real botocore to a moto server, which runs them as Docker containers
and stores their output in CloudWatch Logs."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anylaunch.runner import get_runner
from anylaunch.schedulers import get_scheduler_factory
from anylaunch.schedulers.api import Stream
from anylaunch.schedulers.aws.batch_request import CANCEL_REASON, MAIN_NODE_ADDR_ENV
from anylaunch.schedulers.aws.batch_state import job_state
from anylaunch.schedulers.aws.common import AWSRequestError
from anylaunch.schedulers.aws_batch_scheduler import AWSBatchScheduler, BatchJobRequest
from anylaunch.specs import (
    AppDef,
    AppState,
    Resource,
    RetryPolicy,
    Role,
    macros,
    named_resources,
    parse_mounts,
)
from anylaunch.specs.errors import InvalidRunConfigException, InvalidSpecError, UnknownAppException
from tests.backends import require_backend
from tests.schedulers.aws.moto_env import (
    BATCH_IMAGE,
    batch_job_transition,
    boto3_client,
    wait_for,
)

SESSION = "awstest"
TIMEOUT = 60  # a safety net for every wait on a job; jobs here take about a second


def batch() -> AWSBatchScheduler:
    scheduler = get_scheduler_factory("aws_batch")(SESSION)
    assert isinstance(scheduler, AWSBatchScheduler)
    return scheduler


def sh_role(name: str, script: str, **kwargs: Any) -> Role:
    kwargs.setdefault("resource", Resource(cpu=1, gpu=0, memMB=128))
    return Role(name, BATCH_IMAGE, entrypoint="sh", args=["-c", script], **kwargs)


def request_of(app: AppDef, cfg: dict[str, Any]) -> BatchJobRequest:
    request = batch().submit_dryrun(app, cfg).request
    assert isinstance(request, BatchJobRequest)
    return request


def assert_valid_for_aws(operation: str, params: dict[str, Any]) -> None:
    """botocore's own validation of a request against the real service model."""
    from botocore.session import get_session
    from botocore.validate import validate_parameters

    model = get_session().get_service_model("batch").operation_model(operation)
    validate_parameters(params, model.input_shape)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No credentials, no region, and an endpoint nobody listens on."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")


# --- dryrun: no network, no credentials ------------------------------------------------------


def test_dryrun_offline_builds_a_multinode_job_aws_accepts(offline: None) -> None:
    trainer = Role(
        "trainer",
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
        entrypoint="python",
        args=["-m", "train", "--app", macros.app_id],
        num_replicas=3,
        env={"LR": "0.1", "HF_TOKEN": "hunter2"},
        max_retries=2,
        resource=Resource.copy(named_resources["aws_p4d.24xlarge"]),
        mounts=parse_mounts(
            [
                "type=bind,src=/fsx,dst=/data,readonly",
                "type=volume,src=fs-0123456789abcdef0,dst=/efs",
                "type=device,src=/dev/fuse,perm=rw",
            ]
        ),
    )
    ps = Role("ps", "busybox", entrypoint="sleep", args=["1"], resource=Resource(1, 0, 256))
    cfg = {
        "queue": "arn:aws:batch:us-east-1:123456789012:job-queue/gpu",
        "share_id": "teamA",
        "priority": 7,
        "job_role_arn": "arn:aws:iam::123456789012:role/job",
        "execution_role_arn": "arn:aws:iam::123456789012:role/exec",
        "ulimits": ["nofile:65536", "memlock:-1:-1"],
        "privileged": True,
    }
    info = batch().submit_dryrun(AppDef("llm train", [trainer, ps]), cfg)
    req = info.request
    assert isinstance(req, BatchJobRequest)
    assert req.app_id == f"gpu:{req.job_name}" and req.job_name.startswith("llm-train-")

    job_def, submit = req.job_definition, req.submit_job
    assert_valid_for_aws("RegisterJobDefinition", job_def)
    assert_valid_for_aws("SubmitJob", {**submit, "jobDefinition": job_def["jobDefinitionName"]})
    assert job_def["type"] == "multinode"
    nodes = job_def["nodeProperties"]
    assert (nodes["numNodes"], nodes["mainNode"]) == (4, 0)
    groups = nodes["nodeRangeProperties"]
    assert [g["targetNodes"] for g in groups] == ["0:2", "3:3"]
    main = groups[0]["container"]
    env = {e["name"]: e["value"] for e in main["environment"]}
    assert env["LR"] == "0.1" and env["ANYLAUNCH_ROLE_NAME"] == "trainer"
    assert main["command"] == ["python", "-m", "train", "--app", req.app_id]
    p4d = named_resources["aws_p4d.24xlarge"]
    assert {r["type"]: r["value"] for r in main["resourceRequirements"]} == {
        "VCPU": str(p4d.cpu),
        "MEMORY": str(p4d.memMB),
        "GPU": str(p4d.gpu),
    }
    assert main["linuxParameters"]["sharedMemorySize"] == p4d.memMB
    devices = main["linuxParameters"]["devices"]
    assert devices[0] == {
        "hostPath": "/dev/fuse",
        "containerPath": "/dev/fuse",
        "permissions": ["READ", "WRITE"],
    }
    efa = [d["hostPath"] for d in devices[1:]]
    assert efa == [f"/dev/infiniband/uverbs{i}" for i in range(4)]  # p4d has 4 EFA interfaces
    volumes = {v["name"]: v for v in main["volumes"]}
    points = {p["containerPath"]: p for p in main["mountPoints"]}
    assert volumes[points["/data"]["sourceVolume"]]["host"] == {"sourcePath": "/fsx"}
    assert points["/data"]["readOnly"] is True
    efs = volumes[points["/efs"]["sourceVolume"]]["efsVolumeConfiguration"]
    assert efs == {"fileSystemId": "fs-0123456789abcdef0"}
    assert main["ulimits"] == [
        {"name": "nofile", "softLimit": 65536, "hardLimit": 65536},
        {"name": "memlock", "softLimit": -1, "hardLimit": -1},
    ]
    assert main["privileged"] is True
    assert main["jobRoleArn"].endswith("role/job") and main["executionRoleArn"].endswith("exec")
    # every node group runs on the one instance type of the named resource
    assert {g["container"]["instanceType"] for g in groups} == {"p4d.24xlarge"}
    assert job_def["retryStrategy"] == {"attempts": 3}
    assert job_def["tags"]["anylaunch/app-name"] == "llm train"
    assert job_def["tags"]["anylaunch/session"] == SESSION
    assert submit["tags"] == job_def["tags"]
    assert (submit["shareIdentifier"], submit["schedulingPriorityOverride"]) == ("teamA", 7)
    assert submit["jobQueue"] == cfg["queue"]

    printed = str(info)
    assert "hunter2" not in printed and "HF_TOKEN" in printed and "***" in printed


def test_single_replica_app_is_a_plain_container_job(offline: None) -> None:
    role = sh_role("echo", f"echo $${{{macros.rank0_env}}} {macros.replica_id}")
    req = request_of(AppDef("echo", [role]), {"queue": "q"})
    assert req.job_definition["type"] == "container"
    assert "nodeProperties" not in req.job_definition
    container = req.job_definition["containerProperties"]
    env = {e["name"]: e["value"] for e in container["environment"]}
    assert env["ANYLAUNCH_RANK0_HOST"] == "localhost"
    assert container["command"] == ["sh", "-c", "echo ${ANYLAUNCH_RANK0_HOST} 0"]
    assert_valid_for_aws("RegisterJobDefinition", req.job_definition)


def run_node(command: list[str], env: list[dict[str, str]], node_index: int) -> str:
    """Runs a node's command with a real /bin/sh and the variables Batch would set."""
    environ = {e["name"]: e["value"] for e in env}
    environ.update(PATH=os.environ["PATH"], AWS_BATCH_JOB_NODE_INDEX=str(node_index))
    done = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


PRINT_ARGV = "import json, os, sys; print(json.dumps([os.environ.get('R'), *sys.argv[1:]]))"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    args=st.lists(
        st.text(
            st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
        ),
        max_size=4,
    ),
    replicas=st.integers(2, 4),
)
def test_replica_id_reaches_each_node_and_args_stay_literal(args: list[str], replicas: int) -> None:
    # role 1 starts at node 2: its replica id is the node index minus 2
    first = Role("first", "img", entrypoint="true", num_replicas=2, resource=Resource(1, 0, 64))
    second = Role(
        "second",
        "img",
        entrypoint=sys.executable,
        args=["-c", PRINT_ARGV, macros.replica_id, *args],
        env={"R": f"r{macros.replica_id}"},
        num_replicas=replicas,
        resource=Resource(1, 0, 64),
    )
    req = request_of(AppDef("ids", [first, second]), {"queue": "q"})
    group = req.job_definition["nodeProperties"]["nodeRangeProperties"][1]
    assert group["targetNodes"] == f"2:{replicas + 1}"
    import json

    for k in range(replicas):
        out = json.loads(
            run_node(group["container"]["command"], group["container"]["environment"], 2 + k)
        )
        values = macros.Values(
            img_root="", app_id=req.app_id, replica_id=str(k), rank0_env=MAIN_NODE_ADDR_ENV
        )
        assert out == [f"r{k}", str(k), *(values.substitute(a) for a in args)]


BAD_INPUTS = [
    ("queue", {}, [sh_role("a", "true")]),
    ("Role[a].resource.memMB", {"queue": "q"}, [sh_role("a", "true", resource=Resource(1, 0, 0))]),
    ("Role[a].resource.cpu", {"queue": "q"}, [sh_role("a", "true", resource=Resource(0, 0, 64))]),
    ("Role[a].resource", {"queue": "q"}, [Role("a", "img", entrypoint="true")]),
    ("AppDef.roles", {"queue": "q"}, [sh_role(f"r{i}", "true") for i in range(6)]),
    ("priority", {"queue": "q", "priority": 3}, [sh_role("a", "true")]),
    ("priority", {"queue": "q", "share_id": "s", "priority": 10000}, [sh_role("a", "true")]),
    ("ulimits", {"queue": "q", "ulimits": ["nofiles:1"]}, [sh_role("a", "true")]),
    ("ulimits", {"queue": "q", "ulimits": ["nofile:many"]}, [sh_role("a", "true")]),
    ("startup_timeout", {"queue": "q", "startup_timeout": -1}, [sh_role("a", "true")]),
    (
        "image_repo",
        {"queue": "q"},
        [Role("a", "sha256:" + "0" * 64, entrypoint="true", resource=Resource(1, 0, 64))],
    ),
    (
        "Role[a].mounts",
        {"queue": "q"},
        [sh_role("a", "true", mounts=parse_mounts(["type=volume,src=mydata,dst=/d"]))],
    ),
    (
        "Role[a].resource.devices",
        {"queue": "q"},
        [sh_role("a", "true", resource=Resource(1, 0, 64, devices={"example.com/fpga": 1}))],
    ),
    ("Role[a].env", {"queue": "q"}, [sh_role("a", "true", env={"AWS_BATCH_X": "1"})]),
    (
        "Role[a].retry_policy",
        {"queue": "q"},
        [sh_role("a", "true", max_retries=1, retry_policy=RetryPolicy.REPLICA)],
    ),
    ("Role.max_retries", {"queue": "q"}, [sh_role("a", "true", max_retries=10)]),
    (
        "Role.resource",
        {"queue": "q"},
        [
            sh_role("a", "true", resource=named_resources["aws_m5.large"]),
            sh_role("b", "true", resource=named_resources["aws_c5.large"]),
        ],
    ),
]


@pytest.mark.parametrize(("field", "cfg", "roles"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_rejected_at_dryrun_naming_the_field(
    offline: None, field: str, cfg: dict[str, Any], roles: list[Role]
) -> None:
    with pytest.raises(InvalidSpecError) as info:
        batch().submit_dryrun(AppDef("bad", roles), cfg)
    assert info.value.field == field
    assert "Fix:" in str(info.value)
    if field in ("queue", "priority", "ulimits", "image_repo", "startup_timeout"):
        assert isinstance(info.value, InvalidRunConfigException)


def test_five_roles_and_many_nodes_are_fine(offline: None) -> None:
    roles = [sh_role(f"r{i}", "true", num_replicas=200) for i in range(5)]
    req = request_of(AppDef("big", roles), {"queue": "q"})
    assert req.job_definition["nodeProperties"]["numNodes"] == 1000


def test_every_batch_status_maps_to_a_state() -> None:
    from botocore.session import get_session

    statuses = get_session().get_service_model("batch").shape_for("JobStatus").enum
    mapped = {s: job_state({"status": s}, time.time())[0] for s in statuses}
    assert AppState.UNKNOWN not in mapped.values()
    assert mapped["RUNNABLE"] == AppState.PENDING and mapped["RUNNING"] == AppState.RUNNING
    failed = {"status": "FAILED", "statusReason": CANCEL_REASON}
    assert job_state(failed, time.time())[0] == AppState.CANCELLED


# --- against moto (real botocore over HTTP) --------------------------------------------------


def test_no_region_is_a_clear_error_not_a_botocore_trace(offline: None) -> None:
    with pytest.raises(AWSRequestError, match="AWS_DEFAULT_REGION"):
        batch().describe("q:job")


def test_a_refused_submission_says_why_and_leaves_no_job_definition(moto_aws: str) -> None:
    scheduler = batch()
    info = scheduler.submit_dryrun(
        AppDef("orphan", [sh_role("a", "true")]), {"queue": "no-such-queue"}
    )
    with pytest.raises(AWSRequestError, match="no-such-queue") as error:
        scheduler.schedule(info)
    assert "Fix:" in str(error.value)
    name = info.request.job_name
    found = boto3_client("batch").describe_job_definitions(jobDefinitionName=name)
    assert [d["status"] for d in found["jobDefinitions"]] == ["INACTIVE"]


def test_schedule_describe_list_and_delete(moto_aws: str, batch_queue: str) -> None:
    app = AppDef(
        "api check",
        [
            sh_role("workers", "sleep 20", num_replicas=2),
            sh_role("driver", "sleep 20"),
        ],
    )
    scheduler = batch()
    app_id = scheduler.submit(app, {"queue": batch_queue, "startup_timeout": 0})
    assert app_id.startswith(f"{batch_queue}:api-check-")

    # a fresh scheduler (another process) finds the job by its name in the queue
    desc = batch().describe(app_id)
    assert desc is not None and desc.app_id == app_id
    assert [(r.name, r.num_replicas, r.image) for r in desc.roles] == [
        ("workers", 2, BATCH_IMAGE),
        ("driver", 1, BATCH_IMAGE),
    ]
    assert [len(s.replicas) for s in desc.roles_statuses] == [2, 1]
    assert desc.metadata["job_id"] and desc.ui_url and "us-east-1" in desc.ui_url

    listed = {a.app_id: a for a in batch().list({"queue": batch_queue})}
    assert listed[app_id].app_handle == f"aws_batch://{SESSION}/{app_id}"
    assert listed[app_id].name == "api check"
    assert app_id in {a.app_id for a in batch().list()}  # every queue

    assert batch().describe(f"{batch_queue}:no-such-job") is None
    assert batch().describe("no-such-queue:x") is None and batch().describe("malformed") is None
    with pytest.raises(UnknownAppException):
        list(batch().log_iter(f"{batch_queue}:no-such-job", "workers"))

    scheduler.delete(app_id)
    definition = desc.metadata["job_definition"]
    found = boto3_client("batch").describe_job_definitions(jobDefinitions=[definition])
    assert [d["status"] for d in found["jobDefinitions"]] == ["INACTIVE"]
    final = wait_for(
        lambda: (d := batch().describe(app_id)) and d.state.is_terminal() and d,
        TIMEOUT,
        "the deleted job to end",
    )
    assert final.state in (AppState.CANCELLED, AppState.FAILED)


def test_job_stuck_runnable_past_startup_timeout_fails_with_reason(
    moto_aws: str, batch_queue: str
) -> None:
    batch_client = boto3_client("batch")
    app = AppDef("stuck", [sh_role("main", "echo never")])
    with batch_job_transition({"progression": "time", "seconds": 1}):
        app_id = batch().submit(app, {"queue": batch_queue, "startup_timeout": 2})
        queued = batch().describe(app_id)  # before the timeout: queued, not failed
        assert queued is not None and queued.state in (AppState.SUBMITTED, AppState.PENDING)
        job_id = queued.metadata["job_id"]

        def runnable() -> bool:
            jobs = batch_client.describe_jobs(jobs=[job_id])["jobs"]
            return jobs[0]["status"] == "RUNNABLE"

        wait_for(runnable, 20, "the job to become RUNNABLE", interval=0.05)
        # hold it there, as a queue without capacity would
        with batch_job_transition({"progression": "manual", "times": 10**9}):
            time.sleep(2.5)
            desc = batch().describe(app_id)
            assert desc is not None
            assert desc.state == AppState.FAILED
            assert "RUNNABLE for" in desc.msg and "startup_timeout=2s" in desc.msg
            # the deadline is enforced in Batch too: the job was terminated with that reason
            raw = batch_client.describe_jobs(jobs=[job_id])["jobs"][0]
            assert raw["statusReason"].startswith("anylaunch: startup timeout")
            assert batch().describe(app_id).state == AppState.FAILED  # type: ignore[union-attr]


# --- apps that really run (moto starts them on the Docker engine) ----------------------------


def wait_terminal(scheduler: AWSBatchScheduler, app_id: str) -> Any:
    return wait_for(
        lambda: (d := scheduler.describe(app_id)) and d.state.is_terminal() and d,
        TIMEOUT,
        f"{app_id} to end",
    )


def test_app_runs_and_its_logs_come_back_through_the_runner(
    moto_aws: str, batch_queue: str, batch_docker: None
) -> None:
    script = (
        'echo "job $ANYLAUNCH_JOB_ID"; echo to-stderr >&2; echo "rank0 ${ANYLAUNCH_RANK0_HOST}"'
    )
    with get_runner(SESSION) as runner:
        handle = runner.run(
            AppDef("hello", [sh_role("main", script)]), "aws_batch", {"queue": batch_queue}
        )
        status = runner.wait(handle, wait_interval=0.5, timeout=TIMEOUT)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        lines = list(runner.log_lines(handle, "main"))
    # the ${app_id} macro is the app id, so the injected job id is the app's own handle
    assert f"job {handle}\n" in lines
    assert "to-stderr\n" in lines and "rank0 localhost\n" in lines
    assert all(line.endswith("\n") for line in lines)


def test_multinode_app_runs_every_node(moto_aws: str, batch_queue: str, batch_docker: None) -> None:
    scheduler = batch()
    app = AppDef(
        "mnp",
        [
            sh_role("a", f'echo "a-node main=$${{{macros.rank0_env}:=localhost}}"', num_replicas=2),
            sh_role("b", 'echo "b-node role=$ANYLAUNCH_ROLE_NAME"'),
        ],
    )
    app_id = scheduler.submit(app, {"queue": batch_queue})
    desc = wait_terminal(scheduler, app_id)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert [r.state for s in desc.roles_statuses for r in s.replicas] == [AppState.SUCCEEDED] * 3
    # moto writes every node to the job's stream (AWS Batch: one stream per node)
    lines = list(scheduler.log_iter(app_id, "b", 0))
    assert sum(line.startswith("a-node main=") for line in lines) == 2
    assert "b-node role=b\n" in lines
    assert list(scheduler.log_iter(app_id, "a", 1, regex="^b-")) == ["b-node role=b\n"]
    with pytest.raises(InvalidSpecError, match="role 'a'"):
        scheduler.log_iter(app_id, "a", 2)
    with pytest.raises(InvalidSpecError, match="Did you mean 'b'"):
        scheduler.log_iter(app_id, "bb", 0)
    with pytest.raises(InvalidSpecError, match="combined"):
        scheduler.log_iter(app_id, "a", 0, streams=Stream.STDERR)


def test_failing_app_fails_with_its_output(
    moto_aws: str, batch_queue: str, batch_docker: None
) -> None:
    scheduler = batch()
    app_id = scheduler.submit(
        AppDef("boom", [sh_role("main", "echo about-to-fail; exit 3")]), {"queue": batch_queue}
    )
    desc = wait_terminal(scheduler, app_id)
    assert desc.state == AppState.FAILED
    assert list(scheduler.log_iter(app_id, "main")) == ["about-to-fail\n"]


def container_printed(job_name: str, text: str) -> bool:
    """True once moto's container for the job has written ``text`` (moto names containers
    after the job)."""
    import docker

    client = docker.from_env()
    try:
        for container in client.containers.list(filters={"name": job_name}):
            if text in container.logs().decode(errors="replace"):
                return True
        return False
    finally:
        client.close()


def test_cancel_stops_a_running_app(moto_aws: str, batch_queue: str, batch_docker: None) -> None:
    with get_runner(SESSION) as runner:
        handle = runner.run(
            AppDef("sleeper", [sh_role("main", "echo started; sleep 120")]),
            "aws_batch",
            {"queue": batch_queue},
        )
        wait_for(
            lambda: (s := runner.status(handle)) and s.state == AppState.RUNNING,
            TIMEOUT,
            "the app to run",
        )
        # RUNNING comes before the container starts: wait until it has printed
        wait_for(lambda: container_printed(handle.rsplit(":", 1)[1], "started"), TIMEOUT, "output")
        started = time.monotonic()
        runner.cancel(handle)
        status = runner.wait(handle, wait_interval=0.5, timeout=TIMEOUT)
        assert status is not None and status.state == AppState.CANCELLED, status
        assert time.monotonic() - started < 30  # not the 120 s the app would sleep
        runner.cancel(handle)  # idempotent on a finished app
        assert list(runner.log_lines(handle, "main")) == ["started\n"]


def test_tail_follows_the_app_and_since_until_select_by_time(
    moto_aws: str, batch_queue: str, batch_docker: None
) -> None:
    scheduler = batch()
    before = datetime.now() - timedelta(seconds=1)
    app_id = scheduler.submit(
        AppDef("tail", [sh_role("main", "echo one; sleep 2; echo two; echo three")]),
        {"queue": batch_queue},
    )
    tailed: list[str] = []
    reader = threading.Thread(
        target=lambda: tailed.extend(scheduler.log_iter(app_id, "main", should_tail=True))
    )
    reader.start()
    reader.join(TIMEOUT)
    assert not reader.is_alive(), "tailing did not stop after the app ended"
    assert tailed == ["one\n", "two\n", "three\n"]
    assert scheduler.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    assert list(scheduler.log_iter(app_id, "main", regex="^t")) == ["two\n", "three\n"]
    assert list(scheduler.log_iter(app_id, "main", since=before)) == tailed
    assert list(scheduler.log_iter(app_id, "main", until=before)) == []
    assert list(scheduler.log_iter(app_id, "main", since=datetime.now() + timedelta(hours=1))) == []


def test_local_image_is_pushed_to_image_repo_and_runs(
    moto_aws: str, batch_queue: str, batch_docker: None
) -> None:
    registry = os.environ.get("ANYLAUNCH_DOCKER_REGISTRY", "")
    require_backend("docker registry", bool(registry), "bash scripts/provision/10-docker.sh")
    import docker

    client = docker.from_env()
    image_id = client.images.get(BATCH_IMAGE).id
    client.close()
    repo = f"{registry}/anylaunch-aws-batch-test"
    role = Role("main", image_id, entrypoint="echo", args=["pushed"], resource=Resource(1, 0, 64))
    scheduler = batch()
    info = scheduler.submit_dryrun(
        AppDef("push", [role]), {"queue": batch_queue, "image_repo": repo}
    )
    tag = image_id.split(":", 1)[1]
    assert info.request.images_to_push == {image_id: (repo, tag)}
    assert info.request.job_definition["containerProperties"]["image"] == f"{repo}:{tag}"
    app_id = scheduler.schedule(info)
    with urllib.request.urlopen(
        f"http://{registry}/v2/anylaunch-aws-batch-test/tags/list", timeout=10
    ) as r:
        assert tag in r.read().decode()
    assert wait_terminal(scheduler, app_id).state == AppState.SUCCEEDED
    assert list(scheduler.log_iter(app_id, "main")) == ["pushed\n"]
