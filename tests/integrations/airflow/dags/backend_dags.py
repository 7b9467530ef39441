"""DAGs that run one small app on each real backend (test_on_backends.py), waiting in the
task (``al_on_<scheduler>``) or in the triggerer (``al_on_<scheduler>_deferred``).

The DAG names the scheduler; its run options and session come from the ``anylaunch_backend``
connection the test defines, as a deployment keeps cluster settings out of DAG files.
"""

from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG  # type: ignore[attr-defined,no-redef,unused-ignore]

from airflow_anylaunch.operators import AnylaunchOperator
from tests.integrations.backend_targets import BACKENDS, hello_app

START = datetime(2024, 1, 1)

for scheduler in BACKENDS:
    for suffix, deferrable in (("", False), ("_deferred", True)):
        with DAG(f"al_on_{scheduler}{suffix}", schedule=None, start_date=START, catchup=False):
            AnylaunchOperator(
                task_id="hello",
                app=hello_app(scheduler),
                scheduler=scheduler,
                anylaunch_conn_id="anylaunch_backend",
                deferrable=deferrable,
                poll_interval=0.5,
                execution_timeout=timedelta(minutes=2),
            )
