"""DAGs for the operator tests (run by tests/integrations/airflow with dag.test()).

Apps run ``python -c`` scripts on local_cwd; values that vary per test (marker files, log
dirs) come from the environment the test sets, which the apps inherit.
"""

import sys
from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG  # type: ignore[attr-defined,no-redef,unused-ignore]

import anylaunch.specs as specs
from airflow_anylaunch.operators import AnylaunchOperator

START = datetime(2024, 1, 1)


def python_app(name: str, script: str, replicas: int = 1) -> specs.AppDef:
    return specs.AppDef(
        name=name,
        roles=[
            specs.Role(
                name="worker",
                image=".",
                entrypoint=sys.executable,
                args=["-c", script],
                num_replicas=replicas,
            )
        ],
    )


FAIL = """
import sys
print("preparing the data", flush=True)
print("about to fail: the input is missing", file=sys.stderr, flush=True)
sys.exit(3)
"""
LONG = "import time; print('working', flush=True); time.sleep(120)"
COUNT = "import time\nfor i in range(4):\n    print('tick', i, flush=True); time.sleep(0.3)"
LOG_DIR = "import os; print('log dir is', os.environ.get('AL_TEST_LOG_DIR'), flush=True)"

with DAG("al_sync_fail", schedule=None, start_date=START, catchup=False):
    AnylaunchOperator(
        task_id="fail", app=python_app("fail", FAIL), scheduler="local_cwd", poll_interval=0.5
    )

with DAG("al_deferred_logs", schedule=None, start_date=START, catchup=False):
    AnylaunchOperator(
        task_id="count",
        app=lambda: python_app("count", COUNT, replicas=2),  # built when the task runs
        scheduler="local_cwd",
        deferrable=True,
        poll_interval=0.5,
        log_replicas=[1],
    )

with DAG("al_deferred_fail", schedule=None, start_date=START, catchup=False):
    AnylaunchOperator(
        task_id="fail",
        app=python_app("fail", FAIL),
        scheduler="local_cwd",
        deferrable=True,
        poll_interval=0.5,
    )

with DAG("al_conn_defaults", schedule=None, start_date=START, catchup=False):
    # no scheduler, no cfg: both come from the anylaunch connection the test defines
    AnylaunchOperator(
        task_id="from_conn",
        component="utils.python",
        component_args={"c": LOG_DIR},
        anylaunch_conn_id="anylaunch_test",
        poll_interval=0.5,
    )

with DAG("al_templated_cfg", schedule=None, start_date=START, catchup=False):
    AnylaunchOperator(
        task_id="templated",
        component="utils.echo",
        component_args={"msg": "echo from {{ dag.dag_id }}", "num_replicas": "{{ 1 + 1 }}"},
        app_name="renamed-{{ dag.dag_id | replace('_', '-') }}",
        scheduler="{{ 'local_' ~ 'cwd' }}",
        cfg={
            "cancel_grace_s": "{{ 2 }}",
            # the test sets the variable (AIRFLOW_VAR_AL_LOG_DIR): a relative dir would land
            # in the current directory
            "log_dir": "{{ var.value.al_log_dir }}",
        },
        poll_interval=0.5,
    )

# Jinja inside the AppDef: name, args and env values are rendered like KPO's arguments/env_vars
SHOW = "import os, sys; print('args', sys.argv[1:], 'env', os.environ['AL_RUN'], flush=True)"


def templated_app() -> specs.AppDef:
    app = python_app("tpl-{{ dag.dag_id | replace('_', '-') }}", SHOW)
    app.roles[0].args += ["{{ params.word }}", "{{ 20 + 22 }}"]
    app.roles[0].env = {"AL_RUN": "run-{{ params.word }}"}
    return app


with DAG("al_templated_app", schedule=None, start_date=START, catchup=False, params={"word": "hi"}):
    AnylaunchOperator(task_id="app", app=templated_app(), scheduler="local_cwd", poll_interval=0.5)
    AnylaunchOperator(task_id="built", app=templated_app, scheduler="local_cwd", poll_interval=0.5)

with DAG(
    "al_templated_native",
    schedule=None,
    start_date=START,
    catchup=False,
    params={"word": "hi"},
    render_template_as_native_obj=True,
):
    AnylaunchOperator(task_id="app", app=templated_app(), scheduler="local_cwd", poll_interval=0.5)

