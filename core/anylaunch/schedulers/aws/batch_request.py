"""Names, run options and request building of the ``aws_batch`` scheduler (no I/O).

See :mod:`anylaunch.schedulers.aws.batch` for how an AppDef maps onto a Batch job.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from anylaunch.schedulers.aws import common as aws
from anylaunch.schedulers.aws.common import masked_repr, masked_request
from anylaunch.schedulers.common.devices import DEVICES
from anylaunch.schedulers.common.roles import RANK0_ENV
from anylaunch.specs.api import (
    AppDef,
    AppState,
    BindMount,
    DeviceMount,
    Resource,
    RetryPolicy,
    Role,
    VolumeMount,
    macros,
)
from anylaunch.specs.errors import (
    InvalidRunConfigException,
    InvalidSpecError,
    did_you_mean,
)
from anylaunch.specs.named_resources_aws import K8S_ITYPE
from anylaunch.specs.named_resources_aws_catalog import INSTANCE_TYPES
from anylaunch.specs.structured_opts import StructuredOpts

log: logging.Logger = logging.getLogger(__name__)

__all__ = [
    "BACKEND",
    "CANCEL_REASON",
    "DEFAULT_LOG_GROUP",
    "DEFAULT_STARTUP_TIMEOUT_S",
    "MAIN_NODE_ADDR_ENV",
    "MAX_NODE_GROUPS",
    "NODE_INDEX_ENV",
    "REPLICA_ID_ENV",
    "ROLE_NAME_ENV",
    "STARTUP_TIMEOUT_TAG",
    "TIMEOUT_REASON",
    "AWSBatchOpts",
    "BatchJobRequest",
    "check_app",
    "check_fits_instance_type",
    "check_resource",
    "container_properties",
    "device_mounts",
    "format_request",
    "parse_app_id",
    "parse_ulimits",
    "replica_command",
    "short_queue_name",
    "volume_specs",
]

BACKEND = "aws_batch"
#: Set by Batch on every node of an MNP job but the main node: the main node's address.
MAIN_NODE_ADDR_ENV = "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"
#: Set by Batch on every node of an MNP job: the node's index.
NODE_INDEX_ENV = "AWS_BATCH_JOB_NODE_INDEX"
#: Names the role of every node group, so describe and log_iter can map nodes to roles.
ROLE_NAME_ENV = "ANYLAUNCH_ROLE_NAME"
#: Exported by the replica-id wrapper: the node's index within its role.
REPLICA_ID_ENV = "ANYLAUNCH_REPLICA_ID"
#: AWS Batch allows at most five node groups in a multi-node parallel job.
MAX_NODE_GROUPS = 5
#: ``terminate_job`` reason of a cancel: a FAILED job with this reason is CANCELLED.
CANCEL_REASON = "anylaunch: cancelled by request"
#: ``terminate_job`` reason prefix of a job that waited longer than its startup timeout.
TIMEOUT_REASON = "anylaunch: startup timeout"
STARTUP_TIMEOUT_TAG = "anylaunch/startup-timeout"
DEFAULT_LOG_GROUP = "/aws/batch/job"
DEFAULT_STARTUP_TIMEOUT_S = 3600

_STATES: dict[str, AppState] = {
    "SUBMITTED": AppState.SUBMITTED,
    "PENDING": AppState.PENDING,
    "RUNNABLE": AppState.PENDING,
    "STARTING": AppState.PENDING,
    "RUNNING": AppState.RUNNING,
    "SUCCEEDED": AppState.SUCCEEDED,
    "FAILED": AppState.FAILED,
}
_QUEUED = frozenset({"SUBMITTED", "PENDING", "RUNNABLE"})
_ULIMITS = [
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nproc",
    "rss",
    "rtprio",
    "rttime",
    "sigpending",
    "stack",
]
_PERMISSIONS = {"r": "READ", "w": "WRITE", "m": "MKNOD"}
_EFS_ID = re.compile(r"^fs-[0-9a-f]{8,40}$")
_SHELL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Stands for replica_id while a multi-replica role is rendered; no real value holds a NUL.
_REPLICA_SENTINEL = "\x00anylaunch-replica-id\x00"
_DESCRIBE_BATCH = 100  # describe_jobs takes at most 100 ids


@dataclass
class AWSBatchOpts(StructuredOpts):
    """Run options of the ``aws_batch`` scheduler."""

    queue: str
    """Job queue to submit to (name or ARN). For apps with several replicas its compute environment must be EC2-backed (multi-node parallel jobs)."""

    share_id: str | None = None
    """Share identifier of the job; required by (and only allowed on) queues with a fair-share scheduling policy."""

    priority: int | None = None
    """Scheduling priority (0-9999, higher runs first) within share_id; needs share_id."""

    job_role_arn: str | None = None
    """IAM role the containers assume for AWS API calls."""

    execution_role_arn: str | None = None
    """IAM role the container agent uses (pulling images from ECR, writing logs)."""

    ulimits: list[str] | None = None
    """Container ulimits as name:soft[:hard], e.g. nofile:65536:65536,memlock:-1."""

    image_repo: str | None = None
    """Repository that locally built images (sha256:...) are pushed to before submitting, e.g. 123456789012.dkr.ecr.us-east-1.amazonaws.com/trainer."""

    privileged: bool = False
    """Run the containers privileged (root on the host)."""

    startup_timeout: int = DEFAULT_STARTUP_TIMEOUT_S
    """Seconds a job may wait (SUBMITTED, PENDING or RUNNABLE) before describe terminates it and reports it FAILED with Batch's reason; 0 waits forever."""


