"""Jobs the termination and re-execution tests run, in a run worker process (run_worker.py)
and in the test process (re-execution loads this file by path, as a code location would).

``placed_job`` places a RESUMABLE app (see tests/integrations/placement_plugin.py) on local_cwd
with one infrastructure relaunch.

The app's behaviour comes from the environment, which the worker process inherits:
TEST_APP_SLEEP_S (how long the app runs at most), TEST_APP_RELEASE_FILE (the app ends as soon
as this file exists) and TEST_FAIL_ONCE_MARKER (fail the step once, after the app succeeded,
when the marker file does not exist yet).
"""

import os
import sys
from typing import Dict, Optional

import dagster as dg

from anylaunch.specs import AppDef, Role
from dagster_anylaunch import AnylaunchResource

SLOW_APP_CODE = """\
import os, time
print("started", flush=True)
release, deadline = os.environ["RELEASE_FILE"], time.monotonic() + float(os.environ["SLEEP_S"])
while time.monotonic() < deadline and not (release and os.path.exists(release)):
    time.sleep(0.05)
print("finished", flush=True)
"""


def python_app(
    name: str, code: str, env: Optional[Dict[str, str]] = None, num_replicas: int = 1
) -> AppDef:
    """An app running ``python -c code`` with this interpreter (which has dagster-pipes)."""
    role = Role(
        name="main",
        image=".",
        entrypoint=sys.executable,
        args=["-c", code],
        env=dict(env or {}),
        num_replicas=num_replicas,
    )
    return AppDef(name, [role])


@dg.op
def slow_step(context: dg.OpExecutionContext, anylaunch: AnylaunchResource) -> str:
    env = {
        "SLEEP_S": os.environ.get("TEST_APP_SLEEP_S", "2"),
        "RELEASE_FILE": os.environ.get("TEST_APP_RELEASE_FILE", ""),
    }
    run = anylaunch.run(context, python_app("slow", SLOW_APP_CODE, env))
    marker = os.environ.get("TEST_FAIL_ONCE_MARKER")
    if marker and not os.path.exists(marker):
        open(marker, "w").close()
        raise dg.Failure(description="the step fails once, after its app succeeded")
    return run.handle


@dg.job(
    executor_def=dg.in_process_executor,
    resource_defs={"anylaunch": AnylaunchResource(poll_interval_s=0.2, cancel_timeout_s=30)},
)
def slow_job() -> None:
    slow_step()


@dg.op
def placed_step(context: dg.OpExecutionContext, anylaunch: AnylaunchResource) -> int:
    from tests.integrations.placement_plugin import RESUMABLE

    run = anylaunch.run(context, python_app("resumable", RESUMABLE))
    assert run.status.placement is not None
    return run.status.placement.attempt


@dg.job(
    executor_def=dg.in_process_executor,
    resource_defs={
        # the checkpoint root comes from $ANYLAUNCH_CHECKPOINT_ROOT (the worker inherits it)
        "anylaunch": AnylaunchResource(
            targets=["local_cwd"], max_infra_retries=1, poll_interval_s=0.2, cancel_timeout_s=30
        )
    },
)
def placed_job() -> None:
    placed_step()