with DAG(
    "al_templated_secret",
    schedule=None,
    start_date=START,
    catchup=False,
    params={"pw": "pw-{{ 'x' }}-value-Q7"},
):
    # DB_LOGIN is no built-in secret name: it is secret because the task declares it
    secret = python_app("tpl-secret", "print('ok', flush=True)")
    secret.roles[0].env = {"DB_LOGIN": "{{ params.pw }}"}
    AnylaunchOperator(
        task_id="app",
        app=secret,
        env={"DB_LOGIN": "{{ params.pw }}"},
        scheduler="local_cwd",
        secret_env_names=["DB_LOGIN"],
        poll_interval=0.5,
    )

# dag.test() runs the task in-process: after on_kill the task is not actually killed, so the
# kept app must end by itself for the run to finish
KEPT = "import time; print('working', flush=True); time.sleep(5)"
for dag_id, action, script in (("al_kill_sync", "cancel", LONG), ("al_kill_keep", "keep", KEPT)):
    with DAG(dag_id, schedule=None, start_date=START, catchup=False):
        AnylaunchOperator(
            task_id="long",
            app=python_app("long", script),
            scheduler="local_cwd",
            poll_interval=0.5,
            on_kill_action=action,
        )

for dag_id, deferrable in (("al_timeout_sync", False), ("al_timeout_deferred", True)):
    with DAG(dag_id, schedule=None, start_date=START, catchup=False):
        AnylaunchOperator(
            task_id="long",
            app=python_app("long", LONG),
            scheduler="local_cwd",
            poll_interval=0.5,
            deferrable=deferrable,
            execution_timeout=timedelta(seconds=3),
        )

with DAG("al_startup_timeout", schedule=None, start_date=START, catchup=False):
    # A real scheduler holds the job: Slurm keeps it PENDING (reason BeginTime) for an hour, so
    # the startup timeout fires deterministically (local_cwd starts apps too fast to race).
    AnylaunchOperator(
        task_id="slow_start",
        app=specs.AppDef(
            name="slow-start",
            roles=[
                specs.Role(
                    name="worker",
                    image="/tmp",
                    entrypoint="sleep",
                    args=["60"],
                    resource=specs.Resource(cpu=1, gpu=0, memMB=64),
                )
            ],
        ),
        scheduler="slurm",
        cfg={"sbatch_args": ["--begin=now+3600"]},
        poll_interval=0.5,
        startup_timeout=3,
    )

with DAG("al_bad_inputs", schedule=None, start_date=START, catchup=False):
    AnylaunchOperator(
        task_id="unknown_scheduler",
        component="utils.echo",
        scheduler="{{ 'local_cdw' }}",  # templated, so only the rendered value can be checked
        retries=3,
    )
    AnylaunchOperator(
        task_id="bad_cfg",
        component="utils.echo",
        scheduler="local_cwd",
        cfg={"log_dirr": "/tmp/logs"},
        retries=3,
    )
    AnylaunchOperator(
        task_id="bad_component_args",
        component="utils.echo",
        component_args={"msgg": "hi"},
        scheduler="local_cwd",
    )
    AnylaunchOperator(task_id="no_scheduler", component="utils.echo", anylaunch_conn_id=None)

# --- the core lifecycle policy, driven by both wait modes ---------------------------------

CHATTY_SECRET = """
import os, sys
for i in range(50):
    print(f"line {i}", flush=True)
print("conn=" + os.environ["CONN_STRING"], "token=" + os.environ["API_TOKEN"], flush=True)
# into the stderr tail the scheduler reports too (the failure text, the trigger event)
print("failing with token " + os.environ["API_TOKEN"], file=sys.stderr, flush=True)
sys.exit(4)
"""


def secret_app(name: str) -> specs.AppDef:
    import os

    app = python_app(name, CHATTY_SECRET)
    app.roles[0].env = {
        "CONN_STRING": os.environ.get("AL_TEST_CONN", "unset"),
        "API_TOKEN": os.environ.get("AL_TEST_TOKEN", "unset"),
    }
    return app


for mode, deferrable in (("sync", False), ("deferred", True)):
    with DAG(f"al_lines_secrets_{mode}", schedule=None, start_date=START, catchup=False):
        AnylaunchOperator(
            task_id="chatty",
            app=lambda mode=mode: secret_app(f"chatty-{mode}"),
            scheduler="local_cwd",
            deferrable=deferrable,
            poll_interval=0.3,
            secret_env_names=["CONN_STRING"],
        )
    with DAG(f"al_run_timeout_{mode}", schedule=None, start_date=START, catchup=False):
        AnylaunchOperator(
            task_id="overrun",
            app=python_app(f"overrun-{mode}", LONG),
            scheduler="local_cwd",
            deferrable=deferrable,
            poll_interval=0.3,
            run_timeout=2,
        )
