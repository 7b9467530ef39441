"""Benchmarks of the AWS schedulers: dryrun of a large multi-node job (offline), describing
many Batch jobs in few calls, reading CloudWatch logs, and a Batch job's submit-to-end latency
on moto. Numbers go to ``benchmark.extra_info`` and are printed; nothing is asserted on time.
Run with `pytest tests/benchmarks/test_aws_schedulers.py --benchmark-enable`."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from typing import Any

from pytest_benchmark.fixture import BenchmarkFixture

from anylaunch.runner import get_runner
from anylaunch.schedulers.aws.sagemaker import LOG_GROUP
from anylaunch.schedulers.aws_batch_scheduler import AWSBatchScheduler
from anylaunch.schedulers.aws_sagemaker_scheduler import AWSSageMakerScheduler
from anylaunch.specs import AppDef, AppState, Resource, Role, named_resources
from tests.schedulers.aws import moto_env
from tests.schedulers.aws.moto_env import BATCH_IMAGE, boto3_client

# the moto fixtures, used here as in tests/schedulers/aws
moto_server = moto_env.moto_server
moto_aws = moto_env.moto_aws
batch_queue = moto_env.batch_queue
batch_docker = moto_env.batch_docker

BIG_APP = AppDef(
    "big",
    [
        Role(
            f"role{i}",
            "img",
            entrypoint="sh",
            args=["-c", "echo ${replica_id} $${${rank0_env}:=localhost}"],
            num_replicas=200,
            resource=Resource(4, 1, 8192),
        )
        for i in range(5)
    ],
)

COLD_DRYRUN = """
import time
t0 = time.perf_counter()
from anylaunch.schedulers.aws_batch_scheduler import create_scheduler
from anylaunch.specs import AppDef, Resource, Role
app = AppDef("x", [Role("r", "img", entrypoint="echo", num_replicas=2, resource=Resource(1, 0, 64))])
create_scheduler("s").submit_dryrun(app, {"queue": "q"})
print((time.perf_counter() - t0) * 1000)
"""


def count_calls(client: Any) -> list[str]:
    calls: list[str] = []
    client.meta.events.register("before-call", lambda model, **_: calls.append(model.name))
    return calls


def test_dryrun_of_a_1000_node_job(benchmark: BenchmarkFixture) -> None:
    scheduler = AWSBatchScheduler("bench")
    info = benchmark(scheduler.submit_dryrun, BIG_APP, {"queue": "q"})
    assert info.request.job_definition["nodeProperties"]["numNodes"] == 1000
    cold = subprocess.run(
        [sys.executable, "-c", COLD_DRYRUN], check=True, capture_output=True, text=True
    )
    benchmark.extra_info["cold_import_and_first_dryrun_ms"] = float(cold.stdout.strip())
    print(f"\ncold import + first dryrun: {float(cold.stdout.strip()):.1f} ms")


def test_describe_many_batch_jobs_in_few_calls(
    benchmark: BenchmarkFixture, moto_aws: str, batch_queue: str
) -> None:
    scheduler = AWSBatchScheduler("bench")
    app = AppDef(
        "bench-describe",
        [Role("r", BATCH_IMAGE, entrypoint="true", num_replicas=2, resource=Resource(1, 0, 64))],
    )
    app_ids = [scheduler.submit(app, {"queue": batch_queue}) for _ in range(20)]
    calls = count_calls(scheduler.client)
    described = benchmark(scheduler.describe_many, app_ids)
    assert all(described[a] is not None for a in app_ids)
    per_round = len(calls) // max(benchmark.stats.stats.rounds if benchmark.stats else 1, 1)
    benchmark.extra_info["apps"] = len(app_ids)
    benchmark.extra_info["api_calls_per_describe_many"] = per_round
    print(f"\ndescribe_many of {len(app_ids)} multi-node apps: {per_round} API calls")


def test_read_5000_log_lines(benchmark: BenchmarkFixture, moto_aws: str) -> None:
    scheduler = AWSSageMakerScheduler("bench")
    app = AppDef(
        "bench-logs", [Role("t", "img", entrypoint="x", resource=named_resources["aws_m5.large"])]
    )
    app_id = scheduler.submit(
        app, {"role_arn": "arn:aws:iam::123456789012:role/sm", "output_path": "s3://b/o"}
    )
    logs = boto3_client("logs")
    with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
        logs.create_log_group(logGroupName=LOG_GROUP)
    stream = f"{app_id}/algo-1-{int(time.time())}"
    logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
    now = int(time.time() * 1000)
    events = [
        {"timestamp": now + i, "message": f"step {i} loss {1 / (i + 1):.6f}"} for i in range(5000)
    ]
    logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=events)

    lines = benchmark(lambda: list(scheduler.log_iter(app_id, "t")))
    assert len(lines) == 5000 and lines[-1].startswith("step 4999")
    mean = benchmark.stats.stats.mean if benchmark.stats else 0.0
    if mean:
        benchmark.extra_info["lines_per_s"] = round(5000 / mean)
        print(f"\nlog_iter: {5000 / mean:.0f} lines/s from CloudWatch (moto)")


def test_batch_job_submit_to_end_latency(
    benchmark: BenchmarkFixture, moto_aws: str, batch_queue: str, batch_docker: None
) -> None:
    app = AppDef(
        "bench-e2e", [Role("r", BATCH_IMAGE, entrypoint="true", resource=Resource(1, 0, 64))]
    )

    def run_once() -> float:
        with get_runner("bench") as runner:
            start = time.perf_counter()
            handle = runner.run(app, "aws_batch", {"queue": batch_queue})
            status = runner.wait(handle, wait_interval=0.2, timeout=60)
            assert status is not None and status.state == AppState.SUCCEEDED
            return time.perf_counter() - start

    seconds = benchmark.pedantic(run_once, rounds=1, iterations=1)
    benchmark.extra_info["submit_to_succeeded_s"] = round(seconds, 2)
    print(f"\naws_batch on moto: submit to SUCCEEDED in {seconds:.2f} s")
