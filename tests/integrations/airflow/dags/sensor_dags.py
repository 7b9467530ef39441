"""DAGs for the sensor tests: an upstream task launches, sensors wait in every mode."""

import os
import sys
from datetime import datetime
from typing import Dict, List, Optional

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG  # type: ignore[attr-defined,no-redef,unused-ignore]

import anylaunch.specs as specs
from airflow_anylaunch.operators import AnylaunchOperator
from airflow_anylaunch.sensors import AnylaunchAppSensor

START = datetime(2024, 1, 1)
HANDLE = "{{ ti.xcom_pull(task_ids='launch', key='app_handle') }}"


def launcher(
    script: str, env: Optional[Dict[str, str]] = None, secret_env_names: Optional[List[str]] = None
) -> AnylaunchOperator:
    return AnylaunchOperator(
        task_id="launch",
        app=specs.AppDef(
            name="sensed",
            roles=[
                specs.Role(name="job", image=".", entrypoint=sys.executable, args=["-c", script])
            ],
        ),
        scheduler="local_cwd",
        env=env,
        secret_env_names=secret_env_names,
        wait_for_completion=False,
    )


# one DAG per mode: dag.test() runs tasks one after another, so each sensor needs an app
# that is still running when it starts
MODES = {
    "poke": {"mode": "poke", "poke_interval": 0.5},
    "reschedule": {"mode": "reschedule", "poke_interval": 1},
    "deferrable": {"deferrable": True, "poke_interval": 0.5, "stream_logs": True},
}
for name, kwargs in MODES.items():
    with DAG(f"al_sensor_{name}", schedule=None, start_date=START, catchup=False):
        launch = launcher("import time; time.sleep(3); print('finished the job', flush=True)")
        launch >> AnylaunchAppSensor(task_id="wait", app_handle=HANDLE, **kwargs)

with DAG("al_sensor_failed", schedule=None, start_date=START, catchup=False):
    launch = launcher("import sys, time; time.sleep(1); sys.exit('the input is corrupt')")
    failing = [
        AnylaunchAppSensor(task_id="poke", app_handle=HANDLE, poke_interval=0.5, retries=2),
        AnylaunchAppSensor(
            task_id="deferred", app_handle=HANDLE, poke_interval=0.5, deferrable=True
        ),
        AnylaunchAppSensor(task_id="soft", app_handle=HANDLE, poke_interval=0.5, soft_fail=True),
    ]
    launch >> failing

with DAG("al_sensor_unknown", schedule=None, start_date=START, catchup=False):
    AnylaunchAppSensor(
        task_id="unknown", app_handle="local_cwd://anylaunch/nosuchapp-1234", poke_interval=0.5
    )
    AnylaunchAppSensor(task_id="malformed", app_handle="{{ 'not-a-handle' }}", poke_interval=0.5)

# an app that fails with its secrets in its output and its stderr tail; the sensors learn the
# values from the app's description (DSN is secret only because it is declared)
LEAKY = """
import os, sys, time
time.sleep(1)
print("token=" + os.environ["API_TOKEN"], "dsn=" + os.environ["DSN"], flush=True)
sys.exit("failing with " + os.environ["API_TOKEN"] + " " + os.environ["DSN"])
"""
with DAG("al_sensor_secret", schedule=None, start_date=START, catchup=False):
    launch = launcher(
        LEAKY,
        env={
            "API_TOKEN": os.environ.get("AL_TEST_TOKEN", "unset"),
            "DSN": os.environ.get("AL_TEST_DSN", "unset"),
        },
        secret_env_names=["DSN"],
    )
    launch >> [
        AnylaunchAppSensor(
            task_id="poke", app_handle=HANDLE, poke_interval=0.5, secret_env_names=["DSN"]
        ),
        AnylaunchAppSensor(
            task_id="deferred",
            app_handle=HANDLE,
            poke_interval=0.5,
            deferrable=True,
            stream_logs=True,
            secret_env_names=["DSN"],
        ),
    ]
