"""Launch a built-in component and wait for it in the triggerer (the worker slot is freed).

The trigger streams the app's log lines into the task log while it waits. A startup timeout
(not RUNNING in time) and the task's execution_timeout both cancel the app and fail the task;
killing the deferred task cancels the app too.
"""

from datetime import datetime, timedelta

try:  # Airflow 3
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.10/2.11
    from airflow import DAG

from airflow_anylaunch.operators import AnylaunchOperator

with DAG(
    dag_id="anylaunch_deferrable",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    tags=["anylaunch", "example"],
):
    AnylaunchOperator(
        task_id="count",
        component="utils.python",
        component_args={
            "c": "import time\n"
            "for i in (1, 2, 3):\n"
            "    print('counting', i, 'for {{ dag.dag_id }}', flush=True)\n"
            "    time.sleep(0.3)",
        },
        scheduler="local_cwd",
        deferrable=True,
        poll_interval=1,
        startup_timeout=timedelta(minutes=2),
        execution_timeout=timedelta(minutes=10),
    )
