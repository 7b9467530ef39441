"""Definitions the Dagster deployment tests serve from a code server: a job whose anylaunch op
runs a local_cwd app printing one line a second for ``TICKER_DURATION`` seconds."""

import os
import sys

import dagster as dg

from anylaunch.specs import AppDef, Role
from dagster_anylaunch import AnylaunchResource, build_anylaunch_op

TICKER = (
    "import sys, time\n"
    "for i in range(int(sys.argv[1])):\n"
    "    print('dtick', i, flush=True)\n"
    "    time.sleep(1)\n"
)
APP = AppDef(
    "dticker",
    [
        Role(
            "ticker",
            ".",
            entrypoint=sys.executable,
            args=["-c", TICKER, os.environ.get("TICKER_DURATION", "120")],
        )
    ],
)


@dg.job(
    resource_defs={"anylaunch": AnylaunchResource(poll_interval_s=0.5)},
    tags={"dagster/max_retries": "1", "dagster/retry_strategy": "FROM_FAILURE"},
)
def ticker_job() -> None:
    build_anylaunch_op("ticker", APP)()


defs = dg.Definitions(jobs=[ticker_job])
