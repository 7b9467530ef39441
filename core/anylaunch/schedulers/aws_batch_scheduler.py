"""The ``aws_batch`` scheduler: runs an AppDef as one AWS Batch job.

An app with one role and one replica becomes a plain container job. Any other app becomes a
multi-node parallel (MNP) job with one node group per role (AWS Batch allows at most five),
in role order, so the first replica of the first role is node 0, the main node.

Macros: ``app_id`` is the app id (``{queue}:{job name}``); ``img_root`` is empty;
``rank0_env`` names ``AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS``, which Batch sets on
every node but the main one (so expand it as ``$${${rank0_env}:=localhost}``; a single
container job gets ``ANYLAUNCH_RANK0_HOST=localhost``); ``replica_id`` is the node's index
within its role. A node group holds one container definition for all of its nodes, so in a
role with several replicas ``replica_id`` is worked out on the node from
``AWS_BATCH_JOB_NODE_INDEX`` by a ``/bin/sh`` wrapper (the image needs ``/bin/sh`` then).

Each job and job definition is tagged ``anylaunch/scheduler=aws_batch`` with the app name and
session; ``list`` finds apps by that tag. Logs are read from CloudWatch Logs (group
``/aws/batch/job`` unless the container's log configuration names another). Credentials come
only from boto3's standard chain (profile, environment, instance or task role); endpoints
may be overridden with ``AWS_ENDPOINT_URL_BATCH``/``AWS_ENDPOINT_URL_LOGS``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from anylaunch.schedulers import aws_common as aws
from anylaunch.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    filter_regex,
)
from anylaunch.specs.api import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    BindMount,
    DeviceMount,
    ReplicaStatus,
    Resource,
    RetryPolicy,
    Role,
    RoleStatus,
    VolumeMount,
    macros,
    make_app_handle,
)
from anylaunch.specs.errors import (
    InvalidRunConfigException,
    InvalidSpecError,
    UnknownAppException,
    did_you_mean,
)
from anylaunch.specs.named_resources_aws import EFA_DEVICE, K8S_ITYPE, NEURON_DEVICE
from anylaunch.specs.runopts import CfgVal, runopts
from anylaunch.specs.structured_opts import StructuredOpts

__all__ = [
    "CANCEL_REASON",
    "MAIN_NODE_ADDR_ENV",
    "MAX_NODE_GROUPS",
    "AWSBatchOpts",
    "AWSBatchScheduler",
    "BatchJobRequest",
    "create_scheduler",
    "format_request",
]

log: logging.Logger = logging.getLogger(__name__)

BACKEND = "aws_batch"
#: Set by Batch on every node of an MNP job but the main node: the main node's address.
MAIN_NODE_ADDR_ENV = "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"
#: Set by Batch on every node of an MNP job: the node's index.
NODE_INDEX_ENV = "AWS_BATCH_JOB_NODE_INDEX"
#: The rank-0 host of a single container job (``macros.rank0_env``): always localhost.
RANK0_ENV = "ANYLAUNCH_RANK0_HOST"
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
_DEVICE_PATHS = {EFA_DEVICE: "/dev/infiniband/uverbs{}", NEURON_DEVICE: "/dev/neuron{}"}
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


def _masked(value: Any) -> Any:
    """A copy of a request with the values of secret-looking environment variables masked."""
    from anylaunch.schedulers.local_scheduler import is_secret_env_name

    if isinstance(value, list):
        return [_masked(v) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"name", "value"} and is_secret_env_name(str(value["name"])):
        return {"name": value["name"], "value": "***"}
    return {k: _masked(v) for k, v in value.items()}


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
        text = yaml.safe_dump(_masked(dict(data)), sort_keys=False, width=100)
        return ["  " + line for line in text.rstrip("\n").split("\n")]

    lines = [f"aws_batch job {request.job_name} on queue {request.queue} (app id {request.app_id})"]
    if request.images_to_push:
        lines.append("push images:")
        lines += [f"  {img} -> {repo}:{tag}" for img, (repo, tag) in request.images_to_push.items()]
    lines += ["register_job_definition:", *block(request.job_definition)]
    lines += ["submit_job:", *block(request.submit_job)]
    return "\n".join(lines)


def _queue_name(queue: str) -> str:
    """The name of a queue given by name or ARN (``arn:...:job-queue/NAME``)."""
    return queue.rsplit("/", 1)[-1] if queue.startswith("arn:") else queue


def _parse_app_id(app_id: str) -> tuple[str, str] | None:
    queue, sep, name = str(app_id).rpartition(":")
    return (queue, name) if sep and queue and name else None


def _parse_ulimits(specs: list[str] | None) -> list[dict[str, Any]]:
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


def _check_resource(role: Role) -> Resource:
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


def _check_app(app: AppDef, multinode: bool) -> tuple[int, str | None]:
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
        _check_resource(role)
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
    return max_retries, next(iter(itypes), None)


def _device_mounts(role: Role) -> list[DeviceMount]:
    """Device mounts for the role's resource devices (EFA interfaces, Neuron devices)."""
    mounts = []
    for name, count in role.resource.devices.items():
        if count <= 0:
            continue
        pattern = _DEVICE_PATHS.get(name)
        if pattern is None:
            raise InvalidSpecError(
                f"Role[{role.name}].resource.devices",
                name,
                "is a device AWS Batch cannot map to host devices",
                f"use one of {', '.join(_DEVICE_PATHS)}, or mount the device with "
                "type=device,src=/dev/...",
            )
        mounts += [DeviceMount(pattern.format(i), pattern.format(i)) for i in range(count)]
    return mounts


