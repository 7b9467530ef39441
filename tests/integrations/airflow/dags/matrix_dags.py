"""DAGs of the lifecycle scenario matrix (tests/integrations/lifecycle): one per scenario and
wait mode, ``al_matrix_{scenario}_{sync|deferred}``."""

from datetime import datetime

from airflow.sdk import DAG

from airflow_anylaunch.operators import AnylaunchOperator
from anylaunch.specs.serialize import appdef_from_dict
from tests.integrations.lifecycle.matrix import SCENARIOS, app_dict

for scenario in SCENARIOS.values():
    for mode in ("sync", "deferred"):
        with DAG(
            f"al_matrix_{scenario.name}_{mode}",
            schedule=None,
            start_date=datetime(2024, 1, 1),
            catchup=False,
        ):
            AnylaunchOperator(
                task_id="matrix",
                app=appdef_from_dict(app_dict(scenario)),
                scheduler=scenario.scheduler,
                cfg=dict(scenario.cfg),
                deferrable=mode == "deferred",
                poll_interval=0.3,
                startup_timeout=scenario.startup_timeout,
                run_timeout=scenario.run_timeout,
            )
