"""DAGs of placed apps (``targets``): a full first target skipped, an infrastructure loss
relaunched (sync and deferred), a retry after a crash reattaching to the stable handle.

``fulllocal`` is the plugin scheduler in ``../plugins`` (local_cwd whose capacity says no):
the DAGs that name it exist only where it is registered (the tests register it; a parse of
this bundle without it leaves them out instead of failing the file).
"""

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
from anylaunch.runner.placement import Target
from anylaunch.schedulers import get_scheduler_factories

START = datetime(2024, 1, 1)
NO_DELAY = timedelta(seconds=0)


def app(name: str, script: str) -> specs.AppDef:
    return specs.AppDef(
        name=name,
        roles=[specs.Role(name="job", image=".", entrypoint=sys.executable, args=["-c", script])],
    )


if "fulllocal" in get_scheduler_factories():
    for mode in ("sync", "deferred"):
        with DAG(
            f"al_place_skips_a_full_target_{mode}",
            schedule=None,
            start_date=START,
            catchup=False,
            params={"startup_timeout": 600},
        ):
            AnylaunchOperator(
                task_id="job",
                app=app("placed", "print('ran on the second target', flush=True)"),
                # a name, then a dict whose startup timeout is a template (rendered, then cast)
                targets=[
                    "fulllocal",
                    {"scheduler": "local_cwd", "startup_timeout": "{{ params.startup_timeout }}"},
                ],
                poll_interval=0.5,
                deferrable=mode == "deferred",
            )

    with DAG("al_place_nowhere", schedule=None, start_date=START, catchup=False):
        AnylaunchOperator(
            task_id="job",
            app=app("nowhere", "print('never runs')"),
            targets=[Target("fulllocal")],
            poll_interval=0.5,
        )

# attempt 0 writes its progress under the checkpoint URL and then hangs (until the test
# SIGKILLs its supervisor: the platform lost it); attempt 1 finds the progress and ends
RESUMABLE = """
import os, pathlib, time
attempt = os.environ["ANYLAUNCH_ATTEMPT"]
step = pathlib.Path(os.environ["ANYLAUNCH_CHECKPOINT_URL"]) / "step"
if step.exists():
    print(f"attempt {attempt} resumes from {step.read_text()}", flush=True)
else:
    step.parent.mkdir(parents=True, exist_ok=True)
    step.write_text(f"attempt {attempt}")
    print(f"attempt {attempt} wrote its checkpoint", flush=True)
    time.sleep(300)
"""

for mode in ("sync", "deferred"):
    with DAG(f"al_place_relaunch_{mode}", schedule=None, start_date=START, catchup=False):
        AnylaunchOperator(
            task_id="job",
            app=app("resumable", RESUMABLE),
            targets=["local_cwd"],
            max_infra_retries=1,
            poll_interval=0.5,
            deferrable=mode == "deferred",
        )


def retried_marker() -> str:
    """A file beside the test's own local_cwd state directory: the retry creates it."""
    return os.path.join(os.path.dirname(os.environ["ANYLAUNCH_LOCAL_STATE_DIR"]), "retried")


class CrashOnFirstTry(AnylaunchOperator):
    """Dies while waiting on its first try (a worker lost after the placed app was launched);
    a later try tells the app it got that far, so the app cannot end before it looks."""

    def poll_until_complete(self, external_id: Any, context: Any) -> None:
        if context["ti"].try_number == 1:
            raise RuntimeError(f"simulated worker crash while waiting for {external_id}")
        open(retried_marker(), "w").close()
        super().poll_until_complete(external_id, context)


SLOW_OK = """
import os, time
marker = os.path.join(os.path.dirname(os.environ["ANYLAUNCH_LOCAL_STATE_DIR"]), "retried")
for _ in range(600):
    if os.path.exists(marker):
        break
    time.sleep(0.1)
print("done after the crash", flush=True)
"""

with DAG("al_place_retry_reattaches", schedule=None, start_date=START, catchup=False):
    CrashOnFirstTry(
        task_id="job",
        app=app("slow-ok", SLOW_OK),
        targets=["local_cwd"],
        poll_interval=0.5,
        retries=1,
        retry_delay=NO_DELAY,
    )
