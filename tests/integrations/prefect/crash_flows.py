"""Flows that the crash tests run in a process of their own and then terminate (SIGTERM).

Usage: python crash_flows.py run_app|hooks|parent
- run_app: the run_app flow waiting for an app that sleeps;
- parent: a user's flow (with the cancel hooks) calling the run_app subflow;
- hooks: a flow of a user that launches an app with launch_app, has only the
  cancel_launched_apps hooks (no try/finally), and sleeps.
Prints "starting" first.
"""

import sys
import time

from prefect import flow

from prefect_anylaunch import AnylaunchJob, cancel_launched_apps, launch_app, run_app

SLEEPER = {
    "name": "crash-victim",
    "roles": [
        {
            "name": "w",
            "image": ".",
            "entrypoint": sys.executable,
            "args": ["-c", "import time; time.sleep(120)"],
        }
    ],
}


@flow(on_crashed=[cancel_launched_apps], on_cancellation=[cancel_launched_apps])
def launch_and_sleep() -> None:
    launch_app(AnylaunchJob(app=SLEEPER))
    time.sleep(120)


@flow(on_crashed=[cancel_launched_apps], on_cancellation=[cancel_launched_apps])
def parent_of_run_app() -> None:
    run_app(AnylaunchJob(app=SLEEPER, poll_interval_s=0.5))


if __name__ == "__main__":
    print("starting", flush=True)
    if sys.argv[1] == "run_app":
        run_app(AnylaunchJob(app=SLEEPER, poll_interval_s=0.5))
    elif sys.argv[1] == "parent":
        parent_of_run_app()
    else:
        launch_and_sleep()
