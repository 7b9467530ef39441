"""The engine-scale benchmark runs only from ``bash scripts/bench.sh engine-scale [N ...]``,
which sets ``ANYLAUNCH_ENGINE_SCALE=1``. Without it pytest collects only the offline parts
(the audit-log reader in ``harness.py`` and its tests), so the unit suite checks them but
neither runs the benchmark nor imports its Airflow DAGs or the plotting code."""

import os

# DAG and flow files: the engines load them, pytest must not
collect_ignore = ["dags", "flows"]
if os.environ.get("ANYLAUNCH_ENGINE_SCALE") != "1":
    collect_ignore_glob = [
        "test_engine_scale.py",
        "naive_slurm.py",
        "report.py",
        "test_engine_scale_prefect.py",
        "test_engine_scale_dagster.py",
        "prefect_engine.py",
        "dagster_engine.py",
        "airflow_engine.py",
        "kube.py",
    ]
