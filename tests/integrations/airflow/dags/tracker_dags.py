"""DAGs for the tracker and archive tests: a job that tracks, sensors on an archived app."""

import os
import sys
from datetime import datetime

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG  # type: ignore[attr-defined,no-redef,unused-ignore]

import anylaunch.specs as specs
from airflow_anylaunch.operators import AnylaunchOperator
from airflow_anylaunch.sensors import AnylaunchAppSensor

START = datetime(2024, 1, 1)

TRACKS = """
from anylaunch.tracker import AppRun

run = AppRun.run_from_env()
run.add_metadata(lr=0.1)
run.add_artifact("model", "/tmp/x")
print("tracked as", run.job_id(), flush=True)
"""


def tracking_app() -> specs.AppDef:
    role = specs.Role("trainer", image=".", entrypoint=sys.executable, args=["-c", TRACKS])
    return specs.AppDef("tracks", [role])


for mode, kwargs in (("sync", {}), ("deferred", {"deferrable": True})):
    with DAG(f"al_tracked_{mode}", schedule=None, start_date=START, catchup=False):
        AnylaunchOperator(
            task_id="train", app=tracking_app(), scheduler="local_cwd", poll_interval=0.5, **kwargs
        )

# the handle of an app that ended and whose local_cwd state was deleted (set by the test)
ARCHIVED = os.environ.get("AL_ARCHIVED_HANDLE", "local_cwd://none/none")
for mode, kwargs in (("poke", {}), ("deferred", {"deferrable": True, "stream_logs": True})):
    with DAG(f"al_sensed_archived_{mode}", schedule=None, start_date=START, catchup=False):
        AnylaunchAppSensor(task_id="wait", app_handle=ARCHIVED, poke_interval=0.5, **kwargs)

# the handle of an ended app whose job tracked its secret env value (set by the test)
TRACKED = os.environ.get("AL_TRACKED_HANDLE", "local_cwd://none/none")
for mode, kwargs in (("poke", {}), ("deferred", {"deferrable": True})):
    with DAG(f"al_sensed_tracked_{mode}", schedule=None, start_date=START, catchup=False):
        AnylaunchAppSensor(task_id="wait", app_handle=TRACKED, poke_interval=0.5, **kwargs)
