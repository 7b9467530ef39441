"""The ``aws_sagemaker`` scheduler: runs a single-role AppDef as a SageMaker training job.

The role's image is the training image, its entrypoint and args become the container's
entrypoint and arguments (passed verbatim), its env the job's environment, and
``num_replicas`` the instance count. The instance type comes from the ``instance_type`` run
option or, failing that, from the role's named resource (``aws_p3.2xlarge`` runs on
``ml.p3.2xlarge``).

Macros: ``app_id`` is the training job name (which is also the app id); ``img_root`` is
empty; ``rank0_env`` names ``ANYLAUNCH_RANK0_HOST``, set to ``algo-1`` (SageMaker names its
hosts ``algo-1`` to ``algo-N``); ``replica_id`` is ``0`` and cannot be used with several
instances, which run identical containers (read the host from
``/opt/ml/input/config/resourceconfig.json`` instead).

Jobs are tagged ``anylaunch/scheduler=aws_sagemaker``, with the job metadata every scheduler
stamps and the app's owner, which ``describe`` returns (read with one ``ListTags`` per job and
scheduler: a training job's description has no tags); ``list`` finds them with SageMaker
Search. Logs come from CloudWatch Logs ``/aws/sagemaker/TrainingJobs``, one stream per host.
Credentials come only from boto3's standard chain.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from anylaunch.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    LogQuery,
)
from anylaunch.schedulers.aws import common as aws
from anylaunch.schedulers.aws.common import masked_repr, masked_request
from anylaunch.schedulers.common.capacity import Capacity
from anylaunch.schedulers.common.job_metadata import JOB_METADATA_KEYS, OWNER_KEY, owner_metadata
from anylaunch.schedulers.common.roles import RANK0_ENV
from anylaunch.specs.api import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    ReplicaStatus,
    Role,
    RoleStatus,
    macros,
)
from anylaunch.specs.errors import (
    InvalidRunConfigException,
    InvalidSpecError,
)
from anylaunch.specs.named_resources_aws import instance_type_from_resource
from anylaunch.specs.runopts import CfgVal, runopts
from anylaunch.specs.structured_opts import StructuredOpts

__all__ = [
    "LOG_GROUP",
    "AWSSageMakerOpts",
    "AWSSageMakerScheduler",
    "SageMakerJobRequest",
    "create_scheduler",
    "format_request",
]

log: logging.Logger = logging.getLogger(__name__)

BACKEND = "aws_sagemaker"
LOG_GROUP = "/aws/sagemaker/TrainingJobs"
RANK0_HOST = "algo-1"
#: Name the app's role in the job's environment and tags, so describe and log_iter know it.
ROLE_NAME_ENV = "ANYLAUNCH_ROLE_NAME"
ROLE_NAME_TAG = "anylaunch/role"
_SENTINEL = "\x00anylaunch-replica-id\x00"
_ROLE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
# InProgress with one of these secondary statuses has not started the training container yet
_STARTING = frozenset(
    {
        "Starting",
        "Pending",
        "LaunchingMLInstances",
        "PreparingTrainingStack",
        "Downloading",
        "DownloadingTrainingImage",
        "Restarting",
    }
)


#: The tags describe reads back (cached per job: anylaunch never changes them after creating it).
_DESCRIBED_TAGS = frozenset({*JOB_METADATA_KEYS, OWNER_KEY, ROLE_NAME_TAG})
#: How many jobs' tags a scheduler keeps (the oldest read is dropped first).
_TAG_CACHE_SIZE = 512

#: SageMaker's limit on a training job's MaxRuntimeInSeconds: 28 days.
MAX_RUN_S = 28 * 24 * 3600


@dataclass
class AWSSageMakerOpts(StructuredOpts):
    """Run options of the ``aws_sagemaker`` scheduler."""

    role_arn: str
    """IAM role SageMaker assumes to run the job (reads the image, writes output and logs)."""

    output_path: str
    """S3 URI the job's model artifacts are written to, e.g. s3://my-bucket/trainer/."""

    instance_type: str | None = None
    """Instance type, e.g. ml.p3.2xlarge (default: the role's named resource's instance type)."""

    volume_size: int = 30
    """GB of storage attached to each instance."""

    max_run: int = 86400
    """Seconds the job may train before SageMaker stops it."""

    use_spot_instances: bool = False
    """Train on managed spot instances (needs max_wait)."""

    max_wait: int | None = None
    """Seconds to wait for spot capacity plus training (at least max_run); spot only."""

    hyperparameters: dict[str, str] | None = None
    """Hyperparameters written to /opt/ml/input/config/hyperparameters.json."""

    subnets: list[str] | None = None
    """VPC subnet ids to run in (with security_group_ids)."""

    security_group_ids: list[str] | None = None
    """VPC security group ids (with subnets)."""

    checkpoint_s3_uri: str | None = None
    """S3 URI that /opt/ml/checkpoints is synced with (resumes spot jobs)."""

    image_repo: str | None = None
    """Repository that locally built images (sha256:...) are pushed to before submitting (an ECR repository SageMaker can pull from)."""


