"""The second code location the Dagster deployment tests serve (its own code server): a job
whose anylaunch op runs a ticker on the Slurm cluster (``TICKER_DURATION`` seconds, one line
a second), retried from failure once when its run fails."""

import os

import dagster as dg

from anylaunch.specs import AppDef, Resource, Role
from dagster_anylaunch import AnylaunchResource, build_anylaunch_op

TICKER = (
    "import sys, time\n"
    "for i in range(int(sys.argv[1])):\n"
    "    print('stick', i, flush=True)\n"
    "    time.sleep(1)\n"
)
APP = AppDef(
    "sticker",
    [
        Role(
            "ticker",
            "/tmp",
            entrypoint="python3",
            args=["-c", TICKER, os.environ.get("TICKER_DURATION", "120")],
            resource=Resource(cpu=1, gpu=0, memMB=128),
        )
    ],
)

# the job's files in the deployment's directory (the nodes see it), not the code's (unset
# when pytest imports this file for its doctests)
CFG = {"job_dir": d} if (d := os.environ.get("SLURM_TICKER_JOB_DIR")) else {}


@dg.job(
    resource_defs={"anylaunch": AnylaunchResource(poll_interval_s=1.0)},
    tags={"dagster/max_retries": "1", "dagster/retry_strategy": "FROM_FAILURE"},
)
def slurm_ticker_job() -> None:
    build_anylaunch_op("ticker", APP, scheduler="slurm", cfg=CFG)()


defs = dg.Definitions(jobs=[slurm_ticker_job])