@dataclass
class BatchJobRequest:
    """The native request: a job definition to register and a job to submit with it."""

    app_id: str
    job_name: str
    queue: str
    #: Keyword arguments of ``batch.register_job_definition``.
    job_definition: dict[str, Any]
    #: Keyword arguments of ``batch.submit_job`` (``jobDefinition`` is added at schedule).
    submit_job: dict[str, Any]
    #: Local image id -> (repository, tag) pushed before the job is submitted.
    images_to_push: dict[str, tuple[str, str]] = field(default_factory=dict)

    def __repr__(self) -> str:
        return masked_repr(self)


def format_request(request: BatchJobRequest) -> str:
    """Readable form of a request (YAML), with secret-looking environment values masked.

    >>> req = BatchJobRequest("q:t-1", "t-1", "q", {"jobDefinitionName": "t-1",
    ...     "containerProperties": {"environment": [{"name": "API_TOKEN", "value": "s3"}]}},
    ...     {"jobName": "t-1", "jobQueue": "q"})
    >>> print(format_request(req))
    aws_batch job t-1 on queue q (app id q:t-1)
    register_job_definition:
      jobDefinitionName: t-1
      containerProperties:
        environment:
        - name: API_TOKEN
          value: '***'
    submit_job:
      jobName: t-1
      jobQueue: q
    """
    import yaml

    def block(data: Mapping[str, Any]) -> list[str]:
        text = yaml.safe_dump(masked_request(dict(data)), sort_keys=False, width=100)
        return ["  " + line for line in text.rstrip("\n").split("\n")]

    lines = [f"aws_batch job {request.job_name} on queue {request.queue} (app id {request.app_id})"]
    if request.images_to_push:
        lines.append("push images:")
        lines += [f"  {img} -> {repo}:{tag}" for img, (repo, tag) in request.images_to_push.items()]
    lines += ["register_job_definition:", *block(request.job_definition)]
    lines += ["submit_job:", *block(request.submit_job)]
    return "\n".join(lines)


def short_queue_name(queue: str) -> str:
    """The name of a queue given by name or ARN (``arn:...:job-queue/NAME``)."""
    return queue.rsplit("/", 1)[-1] if queue.startswith("arn:") else queue


