"""Benchmark: what importing ``airflow_anylaunch.operators`` adds on top of ``airflow.sdk``
(target < 30 ms), in a fresh interpreter each round. The baseline is what every operator
module pays anyway: ``import airflow.sdk`` and ``from airflow.sdk import BaseOperator``.
Also checks that no backend SDK or other orchestrator gets imported along the way."""

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_benchmark.fixture import BenchmarkFixture

HEAVY = ("kubernetes", "boto3", "botocore", "docker", "prefect", "dagster")

PROBE = """
import json, sys, time
import airflow.sdk
from airflow.sdk import BaseOperator
before = set(sys.modules)
start = time.perf_counter()
import {module}
added_ms = (time.perf_counter() - start) * 1000
loaded = {{name.split(".")[0] for name in sys.modules}}
print(json.dumps({{
    "added_ms": added_ms,
    "new_modules": sorted(set(sys.modules) - before),
    "heavy": sorted(loaded & set({heavy!r})),
}}))
"""


def probe(module: str, airflow_home: str) -> dict:
    env = {
        **os.environ,
        "AIRFLOW_HOME": airflow_home,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module, heavy=HEAVY)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_operators_import_adds_little_to_airflow_sdk(
    benchmark: BenchmarkFixture, tmp_path: Path
) -> None:
    home = tempfile.mkdtemp(dir=tmp_path)
    runs: list[dict] = []

    def once() -> float:
        result = probe("airflow_anylaunch.operators", home)
        runs.append(result)
        return float(result["added_ms"])

    benchmark.pedantic(once, rounds=5, iterations=1)
    added = [r["added_ms"] for r in runs]
    new_modules = runs[-1]["new_modules"]
    others = {m: probe(f"airflow_anylaunch.{m}", home)["added_ms"] for m in ("sensors", "hooks")}
    benchmark.extra_info.update(
        {
            "added_ms_median": statistics.median(added),
            "added_ms_min": min(added),
            "target_ms": 30,
            "modules_added": len(new_modules),
            "sensors_added_ms": others["sensors"],
            "hooks_added_ms": others["hooks"],
        }
    )
    print(
        f"\nimport airflow_anylaunch.operators on top of airflow.sdk: median "
        f"{statistics.median(added):.1f} ms (min {min(added):.1f}, target < 30), "
        f"{len(new_modules)} new modules; sensors {others['sensors']:.1f} ms, hooks "
        f"{others['hooks']:.1f} ms"
    )
    for run in runs:
        assert run["heavy"] == [], run["heavy"]
    # anylaunch's runner and the trigger are imported when a task runs, not at import
    assert "anylaunch.runner" not in new_modules
    assert "airflow_anylaunch.triggers" not in new_modules