def _volumes(role: Role) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The role's mounts as Batch (volumes, mountPoints, devices)."""
    volumes: list[dict[str, Any]] = []
    points: list[dict[str, Any]] = []
    devices: list[dict[str, Any]] = []
    for i, mount in enumerate([*role.mounts, *_device_mounts(role)]):
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


def _replica_command(start: int, command: list[str], runtime_env: dict[str, str]) -> list[str]:
    """A ``/bin/sh -c`` command that sets the replica id from the node index, exports the env
    values that use it and execs ``command`` (every word kept literal but for the id).

    >>> cmd = _replica_command(2, ["echo", "r=" + _REPLICA_SENTINEL], {})
    >>> print(cmd[2])
    ANYLAUNCH_REPLICA_ID=$((AWS_BATCH_JOB_NODE_INDEX - 2)); export ANYLAUNCH_REPLICA_ID; exec "echo" "r=${ANYLAUNCH_REPLICA_ID}"
    """

    def word(text: str) -> str:
        return aws.double_quote(text).replace(_REPLICA_SENTINEL, f"${{{REPLICA_ID_ENV}}}")

    script = [f"{REPLICA_ID_ENV}=$(({NODE_INDEX_ENV} - {start}))", f"export {REPLICA_ID_ENV}"]
    script += [f"export {name}={word(value)}" for name, value in runtime_env.items()]
    script.append("exec " + " ".join(word(w) for w in command))
    return ["/bin/sh", "-c", "; ".join(script)]


