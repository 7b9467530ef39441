"""DAGs the deployment tests trigger: one task that runs a local_cwd app printing one line a
second for ``params.duration`` seconds (and taking ``params.stop_delay`` seconds to stop on
SIGTERM), waited for in the worker (``_sync``) or deferred to the
triggerer (``_deferred``). ``retries=1``: a killed try is retried, and must reattach. Also: the
ticker on Slurm, a sweep as one deferred task, the ticker placed on two targets, and a deferred
ticker on Kubernetes whose Job a TTL deletes as it ends."""

from datetime import datetime, timedelta

from airflow.sdk import DAG, Param

import anylaunch.specs as specs
from airflow_anylaunch.operators import AnylaunchOperator

TICKER = (
    "import os, signal, sys, time\n"
    "def stop(signum, frame):\n"
    "    print('stopping', flush=True)\n"
    "    time.sleep(float(os.environ.get('STOP_DELAY', '0')))\n"
    "    sys.exit(143)\n"
    "signal.signal(signal.SIGTERM, stop)\n"
    "for i in range(int(os.environ['DURATION'])):\n"
    "    print('tick', i, flush=True)\n"
    "    time.sleep(1)\n"
    "sys.exit(int(os.environ.get('EXIT_CODE', '0')))\n"
)

APP = specs.AppDef(
    name="ticker",
    roles=[specs.Role(name="ticker", image="/tmp", entrypoint="python3", args=["-c", TICKER])],
)

for mode in ("sync", "deferred"):
    with DAG(
        dag_id=f"anylaunch_deploy_{mode}",
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        params={
            "duration": Param(60, type="integer"),
            "exit_code": Param(0, type="integer"),
            "stop_delay": Param(0, type="integer"),  # seconds the app takes to stop
        },
    ):
        AnylaunchOperator(
            task_id="app",
            app=APP,
            scheduler="local_cwd",
            env={
                "DURATION": "{{ params.duration }}",
                "EXIT_CODE": "{{ params.exit_code }}",
                "STOP_DELAY": "{{ params.stop_delay }}",
            },
            cfg={"cancel_grace_s": 30},  # an app may take up to 30 s to stop
            deferrable=mode == "deferred",
            poll_interval=1.0,
            retries=1,
            retry_delay=timedelta(seconds=1),
            anylaunch_conn_id=None,
        )

# the same ticker on the Slurm cluster (a cluster backend: the app outlives any Airflow process)
with DAG(
    dag_id="anylaunch_deploy_slurm",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={"duration": Param(60, type="integer")},
):
    AnylaunchOperator(
        task_id="app",
        app=specs.AppDef(
            name="ticker",
            roles=[
                specs.Role(
                    name="ticker",
                    image="/tmp",
                    entrypoint="python3",
                    args=["-c", TICKER],
                    resource=specs.Resource(cpu=1, gpu=0, memMB=256),
                )
            ],
        ),
        scheduler="slurm",
        env={"DURATION": "{{ params.duration }}"},
        poll_interval=1.0,
        retries=1,
        retry_delay=timedelta(seconds=1),
        anylaunch_conn_id=None,
    )

# a sweep as ONE deferred task: 4 indices, 2 at once, index 2 (name c) fails; 3 of 4 is enough
SHARD = (
    'for i in 1 2 3; do echo "shard ${param.name} line $i"; sleep 0.5; done; '
    'test "${param.name}" != c'
)
with DAG(
    dag_id="anylaunch_deploy_sweep",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
):
    AnylaunchOperator(
        task_id="app",
        app=specs.sweep(
            specs.AppDef(
                "sweep", [specs.Role("shard", image="/tmp", entrypoint="sh", args=["-c", SHARD])]
            ),
            [{"name": name} for name in "abcd"],
            parallelism=2,
            min_success_ratio=0.75,
        ),
        scheduler="local_cwd",
        deferrable=True,
        poll_interval=1.0,
        anylaunch_conn_id=None,
    )

# the ticker placed on two targets: fulllocal (a plugin scheduler: local_cwd that is full, on the
# deployment's PYTHONPATH) is skipped, local_cwd runs it; a retry must reattach to it there
with DAG(
    dag_id="anylaunch_deploy_placed",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={"duration": Param(60, type="integer")},
):
    AnylaunchOperator(
        task_id="app",
        app=specs.AppDef(
            name="placed",
            roles=[
                specs.Role(name="ticker", image="/tmp", entrypoint="python3", args=["-c", TICKER])
            ],
        ),
        targets=["fulllocal", {"scheduler": "local_cwd", "cfg": {"cancel_grace_s": 30}}],
        max_infra_retries=1,
        env={"DURATION": "{{ params.duration }}"},
        poll_interval=1.0,
        retries=1,
        retry_delay=timedelta(seconds=1),
        anylaunch_conn_id=None,
    )

# a deferred ticker on Kubernetes whose Job the cluster deletes as soon as it ends
# (ttlSecondsAfterFinished=0), with an archive: its end must reach the task all the same
# (quiet for 40 s after its last line: the trigger reads a running app's logs every 30 s, and a
# test stops the triggerer once it did)
K8S_TICKER = (
    'for i in $(seq "$DURATION"); do echo "tick $i"; sleep 1; done; sleep 40; exit "$EXIT_CODE"'
)
with DAG(
    dag_id="anylaunch_deploy_k8s_ttl",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={
        "duration": Param(8, type="integer"),
        "exit_code": Param(0, type="integer"),
        "namespace": Param("default", type="string"),
        "archive_url": Param("", type="string"),
    },
):
    AnylaunchOperator(
        task_id="app",
        app=specs.AppDef(
            name="ttl",
            roles=[
                specs.Role(
                    name="ticker",
                    image="busybox:latest",
                    entrypoint="sh",
                    args=["-c", K8S_TICKER],
                    resource=specs.Resource(cpu=1, gpu=0, memMB=64),
                )
            ],
        ),
        scheduler="kubernetes",
        env={"DURATION": "{{ params.duration }}", "EXIT_CODE": "{{ params.exit_code }}"},
        cfg={
            "namespace": "{{ params.namespace }}",
            "ttl_seconds_after_finished": 0,
            "archive_url": "{{ params.archive_url }}",
        },
        deferrable=True,
        poll_interval=1.0,
        anylaunch_conn_id=None,
    )
