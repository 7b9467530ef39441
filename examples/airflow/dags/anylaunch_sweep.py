"""A hyperparameter sweep as ONE task: one array app, one handle, one wait, one log.

Five learning rates run at most two at once; the last one fails, and the task still succeeds
because min_success_ratio=0.8 (4 of 5). The task log shows each line with its index
(``trainer/3 ...``); XCom ``array`` holds the per-index outcomes (ranges by state, exit codes),
which the downstream task reads even when the sweep fails (trigger_rule all_done).
"""

from datetime import datetime

try:  # Airflow 3
    from airflow.sdk import DAG, task
except ImportError:  # Airflow 2.10/2.11
    from airflow import DAG
    from airflow.decorators import task

import anylaunch.specs as specs
from airflow_anylaunch.operators import AnylaunchOperator

train = specs.AppDef(
    name="train",
    roles=[
        specs.Role(
            name="trainer",
            image=".",
            entrypoint="sh",
            args=["-c", 'echo "training with lr=${param.lr}"; test "$ANYLAUNCH_PARAM_LR" != 0.3'],
        )
    ],
)

with DAG(
    dag_id="anylaunch_sweep",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    tags=["anylaunch", "example"],
):
    sweep = AnylaunchOperator(
        task_id="sweep",
        app=specs.sweep(
            train,
            [{"lr": lr} for lr in (0.1, 0.03, 0.01, 0.003, 0.3)],
            parallelism=2,
            min_success_ratio=0.8,
        ),
        scheduler="local_cwd",
        poll_interval=1,
    )

    @task(trigger_rule="all_done")
    def report(outcomes: dict) -> list:
        """The failed indices of the sweep (from its per-index outcomes in XCom)."""
        failed = specs.ArrayStatus.from_dict(outcomes).failed()
        print("failed indices:", failed)
        return failed

    report(sweep.output["array"])