class AWSBatchScheduler(Scheduler[Mapping[str, CfgVal]]):
    """Runs apps as AWS Batch jobs (see the module docstring for the mapping).

    Args:
        session_name: goes into app handles (``aws_batch://{session_name}/{queue}:{job}``)
        client: a boto3 ``batch`` client to use (default: one from the standard chain)
        log_client: a boto3 ``logs`` client to use (default: one from the standard chain)
    """

    def __init__(self, session_name: str, client: Any = None, log_client: Any = None) -> None:
        super().__init__(BACKEND, session_name)
        self._batch = client
        self._logs = log_client
        self._job_ids: dict[str, str] = {}  # app id -> Batch job id, once known

    @property
    def client(self) -> Any:
        """The boto3 Batch client (created on first use)."""
        if self._batch is None:
            self._batch = aws.make_client("batch", BACKEND)
        return self._batch

    @property
    def log_client(self) -> Any:
        """The boto3 CloudWatch Logs client (created on first use)."""
        if self._logs is None:
            self._logs = aws.make_client("logs", BACKEND)
        return self._logs

    # --- dryrun and schedule --------------------------------------------------------------

    def _run_opts(self) -> runopts:
        return AWSBatchOpts.as_runopts()

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        opts = AWSBatchOpts.from_cfg(cfg)
        if not opts.queue.strip():
            raise InvalidRunConfigException(
                "queue", opts.queue, "is empty", "pass the job queue's name or ARN"
            )
        if opts.priority is not None and opts.share_id is None:
            raise InvalidRunConfigException(
                "priority",
                opts.priority,
                "only applies within a share (fair-share job queues)",
                "set share_id too, or drop priority",
            )
        if opts.priority is not None and not 0 <= opts.priority <= 9999:
            raise InvalidRunConfigException(
                "priority", opts.priority, "is out of range", "use 0-9999"
            )
        if opts.startup_timeout < 0:
            raise InvalidRunConfigException(
                "startup_timeout", opts.startup_timeout, "must be >= 0", "e.g. 3600 (0: no limit)"
            )
        ulimits = _parse_ulimits(opts.ulimits)
        images = aws.plan_image_pushes(app, opts.image_repo)

        multinode = len(app.roles) > 1 or app.roles[0].num_replicas > 1
        max_retries, itype = _check_app(app, multinode)

        queue_name = _queue_name(opts.queue)
        job_name = aws.make_job_name(app.name, 128)
        app_id = f"{queue_name}:{job_name}"
        tags = aws.app_tags(BACKEND, app, self.session_name)
        tags[STARTUP_TIMEOUT_TAG] = str(opts.startup_timeout)

        job_def: dict[str, Any] = {"jobDefinitionName": job_name}
        if multinode:
            groups: list[dict[str, Any]] = []
            start = 0
            for role in app.roles:
                container = self._container(role, start, app_id, True, opts, ulimits, images)
                if itype:
                    container["instanceType"] = itype
                end = start + role.num_replicas - 1
                groups.append({"targetNodes": f"{start}:{end}", "container": container})
                start = end + 1
            job_def["type"] = "multinode"
            job_def["nodeProperties"] = {
                "numNodes": start,
                "mainNode": 0,
                "nodeRangeProperties": groups,
            }
        else:
            job_def["type"] = "container"
            job_def["containerProperties"] = self._container(
                app.roles[0], 0, app_id, False, opts, ulimits, images
            )
        job_def["retryStrategy"] = {"attempts": max_retries + 1}
        job_def["propagateTags"] = True
        job_def["tags"] = tags
        job_def["platformCapabilities"] = ["EC2"]

        submit: dict[str, Any] = {"jobName": job_name, "jobQueue": opts.queue, "tags": tags}
        if opts.share_id is not None:
            submit["shareIdentifier"] = opts.share_id
        if opts.priority is not None:
            submit["schedulingPriorityOverride"] = opts.priority
        aws.check_request("batch", "RegisterJobDefinition", job_def)
        aws.check_request("batch", "SubmitJob", {**submit, "jobDefinition": job_name})
        request = BatchJobRequest(app_id, job_name, opts.queue, job_def, submit, images)
        return AppDryRunInfo(request, format_request)

    def _container(
        self,
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
            command = _replica_command(start, command, runtime_env)
            env = {k: v for k, v in env.items() if k not in runtime_env}

        repo_tag = images.get(role.image)
        requirements = [
            {"type": "VCPU", "value": str(res.cpu)},
            {"type": "MEMORY", "value": str(res.memMB)},
        ]
        if res.gpu > 0:
            requirements.append({"type": "GPU", "value": str(res.gpu)})
        volumes, mount_points, devices = _volumes(role)
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

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Pushes local images, registers the job definition and submits the job.

        Returns the app id ``{queue}:{job name}`` at once (the job starts SUBMITTED).

        Raises:
            AWSRequestError: AWS refused the job definition or the job (with its reason).
        """
        request = dryrun_info.request
        if not isinstance(request, BatchJobRequest):
            raise InvalidSpecError(
                "dryrun_info.request",
                type(request).__name__,
                "is not an aws_batch request",
                "create it with the aws_batch scheduler's submit_dryrun",
            )
        aws.push_images(request.images_to_push, BACKEND)
        try:
            registered = self.client.register_job_definition(**request.job_definition)
        except Exception as e:
            if aws.is_client_error(e):
                raise aws.AWSRequestError(
                    f"AWS Batch refused job definition {request.job_name}: {e}"
                ) from e
            raise
        definition = registered["jobDefinitionArn"]
        try:
            submitted = self.client.submit_job(**request.submit_job, jobDefinition=definition)
        except Exception as e:
            # do not leave an orphan job definition behind
            try:
                self.client.deregister_job_definition(jobDefinition=definition)
            except Exception:
                log.warning("could not deregister job definition %s", definition)
            if aws.is_client_error(e):
                raise aws.AWSRequestError(
                    f"AWS Batch refused job {request.job_name} on queue {request.queue}: {e}. "
                    "Fix: check that the queue exists and is ENABLED"
                ) from e
            raise
        self._job_ids[request.app_id] = submitted["jobId"]
        return request.app_id

    # --- finding jobs ---------------------------------------------------------------------

    def _job_id(self, app_id: str) -> str | None:
        """The Batch job id of an app id, found by job name in its queue (cached)."""
        if app_id in self._job_ids:
            return self._job_ids[app_id]
        parsed = _parse_app_id(app_id)
        if parsed is None:
            return None
        queue, name = parsed
        try:
            found = self.client.list_jobs(
                jobQueue=queue, filters=[{"name": "JOB_NAME", "values": [name]}]
            )["jobSummaryList"]
        except Exception as e:
            if aws.is_client_error(e, "ClientException"):
                return None  # no such queue
            raise
        found = [s for s in found if s.get("jobName") == name]
        if not found:
            return None
        job_id = str(max(found, key=lambda s: s.get("createdAt", 0))["jobId"])
        self._job_ids[app_id] = job_id
        return job_id

    def _describe_jobs(self, job_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Batch job descriptions by job id, 100 per call; unknown ids are left out."""
        jobs: dict[str, dict[str, Any]] = {}
        for i in range(0, len(job_ids), _DESCRIBE_BATCH):
            chunk = list(job_ids[i : i + _DESCRIBE_BATCH])
            for job in self.client.describe_jobs(jobs=chunk)["jobs"]:
                jobs[str(job["jobId"])] = job
        return jobs

    def _job(self, app_id: str) -> dict[str, Any] | None:
        job_id = self._job_id(app_id)
        return self._describe_jobs([job_id]).get(job_id) if job_id else None

    # --- queries --------------------------------------------------------------------------

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """The app's state, restarts, per-node statuses and roles; None for an unknown app.

        A job still queued (SUBMITTED, PENDING or RUNNABLE) after its startup timeout is
        terminated and reported FAILED with the reason Batch gives for the wait.
        """
        return self.describe_many([app_id])[app_id]

    def describe_many(self, app_ids: Sequence[str]) -> dict[str, DescribeAppResponse | None]:
        """Describes many apps with one ``describe_jobs`` call per 100 jobs (plus one per 100
        nodes of running multi-node jobs)."""
        job_ids = {app_id: self._job_id(app_id) for app_id in app_ids}
        jobs = self._describe_jobs([j for j in job_ids.values() if j])
        node_ids = [
            f"{job['jobId']}#{i}"
            for job in jobs.values()
            if job.get("nodeProperties") and job.get("status") not in _QUEUED
            for i in range(int(job["nodeProperties"].get("numNodes", 0)))
        ]
        nodes = self._describe_jobs(node_ids) if node_ids else {}
        now = time.time()
        result: dict[str, DescribeAppResponse | None] = {}
        for app_id, job_id in job_ids.items():
            job = jobs.get(job_id) if job_id else None
            result[app_id] = None if job is None else self._response(app_id, job, nodes, now)
        return result

    def _response(
        self, app_id: str, job: dict[str, Any], nodes: Mapping[str, dict[str, Any]], now: float
    ) -> DescribeAppResponse:
        state, msg, timed_out = _job_state(job, now)
        if timed_out and not str(job.get("statusReason", "")).startswith(TIMEOUT_REASON):
            # enforce the deadline in Batch too, so that no process sees the job start later
            self.client.terminate_job(jobId=job["jobId"], reason=msg[:1024])
        attempts = job.get("attempts") or []
        restarts = (
            len(attempts) if job.get("status") in _QUEUED | {"STARTING"} else len(attempts) - 1
        )
        statuses = []
        for name, start, end, _ in _node_groups(job):
            replicas = []
            for k in range(end - start + 1):
                node = nodes.get(f"{job['jobId']}#{start + k}")
                rep_state = _job_state(node, now)[0] if node is not None else state
                if state.is_terminal() and not rep_state.is_terminal():
                    rep_state = state
                replicas.append(ReplicaStatus(k, rep_state, name, _host(node or job)))
            statuses.append(RoleStatus(name, replicas))
        region = str(job.get("jobArn", "")).split(":")[3:4]
        return DescribeAppResponse(
            app_id=app_id,
            state=state,
            num_restarts=max(restarts, 0),
            msg=msg or NONE,
            structured_error_msg=NONE,
            ui_url=(
                f"https://{region[0]}.console.aws.amazon.com/batch/home?region={region[0]}"
                f"#jobs/detail/{job['jobId']}"
                if region
                else None
            ),
            metadata={
                "job_id": str(job["jobId"]),
                "job_arn": str(job.get("jobArn", "")),
                "job_queue": str(job.get("jobQueue", "")),
                "job_definition": str(job.get("jobDefinition", "")),
                "batch_status": str(job.get("status", "")),
            },
            roles_statuses=statuses,
            roles=[_role_of(name, start, end, c) for name, start, end, c in _node_groups(job)],
        )

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """Apps this scheduler launched (found by tag), oldest first, in ``cfg['queue']`` or in
        every job queue."""
        queue = (cfg or {}).get("queue")
        if queue:
            queues = [str(queue)]
        else:
            pages = self.client.get_paginator("describe_job_queues").paginate()
            queues = [q["jobQueueName"] for page in pages for q in page["jobQueues"]]
        job_ids = []
        for q in queues:
            # a filter makes list_jobs return jobs in every status, not only RUNNING ones
            pages = self.client.get_paginator("list_jobs").paginate(
                jobQueue=q, filters=[{"name": "AFTER_CREATED_AT", "values": ["0"]}]
            )
            job_ids += [s["jobId"] for page in pages for s in page["jobSummaryList"]]
        now = time.time()
        found = []
        for job in self._describe_jobs(job_ids).values():
            tags = job.get("tags") or {}
            if tags.get(aws.SCHEDULER_TAG) != BACKEND:
                continue
            app_id = f"{_queue_name(str(job.get('jobQueue', '')))}:{job['jobName']}"
            session = tags.get(aws.SESSION_TAG) or self.session_name
            found.append(
                (
                    job.get("createdAt", 0),
                    ListAppResponse(
                        app_id=app_id,
                        state=_job_state(job, now)[0],
                        app_handle=make_app_handle(self.backend, session, app_id),
                        name=str(tags.get(aws.APP_NAME_TAG, job["jobName"])),
                    ),
                )
            )
        return [listed for _, listed in sorted(found, key=lambda item: item[0])]

    # --- control --------------------------------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        """Terminates the job (every node of a multi-node job); it ends FAILED in Batch, which
        describe reports as CANCELLED."""
        job_id = self._job_id(app_id)
        if job_id is not None:
            self.client.terminate_job(jobId=job_id, reason=CANCEL_REASON)

    def _delete_existing(self, app_id: str) -> None:
        """Terminates the job if it runs and deregisters its job definition (Batch keeps the
        job's record itself for a while; it cannot be deleted)."""
        job = self._job(app_id)
        if job is None:
            return
        if not _job_state(job, time.time())[0].is_terminal():
            self.client.terminate_job(jobId=job["jobId"], reason=CANCEL_REASON)
        definition = job.get("jobDefinition")
        if definition:
            try:
                self.client.deregister_job_definition(jobDefinition=definition)
            except Exception as e:
                if not aws.is_client_error(e, "ClientException"):
                    raise

    # --- logs -----------------------------------------------------------------------------

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterable[str]:
        """Lines of replica ``k`` of ``role_name`` from CloudWatch Logs.

        Batch sends stdout and stderr to one stream per node, so only the combined stream
        exists. With ``should_tail`` it follows the stream until the job ended.

        Raises:
            UnknownAppException: no such app.
            InvalidSpecError: an unknown role, a replica out of range, or stdout/stderr asked.
        """
        if streams not in (None, Stream.COMBINED):
            raise InvalidSpecError(
                "streams",
                str(streams),
                "AWS Batch keeps stdout and stderr in one combined stream per node",
                "use streams=None or Stream.COMBINED",
            )
        job = self._job(app_id)
        if job is None:
            raise UnknownAppException(make_app_handle(self.backend, self.session_name, str(app_id)))
        groups = {name: (start, end, c) for name, start, end, c in _node_groups(job)}
        if role_name not in groups:
            raise InvalidSpecError(
                "role_name",
                role_name,
                f"app {app_id} has no such role.{did_you_mean(str(role_name), groups)}",
                f"use one of: {', '.join(groups)}",
            )
        start, end, container = groups[role_name]
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= end - start:
            raise InvalidSpecError(
                "k",
                k,
                f"role {role_name!r} of app {app_id} has {end - start + 1} replica(s)",
                f"use a replica index from 0 to {end - start}",
            )
        options = (container.get("logConfiguration") or {}).get("options") or {}
        group = str(options.get("awslogs-group", DEFAULT_LOG_GROUP))
        job_id = str(job["jobId"])
        node_id = f"{job_id}#{start + k}" if job.get("nodeProperties") else None

        def locate() -> tuple[str, str] | None:
            ids = [node_id, job_id] if node_id else [job_id]
            found = self._describe_jobs(ids)
            # a backend without per-node jobs keeps every node's output in the job's stream
            stream = _log_stream(found.get(node_id or "")) or _log_stream(found.get(job_id))
            return (group, stream) if stream else None

        def is_done() -> bool:
            current = self._describe_jobs([job_id]).get(job_id)
            return current is None or _job_state(current, time.time())[0].is_terminal()

        lines = aws.follow_log_stream(self.log_client, locate, is_done, since, until, should_tail)
        return filter_regex(regex, lines) if regex else lines


def _job_state(job: Mapping[str, Any], now: float) -> tuple[AppState, str, bool]:
    """(state, message, whether the startup timeout has just expired) of a Batch job."""
    status = str(job.get("status", ""))
    reason = str(job.get("statusReason") or "")
    state = _STATES.get(status, AppState.UNKNOWN)
    if reason.startswith(CANCEL_REASON):
        return (
            (AppState.CANCELLED, "cancelled by request", False)
            if status == "FAILED"
            else (
                state,
                f"{status}: cancel requested",
                False,
            )
        )
    if reason.startswith(TIMEOUT_REASON):
        return AppState.FAILED, reason, False
    timeout = int((job.get("tags") or {}).get(STARTUP_TIMEOUT_TAG, "0") or 0)
    if status in _QUEUED and timeout > 0:
        attempts = job.get("attempts") or []
        # a retried job queues again after its last attempt stopped
        since_ms = (attempts[-1].get("stoppedAt") if attempts else None) or job.get("createdAt")
        waited = now - float(since_ms or now * 1000) / 1000
        if waited > timeout:
            said = f"; AWS Batch says: {reason}" if reason else ""
            return (
                AppState.FAILED,
                f"{TIMEOUT_REASON}: {status} for {waited:.0f}s, longer than "
                f"startup_timeout={timeout}s{said}",
                True,
            )
    details = []
    container = job.get("container") or {}
    if status == "FAILED":
        if container.get("exitCode") is not None:
            details.append(f"exit code {container['exitCode']}")
        if container.get("reason"):
            details.append(str(container["reason"]))
    text = "; ".join([reason, *details] if reason else details)
    if status in _QUEUED | {"STARTING"}:
        text = f"{status}: {text}" if text else status
    return state, text, False


def _host(job: Mapping[str, Any]) -> str:
    interfaces = (job.get("container") or {}).get("networkInterfaces") or []
    return str(interfaces[0].get("privateIpv4Address", "")) if interfaces else ""


def _log_stream(job: Mapping[str, Any] | None) -> str | None:
    if not job:
        return None
    stream = (job.get("container") or {}).get("logStreamName")
    if not stream:
        attempts = job.get("attempts") or []
        stream = (attempts[-1].get("container") or {}).get("logStreamName") if attempts else None
    return str(stream) if stream else None


def _node_groups(job: Mapping[str, Any]) -> list[tuple[str, int, int, dict[str, Any]]]:
    """(role name, first node, last node, container) of each node group of a job."""
    props = job.get("nodeProperties")
    if not props:
        return [(_role_name(job.get("container") or {}, 0), 0, 0, job.get("container") or {})]
    num_nodes = int(props.get("numNodes", 1))
    groups = []
    for i, group in enumerate(props.get("nodeRangeProperties", [])):
        first, sep, last = str(group.get("targetNodes", "")).partition(":")
        start = int(first) if first else 0
        end = (int(last) if last else num_nodes - 1) if sep else start
        container = group.get("container") or {}
        groups.append((_role_name(container, i), start, end, container))
    return groups


def _env_of(container: Mapping[str, Any]) -> dict[str, str]:
    return {str(e["name"]): str(e.get("value", "")) for e in container.get("environment") or []}


def _role_name(container: Mapping[str, Any], index: int) -> str:
    name = _env_of(container).get(ROLE_NAME_ENV, "")
    return name if re.match(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$", name) else f"group{index}"


def _role_of(name: str, start: int, end: int, container: Mapping[str, Any]) -> Role:
    """A Role as Batch knows it (commands as run, after macros and any replica wrapper)."""
    command = [str(c) for c in container.get("command") or []]
    reqs = {
        r.get("type"): str(r.get("value", "0")) for r in container.get("resourceRequirements") or []
    }
    env = {k: v for k, v in _env_of(container).items() if k not in (ROLE_NAME_ENV, RANK0_ENV)}
    return Role(
        name=name,
        image=str(container.get("image", "")),
        entrypoint=command[0] if command else "<MISSING>",
        args=command[1:],
        env=env,
        num_replicas=end - start + 1,
        resource=Resource(
            cpu=max(int(float(reqs.get("VCPU", container.get("vcpus", 0)) or 0)), 0),
            gpu=max(int(float(reqs.get("GPU", 0) or 0)), 0),
            memMB=max(int(float(reqs.get("MEMORY", container.get("memory", 0)) or 0)), 0),
        ),
    )


def create_scheduler(session_name: str, **kwargs: Any) -> AWSBatchScheduler:
    """Creates the ``aws_batch`` scheduler (the registry's factory).

    Accepts ``client`` (boto3 batch) and ``log_client`` (boto3 logs); other keyword arguments
    are ignored. No AWS call is made until one is needed.

    >>> create_scheduler("demo").backend
    'aws_batch'
    """
    return AWSBatchScheduler(
        session_name, client=kwargs.get("client"), log_client=kwargs.get("log_client")
    )
