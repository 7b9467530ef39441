"""Launch an app without waiting, then wait for it with a sensor in reschedule mode.

``launch`` returns as soon as the app is scheduled; ``wait`` reads the handle from its XCom
and frees its worker slot between pokes; ``report`` reads the sensor's result (the final
status). The handle stays valid across processes and retries.
"""

from datetime import datetime

try:  # Airflow 3
    from airflow.sdk import DAG, task
except ImportError:  # Airflow 2.10/2.11
    from airflow import DAG
    from airflow.decorators import task

from airflow_anylaunch.operators import AnylaunchOperator
from airflow_anylaunch.sensors import AnylaunchAppSensor

with DAG(
    dag_id="anylaunch_launch_and_sense",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    tags=["anylaunch", "example"],
):
    launch = AnylaunchOperator(
        task_id="launch",
        component="utils.python",
        component_args={"c": "import time; time.sleep(2); print('done', flush=True)"},
        scheduler="local_cwd",
        wait_for_completion=False,
    )
    wait = AnylaunchAppSensor(
        task_id="wait",
        app_handle="{{ ti.xcom_pull(task_ids='launch', key='app_handle') }}",
        mode="reschedule",
        poke_interval=1,
        timeout=600,
    )

    @task
    def report(status: dict) -> str:
        print(f"app {status['app_handle']} ended {status['state']}")
        return str(status["state"])

    launch >> wait
    report(wait.output)
