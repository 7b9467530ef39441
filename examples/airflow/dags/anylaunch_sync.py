"""Launch an app from an AppDef and wait for it in the worker.

The app's two replicas print a few lines each; they stream into the task log as
``greeter/0 ...`` / ``greeter/1 ...`` while the app runs. The task pushes ``app_handle`` and
``ui_url`` to XCom as soon as the app is scheduled and returns the final status.
"""

import sys
from datetime import datetime

try:  # Airflow 3
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.10/2.11
    from airflow import DAG

import anylaunch.specs as specs
from airflow_anylaunch.operators import AnylaunchOperator

GREET = """
import os, time
for step in range(3):
    print(f"hello from replica {os.environ['REPLICA']} of run {os.environ['RUN']}, step {step}", flush=True)
    time.sleep(0.2)
"""

app = specs.AppDef(
    name="hello",
    roles=[
        specs.Role(
            name="greeter",
            image=".",
            entrypoint=sys.executable,
            args=["-c", GREET],
            env={"REPLICA": specs.macros.replica_id},
            num_replicas=2,
        )
    ],
)

with DAG(
    dag_id="anylaunch_sync",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    tags=["anylaunch", "example"],
):
    AnylaunchOperator(
        task_id="hello",
        app=app,
        scheduler="local_cwd",
        env={"RUN": "{{ run_id }}"},  # templated, like component_args, cfg, image, app_name
        poll_interval=1,
    )
