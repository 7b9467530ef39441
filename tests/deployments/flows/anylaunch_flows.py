"""Flows the Prefect deployment tests run through a work pool and its workers: parent flows
(with the cancel hooks) whose ``run_app`` subflow runs an app that prints one line a second
for ``duration`` seconds, on local_cwd or as a Kubernetes pod."""

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


# the same ticker as a pod: a cluster backend, so the app outlives every Prefect process
KUBE_TICKER = 'i=0; while [ "$i" -lt "$0" ]; do echo tick $i; i=$((i+1)); sleep 1; done'


@flow(on_crashed=[cancel_launched_apps], on_cancellation=[cancel_launched_apps])
def kube_ticker_parent(namespace: str, image: str, duration: int = 60) -> str:
    app = {
        "name": "kticker",
        "roles": [
            {
                "name": "ticker",
                "image": image,
                "entrypoint": "sh",
                "args": ["-c", KUBE_TICKER, str(duration)],
                "resource": {"cpu": 0, "gpu": 0, "memMB": 128},
            }
        ],
    }
    job = AnylaunchJob(
        app=app, scheduler="kubernetes", cfg={"namespace": namespace}, poll_interval_s=1.0
    )
    return str(run_app(job)["state"])
