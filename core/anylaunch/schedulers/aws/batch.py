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
from typing import Any

from anylaunch.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    LogQuery,
)
from anylaunch.schedulers.aws import common as aws
from anylaunch.schedulers.aws.batch_arrays import (
    SELECTED_PARAM,
    array_command,
    array_submit_fields,
    check_array,
    child_facts,
    list_children,
    meta_of,
    position_of,
    renamed_definition,
)
from anylaunch.schedulers.aws.batch_capacity import queue_capacity
from anylaunch.schedulers.aws.batch_request import (
    _DESCRIBE_BATCH,
    _QUEUED,
    BACKEND,
    CANCEL_REASON,
    DEFAULT_LOG_GROUP,
    STARTUP_TIMEOUT_TAG,
    TIMEOUT_REASON,
    AWSBatchOpts,
    BatchJobRequest,
    check_app,
    container_properties,
    format_request,
    parse_app_id,
    parse_ulimits,
    short_queue_name,
)
from anylaunch.schedulers.aws.batch_state import (
    job_host,
    job_state,
    log_stream_of,
    node_groups,
    role_of,
)
from anylaunch.schedulers.common.arrays import array_response
from anylaunch.schedulers.common.capacity import Capacity, demands
from anylaunch.schedulers.common.job_metadata import JOB_METADATA_KEYS
from anylaunch.schedulers.common.roles import check_image_ref
from anylaunch.specs.api import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    ReplicaStatus,
    RoleStatus,
)
from anylaunch.specs.arrays import ArraySpec
from anylaunch.specs.errors import (
    InvalidRunConfigException,
    InvalidSpecError,
    UnknownAppException,
)
from anylaunch.specs.runopts import CfgVal, runopts

log: logging.Logger = logging.getLogger(__name__)

_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")

#: The fields of a described job definition that register it again.
_DEFINITION_FIELDS = (
    "type",
    "parameters",
    "containerProperties",
    "retryStrategy",
    "propagateTags",
    "timeout",
    "platformCapabilities",
)

__all__ = [
    "AWSBatchScheduler",
    "create_scheduler",
]


