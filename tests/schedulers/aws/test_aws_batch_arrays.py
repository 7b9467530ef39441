"""Job arrays on aws_batch: one ``SubmitJob`` with ``arrayProperties`` on the moto server
(real botocore), per-index status from the children, per-index logs, retry of failed indices.

What moto 5.2 does with an array job (read from moto/batch/models.py): it creates the parent
and ``size`` children ``JOBID:0 .. JOBID:N-1`` and runs every child at once as a container
(the Batch test image), with ``AWS_BATCH_JOB_ID=JOBID:N`` but WITHOUT
``AWS_BATCH_JOB_ARRAY_INDEX`` (AWS Batch sets it); ``ListJobs(arrayJobId=...)`` lists the
children by status, and the parent's ``arrayProperties.statusSummary`` counts them. The index
script reads the child's position from ``AWS_BATCH_JOB_ARRAY_INDEX``, else from the
``JOBID:N`` job id, so moto runs each index for real; the ``AWS_BATCH_JOB_ARRAY_INDEX`` path is
run by a real ``/bin/sh`` here too. moto does not stop children when the parent is terminated
(AWS Batch does), so cancel is not tested on moto.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from typing import Any

import pytest

from anylaunch.runner.api import Runner
from anylaunch.schedulers.aws.batch_arrays import SELECTED_PARAM
from anylaunch.schedulers.aws_batch_scheduler import AWSBatchScheduler, BatchJobRequest
from anylaunch.specs import AppState, ArraySpec
from anylaunch.specs.errors import InvalidSpecError
from tests.schedulers.arrays_kit import (
    FAILING_INDEX,
    SIZE,
    check_failed_array,
    check_retried,
    failing_array_app,
)
from tests.schedulers.aws.moto_env import BATCH_IMAGE, boto3_client

SESSION = "awsarr"
TIMEOUT = 180  # 20 containers at once on a loaded machine


def counted_scheduler() -> tuple[AWSBatchScheduler, Counter[str]]:
    """A scheduler whose botocore client counts every Batch API call by operation."""
    calls: Counter[str] = Counter()
    client = boto3_client("batch")
    client.meta.events.register(
        "before-call.batch.*", lambda model, **_: calls.update([model.name])
    )
    return AWSBatchScheduler(SESSION, client=client, log_client=boto3_client("logs")), calls


def run_script(
    request: BatchJobRequest, selected: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """Runs the job definition's command in a real /bin/sh as Batch would (the parameter
    substituted, the given env set)."""
    command = request.job_definition["containerProperties"]["command"]
    argv = [selected if word == f"Ref::{SELECTED_PARAM}" else word for word in command]
    environ = {"PATH": os.environ["PATH"], **env}
    return subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=30)


def test_array_request_refusals_and_the_index_script() -> None:
    scheduler = AWSBatchScheduler(SESSION)
    with pytest.raises(InvalidSpecError, match=r"ArraySpec\.parallelism=4.*parallelism=None"):
        scheduler.submit_dryrun(failing_array_app(BATCH_IMAGE), {"queue": "q"})
    big = failing_array_app(BATCH_IMAGE, size=10_001, parallelism=None)
    with pytest.raises(InvalidSpecError, match="at most 10000 children"):
        scheduler.submit_dryrun(big, {"queue": "q"})

    info = scheduler.submit_dryrun(failing_array_app(BATCH_IMAGE, parallelism=None), {"queue": "q"})
    request = info.request
    assert isinstance(request, BatchJobRequest)
    assert request.submit_job["arrayProperties"] == {"size": SIZE}
    assert request.submit_job["parameters"][SELECTED_PARAM] == "all"
    assert "[19] sh -c" in str(info)  # the dryrun previews every index
    # AWS Batch's child env: AWS_BATCH_JOB_ARRAY_INDEX is the position
    done = run_script(request, "all", AWS_BATCH_JOB_ARRAY_INDEX="3", AWS_BATCH_JOB_ID="j:3")
    assert (done.returncode, done.stdout) == (0, "index=3 of=20 arg=shard-3\n")
    done = run_script(request, "all", AWS_BATCH_JOB_ARRAY_INDEX=str(FAILING_INDEX))
    assert done.returncode == 1
    # a retry's selection: position 1 of "2 7" is index 7; a plain job is position 0
    done = run_script(request, "2 7", AWS_BATCH_JOB_ARRAY_INDEX="1")
    assert (done.returncode, done.stdout) == (1, "index=7 of=20 arg=shard-7\n")
    done = run_script(request, "5", AWS_BATCH_JOB_ID="plainjob")
    assert done.stdout == "index=5 of=20 arg=shard-5\n"
    done = run_script(request, "2 7", AWS_BATCH_JOB_ARRAY_INDEX="2")
    assert done.returncode == 97 and "no index at array position 2" in done.stderr


def test_twenty_indices_one_submit_job_and_retry_of_the_failed_one(
    moto_aws: str, batch_queue: str, batch_docker: None
) -> None:
    scheduler, calls = counted_scheduler()

    def factory(session_name: str, **kwargs: Any) -> AWSBatchScheduler:
        return scheduler

    runner = Runner(SESSION, {"aws_batch": factory})
    app = failing_array_app(BATCH_IMAGE, parallelism=None)
    with runner:
        handle = runner.run(app, "aws_batch", {"queue": batch_queue})
        assert calls["SubmitJob"] == 1 and calls["RegisterJobDefinition"] == 1
        status = runner.wait(handle, wait_interval=1.0, timeout=TIMEOUT)
        check_failed_array(status)
        assert status is not None and status.array is not None
        assert status.array.exit_codes.get(FAILING_INDEX) == 1

        # one poll: DescribeJobs of the parent, one ListJobs per non-empty listed status
        calls.clear()
        runner.status(handle)
        assert calls == Counter({"DescribeJobs": 1, "ListJobs": 2}), calls

        lines = list(runner.log_lines(handle, "shard", k=12))
        assert lines == ["index=12 of=20 arg=shard-12\n"]
        assert list(runner.log_lines(handle, "shard", k=FAILING_INDEX)) == [
            "index=7 of=20 arg=shard-7\n"
        ]

        calls.clear()
        retried = runner.retry_failed(handle)
        assert calls["SubmitJob"] == 1, calls
        # the copied job definition names the new app, not the one it was copied from
        new_id = scheduler._job_id(retried.rsplit("/", 1)[1])
        job = scheduler.client.describe_jobs(jobs=[new_id])["jobs"][0]
        container = scheduler.client.describe_job_definitions(
            jobDefinitions=[job["jobDefinition"]]
        )["jobDefinitions"][0]["containerProperties"]
        env = {e["name"]: e["value"] for e in container["environment"]}
        assert env["ANYLAUNCH_JOB_ID"] == retried
        retry_status = runner.wait(retried, wait_interval=1.0, timeout=TIMEOUT)
        check_retried(retry_status)
        # one index is a plain job (Batch arrays hold 2 or more children) running index 7
        assert list(runner.log_lines(retried, "shard", k=FAILING_INDEX)) == [
            "index=7 of=20 arg=shard-7\n"
        ]


def test_retry_of_several_indices_is_one_array_of_those(
    moto_aws: str, batch_queue: str, batch_docker: None
) -> None:
    scheduler, calls = counted_scheduler()
    app = failing_array_app(BATCH_IMAGE, size=3, parallelism=None)
    app.array = ArraySpec(3, min_success_ratio=0.5)
    app_id = scheduler.submit(app, {"queue": batch_queue})
    deadline = time.monotonic() + TIMEOUT
    while not (desc := scheduler.describe(app_id)) or not desc.state.is_terminal():
        assert time.monotonic() < deadline, desc
        time.sleep(1)
    assert desc.state == AppState.SUCCEEDED and desc.array is not None  # 3/3 by the ratio 0.5
    calls.clear()
    new_id = scheduler.retry_indices(app_id, [2, 0])
    assert calls["SubmitJob"] == 1
    job: Any = scheduler._job(new_id)
    assert job["arrayProperties"]["size"] == 2
    assert job["parameters"][SELECTED_PARAM] == "0 2"
    while not (desc := scheduler.describe(new_id)) or not desc.state.is_terminal():
        assert time.monotonic() < deadline, desc
        time.sleep(1)
    assert desc.array is not None and desc.array.indices() == (0, 2)
    assert [r.id for r in desc.roles_statuses[0].replicas] == [0, 2]
    assert list(scheduler.log_iter(new_id, "shard", 2)) == ["index=2 of=3 arg=shard-2\n"]
    with pytest.raises(InvalidSpecError, match="indices"):
        scheduler.retry_indices(app_id, [3])
