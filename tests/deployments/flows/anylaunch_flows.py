"""Flows the Prefect deployment tests run through a work pool and a worker: a parent flow
(with the cancel hooks) whose ``run_app`` subflow runs a local_cwd app that prints one line a
second for ``duration`` seconds."""

import sys

from prefect import flow

from prefect_anylaunch import AnylaunchJob, cancel_launched_apps, run_app

TICKER = (
    "import sys, time\n"
    "for i in range(int(sys.argv[1])):\n"
    "    print('tick', i, flush=True)\n"
    "    time.sleep(1)\n"
)


@flow(on_crashed=[cancel_launched_apps], on_cancellation=[cancel_launched_apps])
def ticker_parent(duration: int = 60) -> str:
    app = {
        "name": "pticker",
        "roles": [
            {
                "name": "ticker",
                "image": ".",
                "entrypoint": sys.executable,
                "args": ["-c", TICKER, str(duration)],
            }
        ],
    }
    result = run_app(AnylaunchJob(app=app, poll_interval_s=0.5))
    return str(result["state"])