@dataclass
class SageMakerJobRequest:
    """The native request: the arguments of ``sagemaker.create_training_job``."""

    job_name: str
    create_training_job: dict[str, Any]
    #: Local image id -> (repository, tag) pushed before the job is created.
    images_to_push: dict[str, tuple[str, str]] = field(default_factory=dict)

    def __repr__(self) -> str:
        return masked_repr(self)


def format_request(request: SageMakerJobRequest) -> str:
    """Readable form of a request (YAML), with secret-looking environment values masked.

    >>> print(format_request(SageMakerJobRequest("t-1", {"TrainingJobName": "t-1",
    ...     "Environment": {"DB_PASSWORD": "x", "LR": "0.1"}})))
    aws_sagemaker training job t-1
    create_training_job:
      TrainingJobName: t-1
      Environment:
        DB_PASSWORD: '***'
        LR: '0.1'
    """
    import yaml

    body = masked_request(dict(request.create_training_job))
    lines = [f"aws_sagemaker training job {request.job_name}"]
    if request.images_to_push:
        lines.append("push images:")
        lines += [f"  {img} -> {repo}:{tag}" for img, (repo, tag) in request.images_to_push.items()]
    text = yaml.safe_dump(body, sort_keys=False, width=100).rstrip("\n")
    lines += ["create_training_job:", *("  " + line for line in text.split("\n"))]
    return "\n".join(lines)


def _instance_type(role: Role, opts: AWSSageMakerOpts) -> str:
    itype = opts.instance_type or instance_type_from_resource(role.resource)
    if not itype:
        raise InvalidRunConfigException(
            "instance_type",
            None,
            f"role {role.name!r} has no named resource with an instance type",
            "set instance_type (e.g. ml.m5.xlarge) or give the role a named resource such as "
            "resource(h='aws_m5.xlarge')",
        )
    return itype if itype.startswith("ml.") else f"ml.{itype}"


def _job_state(job: Mapping[str, Any]) -> tuple[AppState, str]:
    """(state, message) of a training job description (or search result)."""
    status = str(job.get("TrainingJobStatus", ""))
    secondary = str(job.get("SecondaryStatus", ""))
    reason = str(job.get("FailureReason") or "")
    if status == "InProgress":
        return (AppState.PENDING if secondary in _STARTING else AppState.RUNNING), secondary
    if status == "Completed":
        return AppState.SUCCEEDED, secondary
    if status == "Failed":
        return AppState.FAILED, reason or secondary
    if status == "Stopping":
        return AppState.RUNNING, f"Stopping ({secondary})" if secondary else "Stopping"
    if status == "Deleting":  # only ended jobs can be deleted, but how they ended is gone
        return AppState.UNKNOWN, "the training job is being deleted"
    if status == "Stopped":
        if secondary == "MaxWaitTimeExceeded":
            return AppState.FAILED, f"stopped: {secondary}{_spot_wait(job)[1]}"
        if secondary == "MaxRuntimeExceeded":
            return AppState.FAILED, f"stopped: {secondary}"
        return AppState.CANCELLED, "stopped"
    return AppState.UNKNOWN, f"{status} {secondary}".strip()


