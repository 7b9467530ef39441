"""DAGs running array apps (sweeps) as one task: sync, deferred, sensed, retried."""

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
from airflow_anylaunch.sensors import AnylaunchAppSensor

START = datetime(2024, 1, 1)
NO_DELAY = timedelta(seconds=0)
GRID = [{"lr": lr} for lr in (0.1, 0.03, 0.01, 0.003, 0.001)]

# index 3 of 5 fails: 4/5 succeed
SWEEP = """
import os, sys, time
time.sleep(float(os.environ.get("AL_DELAY", "0")))
i = int(os.environ["ANYLAUNCH_ARRAY_INDEX"])
arg = sys.argv[1] if len(sys.argv) > 1 else "none"
print(f"index={i} arg={arg} env_lr={os.environ['ANYLAUNCH_PARAM_LR']}", flush=True)
sys.exit(1 if i == 3 else 0)
"""


def swept(ratio: float, delay: float = 0) -> specs.AppDef:
    """A sweep built with specs.sweep: ${param.lr} in the args, ANYLAUNCH_PARAM_LR in the env
    (each index sleeps ``delay`` seconds first)."""
    app = specs.AppDef(
        "sweep",
        [
            specs.Role(
                "train",
                image=".",
                entrypoint=sys.executable,
                args=["-c", SWEEP, "${param.lr}"],
                env={"AL_DELAY": str(delay)},
            )
        ],
    )
    return specs.sweep(app, GRID, parallelism=2, min_success_ratio=ratio)


for ratio, tag in ((0.8, "08"), (1.0, "10")):
    # sync: an AppDef that is already a sweep
    with DAG(f"al_sweep_{tag}_sync", schedule=None, start_date=START, catchup=False):
        AnylaunchOperator(
            task_id="sweep", app=swept(ratio), scheduler="local_cwd", poll_interval=0.5
        )
    # deferred: a component made an array by the operator's array=
    with DAG(f"al_sweep_{tag}_deferred", schedule=None, start_date=START, catchup=False):
        AnylaunchOperator(
            task_id="sweep",
            component="utils.python",
            component_args={"c": SWEEP},
            array=specs.ArraySpec(5, parallelism=2, min_success_ratio=ratio, params=GRID),
            scheduler="local_cwd",
            poll_interval=0.5,
            deferrable=True,
        )

with DAG("al_sweep_sensed", schedule=None, start_date=START, catchup=False):
    launch = AnylaunchOperator(
        task_id="launch",
        app=swept(0.8, delay=2),  # still running when the sensor defers
        scheduler="local_cwd",
        wait_for_completion=False,
    )
    wait = AnylaunchAppSensor(
        task_id="wait",
        app_handle="{{ ti.xcom_pull(task_ids='launch', key='app_handle') }}",
        deferrable=True,
        stream_logs=True,
        poke_interval=0.5,
    )
    launch >> wait


def retried_marker() -> str:
    return os.path.join(os.path.dirname(os.environ["ANYLAUNCH_LOCAL_STATE_DIR"]), "retried")


class CrashOnFirstTry(AnylaunchOperator):
    """Dies while waiting on its first try (a lost worker): the array keeps running; the
    retry creates the marker the indices wait for, after deciding to reattach."""

    def poll_until_complete(self, external_id: Any, context: Any) -> None:
        if context["ti"].try_number == 1:
            raise RuntimeError(f"simulated worker crash while waiting for {external_id}")
        open(retried_marker(), "w").close()
        super().poll_until_complete(external_id, context)


# every index runs until the retry reached its wait (at most 60 s)
WAIT_FOR_RETRY = """
import os, time
marker = os.path.join(os.path.dirname(os.environ["ANYLAUNCH_LOCAL_STATE_DIR"]), "retried")
for _ in range(600):
    if os.path.exists(marker):
        break
    time.sleep(0.1)
print("index", os.environ["ANYLAUNCH_ARRAY_INDEX"], "done after the crash", flush=True)
"""

for dag_id, deferrable in (("al_array_retry", False), ("al_array_retry_deferred", True)):
    with DAG(dag_id, schedule=None, start_date=START, catchup=False):
        CrashOnFirstTry(
            task_id="job",
            app=specs.AppDef(
                "slow-array",
                [
                    specs.Role(
                        "job", image=".", entrypoint=sys.executable, args=["-c", WAIT_FOR_RETRY]
                    )
                ],
                array=specs.ArraySpec(3),
            ),
            scheduler="local_cwd",
            poll_interval=0.5,
            deferrable=deferrable,
            retries=1,
            retry_delay=NO_DELAY,
        )