def parse_app_id(app_id: str) -> tuple[str, str] | None:
    queue, sep, name = str(app_id).rpartition(":")
    return (queue, name) if sep and queue and name else None


def parse_ulimits(specs: list[str] | None) -> list[dict[str, Any]]:
    """``name:soft[:hard]`` items as Batch ulimits (hard defaults to soft)."""
    ulimits = []
    for spec in specs or []:
        parts = spec.split(":")
        problem = None
        if len(parts) not in (2, 3):
            problem = "is not name:soft[:hard]"
        elif parts[0] not in _ULIMITS:
            problem = f"names no ulimit.{did_you_mean(parts[0], _ULIMITS)}"
        elif not all(re.fullmatch(r"-?\d+", p) for p in parts[1:]):
            problem = "has limits that are not integers"
        if problem:
            raise InvalidRunConfigException(
                "ulimits",
                spec,
                problem,
                f"write name:soft[:hard] with name one of {', '.join(_ULIMITS)}, e.g. "
                "nofile:65536:65536",
            )
        soft = int(parts[1])
        ulimits.append(
            {
                "name": parts[0],
                "softLimit": soft,
                "hardLimit": int(parts[-1]) if len(parts) == 3 else soft,
            }
        )
    return ulimits


def check_resource(role: Role) -> Resource:
    res = role.resource
    where = f"Role[{role.name}].resource"
    if res.is_null():
        raise InvalidSpecError(
            where,
            res,
            "AWS Batch needs the role's vCPUs and memory",
            "set resource=specs.resource(cpu=..., memMB=...) or a named resource such as "
            "resource(h='aws_m5.xlarge')",
        )
    if res.cpu < 1:
        raise InvalidSpecError(
            f"{where}.cpu", res.cpu, "AWS Batch needs at least 1 vCPU per container", "set cpu >= 1"
        )
    if res.memMB < 4:
        raise InvalidSpecError(
            f"{where}.memMB",
            res.memMB,
            "AWS Batch needs at least 4 MiB of memory per container",
            "set memMB to the memory the container needs, e.g. memMB=2048",
        )
    return res


def check_app(app: AppDef, multinode: bool) -> tuple[int, str | None]:
    """Rejects what AWS Batch cannot run; returns the job's retries and instance type."""
    if multinode and len(app.roles) > MAX_NODE_GROUPS:
        raise InvalidSpecError(
            "AppDef.roles",
            [r.name for r in app.roles],
            f"AWS Batch multi-node jobs have at most {MAX_NODE_GROUPS} node groups (one per "
            f"role); this app has {len(app.roles)} roles",
            f"merge roles that share an image and command into one role (at most "
            f"{MAX_NODE_GROUPS}), or run them as separate apps",
        )
    for role in app.roles:
        check_resource(role)
        if role.max_retries > 0 and role.retry_policy != RetryPolicy.APPLICATION:
            raise InvalidSpecError(
                f"Role[{role.name}].retry_policy",
                role.retry_policy.value,
                "AWS Batch retries a whole job, never single replicas or roles",
                "use RetryPolicy.APPLICATION",
            )
        for name in role.env:
            if name.startswith("AWS_BATCH"):
                raise InvalidSpecError(
                    f"Role[{role.name}].env",
                    name,
                    "AWS Batch reserves variable names starting with AWS_BATCH",
                    "rename the variable",
                )
    max_retries = max(role.max_retries for role in app.roles)
    if max_retries > 9:
        raise InvalidSpecError(
            "Role.max_retries",
            max_retries,
            "AWS Batch runs a job at most 10 times (9 retries)",
            "set max_retries <= 9",
        )
    itypes = {str(t) for r in app.roles if (t := r.resource.capabilities.get(K8S_ITYPE))}
    if multinode and len(itypes) > 1:
        raise InvalidSpecError(
            "Role.resource",
            sorted(itypes),
            "all node groups of an AWS Batch multi-node job run on one instance type",
            "give every role a resource of the same instance type",
        )
    itype = next(iter(itypes), None)
    if multinode and itype is not None:
        check_fits_instance_type(app, itype)
    return max_retries, itype