def _spot_wait(job: Mapping[str, Any]) -> tuple[str | None, str]:
    """(failure category, what to add to the message) of a managed spot job stopped at
    MaxWaitTimeExceeded, from the secondary statuses it went through: interrupted (its spot
    instances were reclaimed) is the platform's loss, never training is capacity that did
    not come, and a job that trained without interruption simply ran out of time.

    >>> _spot_wait({"SecondaryStatusTransitions": [{"Status": "Starting"},
    ...     {"Status": "Training"}, {"Status": "Interrupted"}, {"Status": "Stopping"}]})
    ('infrastructure', ' after a spot interruption (Interrupted)')
    >>> _spot_wait({"SecondaryStatusTransitions": [{"Status": "Starting"}]})[0]
    'startup'
    """
    seen = {str(t.get("Status")) for t in job.get("SecondaryStatusTransitions") or []}
    if "Interrupted" in seen:
        return "infrastructure", " after a spot interruption (Interrupted)"
    if seen and not seen & {"Downloading", "Training", "Uploading"}:
        return "startup", ": spot capacity did not start the job before max_wait"
    return None, ""


def _owner_tags(app: AppDef) -> list[dict[str, str]]:
    """The app's owner as a tag, for ``anylaunch reap`` (AWS's ``DescribeTrainingJob`` returns
    the role's env, which names it, but emulators such as moto do not); only an owner that is a
    valid tag value as it is: a changed owner would name another run to the reaper.

    >>> env = {"ANYLAUNCH_PARENT_RUN_ID": "airflow:dag/run/task"}
    >>> _owner_tags(AppDef("t", [Role("r", "img", env=env)]))
    [{'Key': 'anylaunch/parent_run_id', 'Value': 'airflow:dag/run/task'}]
    >>> _owner_tags(AppDef("t", [Role("r", "img", env={"ANYLAUNCH_PARENT_RUN_ID": "p:#1"})]))
    []
    """
    return [{"Key": k, "Value": v} for k, v in owner_metadata(app).items() if aws.tag_value(v) == v]


def _declared(job: Mapping[str, Any], state: AppState, msg: str) -> str:
    """The structured error of a failed job whose words alone do not tell the category (a
    spot job stopped at MaxWaitTimeExceeded), else ``NONE``."""
    if state != AppState.FAILED or job.get("SecondaryStatus") != "MaxWaitTimeExceeded":
        return NONE
    category = _spot_wait(job)[0]
    return json.dumps({"message": msg, "category": category}) if category else NONE


