"""DAGs for durable retries: a retry reattaches to the app instead of launching it again."""

import os
import sys
from datetime import datetime, timedelta
from typing import Any

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG  # type: ignore[attr-defined,no-redef,unused-ignore]

import anylaunch.specs as specs
from airflow_anylaunch.operators import AnylaunchOperator

START = datetime(2024, 1, 1)
NO_DELAY = timedelta(seconds=0)


def retried_marker() -> str:
    """A file beside the test's own local_cwd state directory (each test has its own):
    ``CrashOnFirstTry``'s later try creates it, ``SLOW_OK`` runs until it exists."""
    return os.path.join(os.path.dirname(os.environ["ANYLAUNCH_LOCAL_STATE_DIR"]), "retried")


class CrashOnFirstTry(AnylaunchOperator):
    """Dies while waiting on its first try, like a worker lost after the app was launched
    (the handle is already in task_state_store); the app itself keeps running. A later try
    tells the app it got that far (after deciding to reattach or launch), so the app cannot
    end before the retry looks for it, however slowly the retry starts."""

    def poll_until_complete(self, external_id: Any, context: Any) -> None:
        if context["ti"].try_number == 1:
            raise RuntimeError(f"simulated worker crash while waiting for {external_id}")
        open(retried_marker(), "w").close()
        super().poll_until_complete(external_id, context)


def app(name: str, script: str) -> specs.AppDef:
    return specs.AppDef(
        name=name,
        roles=[specs.Role(name="job", image=".", entrypoint=sys.executable, args=["-c", script])],
    )


# runs until the task's retry reached its wait (at most 60 s): the same marker, found from
# the state directory in the env the app inherits
SLOW_OK = """
import os, time
marker = os.path.join(os.path.dirname(os.environ["ANYLAUNCH_LOCAL_STATE_DIR"]), "retried")
for _ in range(600):
    if os.path.exists(marker):
        break
    time.sleep(0.1)
print("done after the crash", flush=True)
"""
# fails the first time it runs, succeeds the next (a marker file the test names)
FLAKY = """
import os, sys
marker = os.environ["AL_TEST_MARKER"]
if not os.path.exists(marker):
    open(marker, "w").close()
    sys.exit("first launch fails")
print("second launch works", flush=True)
"""

for dag_id, deferrable in (("al_retry_reattach", False), ("al_retry_reattach_deferred", True)):
    with DAG(dag_id, schedule=None, start_date=START, catchup=False):
        CrashOnFirstTry(
            task_id="job",
            app=app("slow-ok", SLOW_OK),
            scheduler="local_cwd",
            poll_interval=0.5,
            deferrable=deferrable,
            retries=1,
            retry_delay=NO_DELAY,
        )

with DAG("al_retry_after_failure", schedule=None, start_date=START, catchup=False):
    AnylaunchOperator(
        task_id="job",
        app=app("flaky", FLAKY),
        scheduler="local_cwd",
        poll_interval=0.5,
        retries=1,
        retry_delay=NO_DELAY,
    )

# killed by SIGKILL the first time it runs (as the kernel or a lost node would), fine the next
KILLED_ONCE = """
import os, signal
marker = os.environ["AL_TEST_MARKER"]
if not os.path.exists(marker):
    open(marker, "w").close()
    os.kill(os.getpid(), signal.SIGKILL)
print("second launch works", flush=True)
"""

for dag_id, script in (
    ("al_retry_infra_only_app_error", FLAKY),
    ("al_retry_infra_only_killed", KILLED_ONCE),
):
    for deferrable in (False, True):
        with DAG(
            f"{dag_id}{'_deferred' if deferrable else ''}",
            schedule=None,
            start_date=START,
            catchup=False,
        ):
            AnylaunchOperator(
                task_id="job",
                app=app("infra-only", script),
                scheduler="local_cwd",
                poll_interval=0.5,
                deferrable=deferrable,
                retries=2,
                retry_delay=NO_DELAY,
                retry_only_infrastructure_failures=True,
            )


class CancelThenCrashOnFirstTry(AnylaunchOperator):
    """Its first try asks to cancel its app (a request: the app takes seconds to stop) and dies
    at once, as a killed or timed-out try whose cancel is still in flight."""

    def poll_until_complete(self, external_id: Any, context: Any) -> None:
        if context["ti"].try_number == 1:
            from anylaunch.runner import get_runner

            with get_runner() as runner:
                runner.cancel(str(external_id))
            raise RuntimeError(f"simulated kill while cancelling {external_id}")
        super().poll_until_complete(external_id, context)


SLOW_TO_STOP = """
import signal, sys, time
def stop(*_):
    time.sleep(3)
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
time.sleep(2)
print("done", flush=True)
"""

with DAG("al_retry_after_cancel_in_flight", schedule=None, start_date=START, catchup=False):
    CancelThenCrashOnFirstTry(
        task_id="job",
        app=app("slow-stop", SLOW_TO_STOP),
        scheduler="local_cwd",
        cfg={"cancel_grace_s": 30},
        poll_interval=0.5,
        retries=1,
        retry_delay=NO_DELAY,
    )

# durable=False: a retry never looks for the app of the earlier try (it launches a second one)
with DAG("al_retry_not_durable", schedule=None, start_date=START, catchup=False):
    CrashOnFirstTry(
        task_id="job",
        app=app("slow-ok", SLOW_OK),
        scheduler="local_cwd",
        poll_interval=0.5,
        durable=False,
        retries=1,
        retry_delay=NO_DELAY,
    )


class ClearedAfterFirstTry(AnylaunchOperator):
    """Its first try dies while its app runs; its next try sees the task instance as a clear
    leaves it (Airflow grants fresh retries: ``max_tries`` grows), as the try that follows a
    clear of a deferred task does while the old trigger has not cancelled the app yet."""

    def execute(self, context: Any) -> Any:
        if context["ti"].try_number > 1:
            context["ti"].max_tries += 1
        return super().execute(context)

    def poll_until_complete(self, external_id: Any, context: Any) -> None:
        if context["ti"].try_number == 1:
            raise RuntimeError(f"simulated end of the first try while {external_id} runs")
        super().poll_until_complete(external_id, context)


# runs for two minutes the first time (until cancelled), ends at once the next
LONG_ONCE = """
import os, time
marker = os.environ["AL_TEST_MARKER"]
if not os.path.exists(marker):
    open(marker, "w").close()
    time.sleep(120)
print("fresh launch works", flush=True)
"""

with DAG("al_retry_after_a_clear", schedule=None, start_date=START, catchup=False):
    ClearedAfterFirstTry(
        task_id="job",
        app=app("long-once", LONG_ONCE),
        scheduler="local_cwd",
        poll_interval=0.5,
        retries=1,
        retry_delay=NO_DELAY,
    )
