"""Compose the tasks in a flow of your own: launch, wait with retries (a retry attaches to
the same app instead of launching another), read the logs; cancel the app if anything goes
wrong, including a crash or a cancellation of the flow run.

Run: uv run python examples/prefect/tasks_flow.py
"""

import sys

from prefect import flow, get_run_logger

import anylaunch.specs as specs
from prefect_anylaunch import (
    AnylaunchJob,
    cancel_launched_apps,
    get_app_logs,
    launch_app,
    stop_app,
    wait_for_app,
)

TRAIN = (
    "import os, time\n"
    "rank = int(os.environ['RANK'])\n"
    "for step in range(3):\n"
    "    time.sleep(0.2)\n"
    "    print(f'rank {rank} step {step} loss {1.0 / (step + 1 + rank):.3f}', flush=True)\n"
)


def trainer_app() -> specs.AppDef:
    return specs.AppDef(
        name="tiny-train",
        roles=[
            specs.Role(
                name="trainer",
                image=".",
                entrypoint=sys.executable,
                args=["-c", TRAIN],
                env={"RANK": specs.macros.replica_id},
                num_replicas=2,
            )
        ],
    )


@flow(on_cancellation=[cancel_launched_apps], on_crashed=[cancel_launched_apps])
def train_and_report() -> list[str]:
    job = AnylaunchJob(
        app=trainer_app(), poll_interval_s=1, startup_timeout_s=60, run_timeout_s=600
    )
    handle = launch_app(job)
    finished = False
    try:
        wait_for_app.with_options(retries=2, retry_delay_seconds=5)(handle, job)
        finished = True
    finally:
        if not finished:
            stop_app(handle, job=job, logger=get_run_logger())
    logs = get_app_logs(handle, role_name="trainer", k=0, regex="loss")
    last = logs["trainer/0"][-1]
    get_run_logger().info("rank 0 ended with: %s", last)
    return logs["trainer/0"]


if __name__ == "__main__":
    lines = train_and_report()
    print("\n".join(lines))
    raise SystemExit(0 if len(lines) == 3 else 1)