class AWSSageMakerScheduler(aws.AWSScheduler):
    """Runs single-role apps as SageMaker training jobs.

    Args:
        session_name: goes into app handles (``aws_sagemaker://{session_name}/{job name}``)
        client: a boto3 ``sagemaker`` client to use (default: one from the standard chain)
        log_client: a boto3 ``logs`` client to use (default: one from the standard chain)
    """

    request_type = SageMakerJobRequest
    array_refusal = (
        "a training job is one job with no array form, so N indices would be N "
        "CreateTrainingJob calls, N jobs to poll and N sets of logs, which is the fan-out "
        "arrays avoid (and each job is billed its own startup); run the array on aws_batch"
    )

    def __init__(self, session_name: str, client: Any = None, log_client: Any = None) -> None:
        super().__init__(BACKEND, session_name, "sagemaker", client, log_client)
        self._tags: dict[tuple[str, str], dict[str, str]] = {}

    # --- dryrun and schedule --------------------------------------------------------------

    def _run_opts(self) -> runopts:
        return AWSSageMakerOpts.as_runopts()

    def _check_capacity(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> Capacity:
        """No signal: SageMaker says nothing read-only about free on-demand or spot capacity
        (a shortage shows only once a job waits in Starting); the account's instance quotas
        are in the Service Quotas API, another service and permission, not asked here."""
        return Capacity.unknown(
            "SageMaker has no read-only signal of free on-demand or spot capacity (a shortage "
            "shows once the job waits in Starting); instance quotas are not read"
        )

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """The instance type decides the resources: a role needs none of its own."""

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        opts = AWSSageMakerOpts.from_cfg(cfg)
        if len(app.roles) != 1:
            raise InvalidSpecError(
                "AppDef.roles",
                [r.name for r in app.roles],
                "a SageMaker training job runs one role (every instance runs the same container)",
                "run each role as its own app, or use the aws_batch or kubernetes scheduler",
            )
        role = app.roles[0]
        if not role.image:
            raise InvalidSpecError(
                f"Role[{role.name}].image", role.image, "is empty", "set the training image URI"
            )
        if not opts.output_path.startswith("s3://"):
            raise InvalidRunConfigException(
                "output_path", opts.output_path, "is not an S3 URI", "e.g. s3://my-bucket/prefix/"
            )
        aws.check_arn("role_arn", opts.role_arn, "role")
        for name, value in (("volume_size", opts.volume_size), ("max_run", opts.max_run)):
            if value < 1:
                raise InvalidRunConfigException(name, value, "must be at least 1", "e.g. 30")
        if opts.max_run > MAX_RUN_S:
            raise InvalidRunConfigException(
                "max_run",
                opts.max_run,
                f"SageMaker runs a training job at most 28 days ({MAX_RUN_S} s)",
                f"set max_run <= {MAX_RUN_S}, and checkpoint to resume in a new job",
            )
        if opts.use_spot_instances and (opts.max_wait is None or opts.max_wait < opts.max_run):
            raise InvalidRunConfigException(
                "max_wait",
                opts.max_wait,
                f"spot training needs max_wait >= max_run ({opts.max_run} s)",
                f"set max_wait to at least {opts.max_run}",
            )
        if opts.max_wait is not None and not opts.use_spot_instances:
            raise InvalidRunConfigException(
                "max_wait",
                opts.max_wait,
                "only applies to spot training",
                "drop it, or set use_spot_instances",
            )
        if bool(opts.subnets) != bool(opts.security_group_ids):
            raise InvalidRunConfigException(
                "subnets" if not opts.subnets else "security_group_ids",
                None,
                "a VPC configuration needs both subnets and security_group_ids",
                "set both, or neither",
            )
        if role.max_retries > 30:
            raise InvalidSpecError(
                f"Role[{role.name}].max_retries",
                role.max_retries,
                "SageMaker retries a job at most 30 times",
                "set max_retries <= 30",
            )

        images = aws.plan_image_pushes(app, opts.image_repo)
        job_name = aws.make_job_name(app.name, 63, underscores=False)
        values = macros.Values(
            img_root="",
            app_id=job_name,
            replica_id="0" if role.num_replicas == 1 else _SENTINEL,
            rank0_env=RANK0_ENV,
        )
        rendered = values.apply(role)
        uses = [f"args[{i}]" for i, a in enumerate(rendered.args) if _SENTINEL in a]
        uses += [f"env[{k!r}]" for k, v in rendered.env.items() if _SENTINEL in v]
        if uses:
            raise InvalidSpecError(
                f"Role[{role.name}].{uses[0]}",
                macros.replica_id,
                f"the {role.num_replicas} instances of a SageMaker job run identical containers, "
                "so there is no per-instance replica id to substitute",
                "read the host (algo-1, algo-2, ...) from "
                "/opt/ml/input/config/resourceconfig.json instead",
            )
        env = {**rendered.env, RANK0_ENV: RANK0_HOST, ROLE_NAME_ENV: role.name}
        repo_tag = images.get(role.image)
        algorithm: dict[str, Any] = {
            "TrainingImage": f"{repo_tag[0]}:{repo_tag[1]}" if repo_tag else role.image,
            "TrainingInputMode": "File",
            "ContainerEntrypoint": [rendered.entrypoint],
        }
        if rendered.args:
            algorithm["ContainerArguments"] = list(rendered.args)
        stopping: dict[str, Any] = {"MaxRuntimeInSeconds": opts.max_run}
        request: dict[str, Any] = {
            "TrainingJobName": job_name,
            "AlgorithmSpecification": algorithm,
            "RoleArn": opts.role_arn,
            "OutputDataConfig": {"S3OutputPath": opts.output_path},
            "ResourceConfig": {
                "InstanceType": _instance_type(role, opts),
                "InstanceCount": role.num_replicas,
                "VolumeSizeInGB": opts.volume_size,
            },
            "StoppingCondition": stopping,
            "Environment": env,
            "Tags": [
                {"Key": k, "Value": v}
                for k, v in aws.app_tags(BACKEND, app, self.session_name).items()
            ]
            + [{"Key": ROLE_NAME_TAG, "Value": role.name}]
            + _owner_tags(app),
        }
        if opts.hyperparameters:
            request["HyperParameters"] = dict(opts.hyperparameters)
        if opts.subnets and opts.security_group_ids:
            request["VpcConfig"] = {
                "Subnets": list(opts.subnets),
                "SecurityGroupIds": list(opts.security_group_ids),
            }
        if opts.use_spot_instances:
            request["EnableManagedSpotTraining"] = True
            stopping["MaxWaitTimeInSeconds"] = opts.max_wait
        if opts.checkpoint_s3_uri:
            request["CheckpointConfig"] = {"S3Uri": opts.checkpoint_s3_uri}
        if role.max_retries > 0:
            request["RetryStrategy"] = {"MaximumRetryAttempts": role.max_retries}
        aws.check_request("sagemaker", "CreateTrainingJob", request)
        return AppDryRunInfo(SageMakerJobRequest(job_name, request, images), format_request)

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Pushes local images and creates the training job; returns its name (the app id).

        Raises:
            AWSRequestError: SageMaker refused the job (with its reason).
        """
        request: SageMakerJobRequest = self._own_request(dryrun_info)
        aws.push_images(request.images_to_push, BACKEND)
        with aws.refused(f"SageMaker refused training job {request.job_name}"):
            self.client.create_training_job(**request.create_training_job)
        return request.job_name

    # --- queries --------------------------------------------------------------------------

    def _job_tags(self, job: Mapping[str, Any]) -> dict[str, str]:
        """anylaunch's tags of the job (its metadata and role name): one ``ListTags`` per job
        (``DescribeTrainingJob`` returns no tags), then from this scheduler's cache. Without
        the ``sagemaker:ListTags`` permission, none (logged once per job)."""
        arn = str(job.get("TrainingJobArn") or "")
        if not arn:
            return {}
        key = (arn, str(job.get("CreationTime", "")))  # a name reused by a newer job
        cached = self._tags.get(key)
        if cached is not None:
            return cached
        found: dict[str, str] = {}
        kwargs: dict[str, Any] = {"ResourceArn": arn}
        try:
            while True:
                page = self.client.list_tags(**kwargs)
                for tag in page.get("Tags") or []:
                    if tag.get("Key") in _DESCRIBED_TAGS:
                        found[str(tag["Key"])] = str(tag.get("Value", ""))
                if not page.get("NextToken"):
                    break
                kwargs["NextToken"] = page["NextToken"]
        except Exception as e:
            if not aws.is_client_error(e, "AccessDeniedException", "AccessDenied"):
                raise
            log.warning(
                "cannot read the tags of %s (%s): describe returns no job metadata. Fix: allow "
                "sagemaker:ListTags",
                arn,
                type(e).__name__,
            )
        if len(self._tags) >= _TAG_CACHE_SIZE:
            self._tags.pop(next(iter(self._tags)))
        self._tags[key] = found
        return found

    def _role_of(self, job: Mapping[str, Any]) -> Role:
        """The job's role; its name from the environment, else from the job's tags."""
        name = str((job.get("Environment") or {}).get(ROLE_NAME_ENV, ""))
        if not name:
            name = self._job_tags(job).get(ROLE_NAME_TAG, "")
        return _role_of(job, name if _ROLE_NAME.match(name) else "trainer")

    def _describe_job(self, app_id: str) -> dict[str, Any] | None:
        try:
            job: dict[str, Any] = self.client.describe_training_job(TrainingJobName=app_id)
        except Exception as e:
            if aws.is_client_error(e, "ValidationException", "ResourceNotFound"):
                return None  # SageMaker says "Requested resource not found" this way
            raise
        return job

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """The training job's state (secondary status as the message); None if unknown."""
        job = self._describe_job(app_id)
        if job is None:
            return None
        state, msg = _job_state(job)
        role = self._role_of(job)
        region = str(job.get("TrainingJobArn", "")).split(":")[3:4]
        return DescribeAppResponse(
            app_id=app_id,
            state=state,
            num_restarts=0,
            msg=msg or NONE,
            structured_error_msg=_declared(job, state, msg),
            ui_url=(
                f"https://{region[0]}.console.aws.amazon.com/sagemaker/home?region={region[0]}"
                f"#/jobs/{app_id}"
                if region
                else None
            ),
            metadata={
                "training_job_arn": str(job.get("TrainingJobArn", "")),
                "secondary_status": str(job.get("SecondaryStatus", "")),
                "log_group": LOG_GROUP,
                **{k: v for k, v in self._job_tags(job).items() if k != ROLE_NAME_TAG},
            },
            roles_statuses=[
                RoleStatus(
                    role.name,
                    [
                        ReplicaStatus(k, state, role.name, f"algo-{k + 1}")
                        for k in range(role.num_replicas)
                    ],
                )
            ],
            roles=[role],
        )

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """Training jobs this scheduler launched (found by tag with SageMaker Search), oldest
        first (``cfg`` is ignored)."""
        search: dict[str, Any] = {
            "Resource": "TrainingJob",
            "SearchExpression": {
                "Filters": [
                    {"Name": f"Tags.{aws.SCHEDULER_TAG}", "Operator": "Equals", "Value": BACKEND}
                ]
            },
        }
        found = []
        while True:
            page = self.client.search(**search)
            for result in page.get("Results", []):
                job = result.get("TrainingJob") or {}
                tags = {t["Key"]: t["Value"] for t in job.get("Tags") or []}
                if tags.get(aws.SCHEDULER_TAG) != BACKEND:
                    continue
                name = str(job["TrainingJobName"])
                session = tags.get(aws.SESSION_TAG) or self.session_name
                created = job.get("CreationTime")
                app_name = str(tags.get(aws.APP_NAME_TAG, name))
                entry = self._list_entry(name, _job_state(job)[0], app_name, session)
                found.append((created.timestamp() if isinstance(created, datetime) else 0.0, entry))
            if not page.get("NextToken"):
                break
            search["NextToken"] = page["NextToken"]
        return self._oldest_first(found)

    # --- control --------------------------------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        """Stops the training job (it goes Stopping, then Stopped: CANCELLED)."""
        self.client.stop_training_job(TrainingJobName=app_id)

    # --- logs -----------------------------------------------------------------------------

    def _log_replicas(self, app_id: str) -> dict[str, dict[int, Any]] | None:
        job = self._describe_job(app_id)
        if job is None:
            return None
        role = self._role_of(job)
        return {role.name: {k: k for k in range(role.num_replicas)}}

    def _replica_log_lines(
        self, app_id: str, role_name: str, k: int, replica: Any, query: LogQuery
    ) -> Iterable[str]:
        """Lines of instance ``k`` (host ``algo-{k+1}``) from CloudWatch Logs (SageMaker keeps
        stdout and stderr in one stream per host); with ``should_tail`` it follows the stream
        until the job ended."""
        prefix = f"{app_id}/algo-{k + 1}-"

        def locate() -> tuple[str, str] | None:
            try:
                found = self.log_client.describe_log_streams(
                    logGroupName=LOG_GROUP, logStreamNamePrefix=prefix
                ).get("logStreams", [])
            except Exception as e:
                if aws.is_client_error(e, "ResourceNotFoundException"):
                    return None
                raise
            # the first stream of the host (a restarted host writes to a newer one)
            found.sort(key=lambda s: (s.get("creationTime", 0), s["logStreamName"]))
            return (LOG_GROUP, str(found[0]["logStreamName"])) if found else None

        def is_done() -> bool:
            current = self._describe_job(app_id)
            return current is None or _job_state(current)[0].is_terminal()

        return aws.follow_log_stream(
            self.log_client, locate, is_done, query.since, query.until, query.should_tail
        )


def _role_of(job: Mapping[str, Any], name: str) -> Role:
    """The role as SageMaker runs it (after macros)."""
    algorithm = job.get("AlgorithmSpecification") or {}
    env = {str(k): str(v) for k, v in (job.get("Environment") or {}).items()}
    env.pop(ROLE_NAME_ENV, None)
    env.pop(RANK0_ENV, None)
    entrypoint = list(algorithm.get("ContainerEntrypoint") or [])
    args = [str(a) for a in algorithm.get("ContainerArguments") or []]
    return Role(
        name=name,
        image=str(algorithm.get("TrainingImage", "")),
        entrypoint=str(entrypoint[0]) if entrypoint else "<MISSING>",
        args=[str(a) for a in entrypoint[1:]] + args,
        env=env,
        num_replicas=max(int((job.get("ResourceConfig") or {}).get("InstanceCount", 1)), 1),
    )


def create_scheduler(session_name: str, **kwargs: Any) -> AWSSageMakerScheduler:
    """Creates the ``aws_sagemaker`` scheduler (the registry's factory; see ``factory_kwargs``).

    >>> create_scheduler("demo").backend
    'aws_sagemaker'
    """
    return AWSSageMakerScheduler.from_kwargs(session_name, kwargs)