def check_fits_instance_type(app: AppDef, itype: str) -> None:
    """Refuses a role that asks for more than one instance of ``itype`` has (its published
    vCPUs, GPUs and memory): a multi-node job's nodes all run on ``itype``, and AWS Batch
    leaves a job that fits no instance RUNNABLE forever. Unknown types are left to AWS.

    >>> from anylaunch.specs import Resource, Role
    >>> res = Resource(cpu=64, gpu=0, memMB=1024, capabilities={K8S_ITYPE: "m5.xlarge"})
    >>> check_fits_instance_type(AppDef("a", [Role("w", "img:1", resource=res)]), "m5.xlarge")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Role[w].resource.cpu=64 is invalid: one m5.xlarge instance has 4 vCPUs...
    """
    row = INSTANCE_TYPES.get(itype)
    if row is None:
        return
    for role in app.roles:
        res = role.resource
        limits = (
            ("cpu", res.cpu, row.cpu, "vCPUs"),
            ("gpu", res.gpu, row.gpu, "GPUs"),
            ("memMB", res.memMB, int(row.mem_gib * 1024), "MiB of memory"),
        )
        for name, asked, has, what in limits:
            if asked > has:
                raise InvalidSpecError(
                    f"Role[{role.name}].resource.{name}",
                    asked,
                    f"one {itype} instance has {has} {what}, and every node of this multi-node "
                    "job runs on one (AWS Batch would leave the job RUNNABLE forever)",
                    f"ask for at most {has}, or use a larger instance type's named resource "
                    "(e.g. resource(h='aws_p4d.24xlarge'))",
                )


def device_mounts(role: Role) -> list[DeviceMount]:
    """Device mounts for the role's resource devices (EFA interfaces, Neuron devices)."""
    mounts = []
    for name, count in role.resource.devices.items():
        if count <= 0:
            continue
        to_mounts = DEVICES.get(name)
        if to_mounts is None:
            raise InvalidSpecError(
                f"Role[{role.name}].resource.devices",
                name,
                "is a device AWS Batch cannot map to host devices",
                f"use one of {', '.join(DEVICES)}, or mount the device with "
                "type=device,src=/dev/...",
            )
        mounts += to_mounts(count)
    return mounts


