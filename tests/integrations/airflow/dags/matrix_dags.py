"""DAGs of the lifecycle scenario matrix (tests/integrations/lifecycle): one per scenario and
wait mode, ``al_matrix_{scenario}_{sync|deferred}``, each with one task ``matrix``.

Parsing this file needs the ``faulty_local`` plugin registered (the matrix test's fixture
does it): the operator checks its scheduler's name when the DAG is built.
"""

from datetime import datetime

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG  # type: ignore[attr-defined,no-redef,unused-ignore]

from airflow_anylaunch.operators import AnylaunchOperator
from anylaunch.specs.serialize import appdef_from_dict
from tests.integrations.lifecycle.scenarios import POLL_INTERVAL_S, SCENARIOS

MODES = ("sync", "deferred")

for scenario in SCENARIOS.values():
    for mode in MODES:
        with DAG(
            f"al_matrix_{scenario.name}_{mode}",
            schedule=None,
            start_date=datetime(2024, 1, 1),
            catchup=False,
        ):
            AnylaunchOperator(
                task_id="matrix",
                app=appdef_from_dict(scenario.app()),
                scheduler=scenario.scheduler,
                cfg=dict(scenario.cfg),
                deferrable=mode == "deferred",
                poll_interval=POLL_INTERVAL_S,
                startup_timeout=scenario.startup_timeout,
                run_timeout=scenario.run_timeout,
            )