class AWSBatchScheduler(aws.AWSScheduler):
    """Runs apps as AWS Batch jobs (see the module docstring for the mapping).

    Batch sends stdout and stderr to one CloudWatch stream per node: only the combined log
    stream exists.

    Args:
        session_name: goes into app handles (``aws_batch://{session_name}/{queue}:{job}``)
        client: a boto3 ``batch`` client to use (default: one from the standard chain)
        log_client: a boto3 ``logs`` client to use (default: one from the standard chain)
    """

    request_type = BatchJobRequest
    supports_arrays = True

    def __init__(self, session_name: str, client: Any = None, log_client: Any = None) -> None:
        super().__init__(BACKEND, session_name, "batch", client, log_client)
        self._job_ids: dict[str, str] = {}  # app id -> Batch job id, once known

    # --- dryrun and schedule --------------------------------------------------------------

    def _run_opts(self) -> runopts:
        return AWSBatchOpts.as_runopts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Every role needs resources and a container image (not the default ``.``)."""
        super()._validate(app, scheduler, cfg)
        for role in app.roles:
            check_image_ref(role, self.backend)

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        opts = AWSBatchOpts.from_cfg(cfg)
        if opts.queue.startswith("arn:"):
            aws.check_arn("queue", opts.queue, "job-queue")
        elif not _QUEUE_NAME.match(opts.queue):
            raise InvalidRunConfigException(
                "queue",
                opts.queue,
                "is not a job queue name (1-128 letters, digits, '-' or '_')",
                "pass the job queue's name or ARN",
            )
        aws.check_arn("job_role_arn", opts.job_role_arn, "role")
        aws.check_arn("execution_role_arn", opts.execution_role_arn, "role")
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
        ulimits = parse_ulimits(opts.ulimits)
        images = aws.plan_image_pushes(app, opts.image_repo)

        multinode = len(app.roles) > 1 or app.roles[0].num_replicas > 1
        max_retries, itype = check_app(app, multinode)

        queue_name = short_queue_name(opts.queue)
        job_name = aws.make_job_name(app.name, 128)
        app_id = f"{queue_name}:{job_name}"
        tags = aws.app_tags(BACKEND, app, self.session_name)
        tags[STARTUP_TIMEOUT_TAG] = str(opts.startup_timeout)

        job_def: dict[str, Any] = {"jobDefinitionName": job_name}
        if multinode:
            groups: list[dict[str, Any]] = []
            start = 0
            for role in app.roles:
                container = container_properties(role, start, app_id, True, opts, ulimits, images)
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
            job_def["containerProperties"] = container_properties(
                app.roles[0], 0, app_id, False, opts, ulimits, images
            )
        if app.array is not None:
            check_array(app.array)
            array_command(job_def["containerProperties"], app.roles[0], app.array)
            job_def["parameters"] = {SELECTED_PARAM: "all"}
        job_def["retryStrategy"] = {"attempts": max_retries + 1}
        job_def["propagateTags"] = True
        job_def["tags"] = tags
        job_def["platformCapabilities"] = ["EC2"]

        submit: dict[str, Any] = {"jobName": job_name, "jobQueue": opts.queue, "tags": tags}
        if opts.share_id is not None:
            submit["shareIdentifier"] = opts.share_id
        if opts.priority is not None:
            submit["schedulingPriorityOverride"] = opts.priority
        if app.array is not None:
            submit.update(array_submit_fields(app.array))
        aws.check_request("batch", "RegisterJobDefinition", job_def)
        aws.check_request("batch", "SubmitJob", {**submit, "jobDefinition": job_name})
        request = BatchJobRequest(app_id, job_name, opts.queue, job_def, submit, images)
        return AppDryRunInfo(request, format_request)

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Pushes local images, registers the job definition and submits the job.

        Returns the app id ``{queue}:{job name}`` at once (the job starts SUBMITTED).

        Raises:
            AWSRequestError: AWS refused the job definition or the job (with its reason).
        """
        return self._submit_request(self._own_request(dryrun_info))

    def _submit_request(self, request: BatchJobRequest) -> str:
        aws.push_images(request.images_to_push, BACKEND)
        with aws.refused(f"AWS Batch refused job definition {request.job_name}"):
            registered = self.client.register_job_definition(**request.job_definition)
        definition = registered["jobDefinitionArn"]
        try:
            with aws.refused(
                f"AWS Batch refused job {request.job_name} on queue {request.queue}",
                ". Fix: check that the queue exists and is ENABLED",
            ):
                submitted = self.client.submit_job(**request.submit_job, jobDefinition=definition)
        except Exception:
            # do not leave an orphan job definition behind
            try:
                self.client.deregister_job_definition(jobDefinition=definition)
            except Exception:
                log.warning("could not deregister job definition %s", definition)
            raise
        self._job_ids[request.app_id] = submitted["jobId"]
        return request.app_id

    def _retry_indices(self, app_id: str, indices: Sequence[int]) -> str:
        """One new submission of the same job definition (copied under the new job's name)
        that runs only ``indices``: an array job of that many children, or a plain job for
        one index. Nothing is submitted when AWS refuses the copy."""
        job = self._job(app_id)
        if job is None:
            raise UnknownAppException(app_id)
        meta = meta_of(job)
        if meta is None:
            raise InvalidSpecError("app_handle", app_id, "is not an array app", "retry arrays")
        spec = ArraySpec(meta.size, None, meta.min_success_ratio, indices=tuple(indices))
        found = self.client.describe_job_definitions(jobDefinitions=[job["jobDefinition"]])
        tags = {k: v for k, v in (job.get("tags") or {}).items() if not k.startswith("aws:")}
        job_name = aws.make_job_name(tags.get(aws.APP_NAME_TAG, job["jobName"]), 128)
        job_def = {k: v for k, v in found["jobDefinitions"][0].items() if k in _DEFINITION_FIELDS}
        job_def = renamed_definition(job_def, str(job["jobName"]), job_name)
        job_def.update(jobDefinitionName=job_name, tags=tags)
        submit: dict[str, Any] = {"jobName": job_name, "jobQueue": job["jobQueue"], "tags": tags}
        if job.get("shareIdentifier"):
            submit["shareIdentifier"] = job["shareIdentifier"]
        submit.update(array_submit_fields(spec))
        queue = short_queue_name(str(job["jobQueue"]))
        request = BatchJobRequest(f"{queue}:{job_name}", job_name, queue, job_def, submit)
        return self._submit_request(request)

    # --- capacity -------------------------------------------------------------------------

    def _check_capacity(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> Capacity:
        """The job queue and its compute environments (two calls; see
        :mod:`~anylaunch.schedulers.aws.batch_capacity`)."""
        opts = AWSBatchOpts.from_cfg(cfg)
        name = short_queue_name(opts.queue)
        found = self.client.describe_job_queues(jobQueues=[opts.queue])["jobQueues"]
        queue = found[0] if found else None
        if queue is None or queue.get("state") != "ENABLED":
            return queue_capacity(queue, [], demands(app), name, calls=1)
        order = sorted(queue.get("computeEnvironmentOrder") or [], key=lambda o: o.get("order", 0))
        names = [str(o["computeEnvironment"]) for o in order]
        environments = (
            self.client.describe_compute_environments(computeEnvironments=names)[
                "computeEnvironments"
            ]
            if names
            else []
        )
        return queue_capacity(queue, environments, demands(app), name, calls=1 + bool(names))

    # --- finding jobs ---------------------------------------------------------------------

    def _job_id(self, app_id: str) -> str | None:
        """The Batch job id of an app id, found by job name in its queue (cached)."""
        if app_id in self._job_ids:
            return self._job_ids[app_id]
        parsed = parse_app_id(app_id)
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
        # moto lists array children (JOBID:N) in their queue too; AWS Batch does not
        found = [
            s
            for s in found
            if s.get("jobName") == name and position_of(str(s.get("jobId", ""))) is None
        ]
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
            if job is None:
                result[app_id] = None
            elif meta_of(job) is not None:
                result[app_id] = self._array_response(app_id, job, now)
            else:
                result[app_id] = self._response(app_id, job, nodes, now)
        return result

    def _array_response(self, app_id: str, job: dict[str, Any], now: float) -> DescribeAppResponse:
        """An array app: one replica per index, from the children of the array job (see
        :mod:`~anylaunch.schedulers.aws.batch_arrays` for the calls this costs)."""
        meta = meta_of(job)
        assert meta is not None
        response = self._response(app_id, job, {}, now)
        children = list_children(self.client, job) if job.get("arrayProperties") else []
        role_name = response.roles[0].name if response.roles else "group0"
        found = array_response(meta, role_name, child_facts(meta, job, children))
        parent_state, parent_msg, _ = job_state(job, now)
        state, msg = found.state, found.msg
        if parent_msg.startswith(TIMEOUT_REASON):  # the parent waited past startup_timeout
            state, msg = AppState.FAILED, f"{parent_msg}; {msg}"
        elif parent_state == AppState.CANCELLED and not state.is_terminal():
            msg = f"cancel requested; {msg}"
        response.state, response.msg = state, msg
        response.roles_statuses = found.roles_statuses
        response.array = found.array
        return response

    def _response(
        self, app_id: str, job: dict[str, Any], nodes: Mapping[str, dict[str, Any]], now: float
    ) -> DescribeAppResponse:
        state, msg, timed_out = job_state(job, now)
        if timed_out and not str(job.get("statusReason", "")).startswith(TIMEOUT_REASON):
            # enforce the deadline in Batch too, so that no process sees the job start later
            self.client.terminate_job(jobId=job["jobId"], reason=msg[:1024])
        attempts = job.get("attempts") or []
        restarts = (
            len(attempts) if job.get("status") in _QUEUED | {"STARTING"} else len(attempts) - 1
        )
        statuses = []
        for name, start, end, _ in node_groups(job):
            replicas = []
            for k in range(end - start + 1):
                node = nodes.get(f"{job['jobId']}#{start + k}")
                rep_state = job_state(node, now)[0] if node is not None else state
                if state.is_terminal() and not rep_state.is_terminal():
                    rep_state = state
                replicas.append(ReplicaStatus(k, rep_state, name, job_host(node or job)))
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
                **{k: str(v) for k, v in (job.get("tags") or {}).items() if k in JOB_METADATA_KEYS},
            },
            roles_statuses=statuses,
            roles=[role_of(name, start, end, c) for name, start, end, c in node_groups(job)],
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
            app_id = f"{short_queue_name(str(job.get('jobQueue', '')))}:{job['jobName']}"
            session = tags.get(aws.SESSION_TAG) or self.session_name
            name = str(tags.get(aws.APP_NAME_TAG, job["jobName"]))
            entry = self._list_entry(app_id, job_state(job, now)[0], name, session)
            found.append((job.get("createdAt", 0), entry))
        return self._oldest_first(found)

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
        if not job_state(job, time.time())[0].is_terminal():
            self.client.terminate_job(jobId=job["jobId"], reason=CANCEL_REASON)
        definition = job.get("jobDefinition")
        if definition:
            try:
                self.client.deregister_job_definition(jobDefinition=definition)
            except Exception as e:
                if not aws.is_client_error(e, "ClientException"):
                    raise

    # --- logs -----------------------------------------------------------------------------

    def _log_replicas(self, app_id: str) -> dict[str, dict[int, Any]] | None:
        job = self._job(app_id)
        if job is None:
            return None
        meta = meta_of(job)
        if meta is not None:  # replica id = array index; child JOBID:POSITION runs it
            picked = meta.selected if meta.selected is not None else tuple(range(meta.size))
            ((name, _, _, container),) = node_groups(job)
            many = bool((job.get("arrayProperties") or {}).get("size"))
            return {
                name: {
                    index: (
                        {**job, "jobId": f"{job['jobId']}:{pos}" if many else job["jobId"]},
                        0,
                        container,
                    )
                    for pos, index in enumerate(picked)
                }
            }
        return {
            name: {k: (job, start + k, container) for k in range(end - start + 1)}
            for name, start, end, container in node_groups(job)
        }

    def _replica_log_lines(
        self, app_id: str, role_name: str, k: int, replica: Any, query: LogQuery
    ) -> Iterable[str]:
        """Lines of one node from CloudWatch Logs (Batch sends stdout and stderr to one stream
        per node); with ``should_tail`` it follows the stream until the job ended."""
        job, node, container = replica
        options = (container.get("logConfiguration") or {}).get("options") or {}
        group = str(options.get("awslogs-group", DEFAULT_LOG_GROUP))
        job_id = str(job["jobId"])
        node_id = f"{job_id}#{node}" if job.get("nodeProperties") else None

        def locate() -> tuple[str, str] | None:
            ids = [node_id, job_id] if node_id else [job_id]
            found = self._describe_jobs(ids)
            # a backend without per-node jobs keeps every node's output in the job's stream
            stream = log_stream_of(found.get(node_id or "")) or log_stream_of(found.get(job_id))
            return (group, stream) if stream else None

        def is_done() -> bool:
            current = self._describe_jobs([job_id]).get(job_id)
            return current is None or job_state(current, time.time())[0].is_terminal()

        return aws.follow_log_stream(
            self.log_client, locate, is_done, query.since, query.until, query.should_tail
        )


def create_scheduler(session_name: str, **kwargs: Any) -> AWSBatchScheduler:
    """Creates the ``aws_batch`` scheduler (the registry's factory; see ``factory_kwargs``).

    >>> create_scheduler("demo").backend
    'aws_batch'
    """
    return AWSBatchScheduler.from_kwargs(session_name, kwargs)