def volume_specs(
    role: Role,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The role's mounts as Batch (volumes, mountPoints, devices)."""
    volumes: list[dict[str, Any]] = []
    points: list[dict[str, Any]] = []
    devices: list[dict[str, Any]] = []
    for i, mount in enumerate([*role.mounts, *device_mounts(role)]):
        name = f"mount-{i}"
        if isinstance(mount, BindMount):
            volumes.append({"name": name, "host": {"sourcePath": mount.src_path}})
            points.append(
                {"sourceVolume": name, "containerPath": mount.dst_path, "readOnly": mount.read_only}
            )
        elif isinstance(mount, VolumeMount):
            if not _EFS_ID.match(mount.src):
                raise InvalidSpecError(
                    f"Role[{role.name}].mounts",
                    mount.src,
                    "an AWS Batch volume mount is an EFS file system, given by its id",
                    "use type=volume,src=fs-0123456789abcdef0,dst=/data, or a bind mount of a "
                    "host path",
                )
            volumes.append({"name": name, "efsVolumeConfiguration": {"fileSystemId": mount.src}})
            points.append(
                {"sourceVolume": name, "containerPath": mount.dst_path, "readOnly": mount.read_only}
            )
        else:
            devices.append(
                {
                    "hostPath": mount.src_path,
                    "containerPath": mount.dst_path,
                    "permissions": [_PERMISSIONS[p] for p in mount.permissions],
                }
            )
    return volumes, points, devices


def replica_command(start: int, command: list[str], runtime_env: dict[str, str]) -> list[str]:
    """A ``/bin/sh -c`` command that sets the replica id from the node index, exports the env
    values that use it and execs ``command`` (every word kept literal but for the id).

    >>> cmd = replica_command(2, ["echo", "r=" + _REPLICA_SENTINEL], {})
    >>> print(cmd[2])
    ANYLAUNCH_REPLICA_ID=$((AWS_BATCH_JOB_NODE_INDEX - 2)); export ANYLAUNCH_REPLICA_ID; exec "echo" "r=${ANYLAUNCH_REPLICA_ID}"
    """

    def word(text: str) -> str:
        return aws.double_quote(text).replace(_REPLICA_SENTINEL, f"${{{REPLICA_ID_ENV}}}")

    script = [f"{REPLICA_ID_ENV}=$(({NODE_INDEX_ENV} - {start}))", f"export {REPLICA_ID_ENV}"]
    script += [f"export {name}={word(value)}" for name, value in runtime_env.items()]
    script.append("exec " + " ".join(word(w) for w in command))
    return ["/bin/sh", "-c", "; ".join(script)]


def container_properties(
    role: Role,
    start: int,
    app_id: str,
    multinode: bool,
    opts: AWSBatchOpts,
    ulimits: list[dict[str, Any]],
    images: Mapping[str, tuple[str, str]],
) -> dict[str, Any]:
    """The container properties of ``role``'s node group (or of the single container)."""
    res = role.resource
    values = macros.Values(
        img_root="",
        app_id=app_id,
        replica_id="0" if role.num_replicas == 1 else _REPLICA_SENTINEL,
        rank0_env=MAIN_NODE_ADDR_ENV if multinode else RANK0_ENV,
    )
    rendered = values.apply(role)
    env = dict(rendered.env)
    env[ROLE_NAME_ENV] = role.name
    if not multinode:
        env[RANK0_ENV] = "localhost"
    command = [rendered.entrypoint, *rendered.args]
    runtime_env = {k: v for k, v in env.items() if _REPLICA_SENTINEL in v}
    if runtime_env or any(_REPLICA_SENTINEL in word for word in command):
        for name in runtime_env:
            if not _SHELL_NAME.match(name):
                raise InvalidSpecError(
                    f"Role[{role.name}].env",
                    name,
                    "uses ${replica_id}, which a shell sets on each node, but is not a "
                    "shell variable name",
                    "use letters, digits and '_' only",
                )
        command = replica_command(start, command, runtime_env)
        env = {k: v for k, v in env.items() if k not in runtime_env}

    repo_tag = images.get(role.image)
    requirements = [
        {"type": "VCPU", "value": str(res.cpu)},
        {"type": "MEMORY", "value": str(res.memMB)},
    ]
    if res.gpu > 0:
        requirements.append({"type": "GPU", "value": str(res.gpu)})
    volumes, mount_points, devices = volume_specs(role)
    # PyTorch data loaders share tensors through /dev/shm: Docker's 64 MiB default is
    # far too small, so let it grow up to the container's memory
    linux: dict[str, Any] = {"sharedMemorySize": res.memMB}
    if devices:
        linux["devices"] = devices
    container: dict[str, Any] = {
        "image": f"{repo_tag[0]}:{repo_tag[1]}" if repo_tag else role.image,
        "command": command,
        "environment": [{"name": k, "value": v} for k, v in env.items()],
        "resourceRequirements": requirements,
        "linuxParameters": linux,
        "logConfiguration": {"logDriver": "awslogs"},
    }
    if volumes:
        container["volumes"] = volumes
        container["mountPoints"] = mount_points
    if ulimits:
        container["ulimits"] = [dict(u) for u in ulimits]
    if opts.privileged:
        container["privileged"] = True
    if opts.job_role_arn:
        container["jobRoleArn"] = opts.job_role_arn
    if opts.execution_role_arn:
        container["executionRoleArn"] = opts.execution_role_arn
    return container
