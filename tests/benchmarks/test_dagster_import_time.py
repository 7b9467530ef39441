"""Benchmark: what `import dagster_anylaunch` adds on top of an already imported `dagster`,
in a fresh interpreter (-X importtime, bytecode compiled). Run with
`pytest tests/benchmarks --benchmark-enable`."""

import re
import subprocess
import sys
from typing import Dict, List

from pytest_benchmark.fixture import BenchmarkFixture

_LINE = re.compile(r"^import time:\s+\d+ \|\s+(\d+) \| (\S+)$", re.M)


def import_times_ms() -> Dict[str, float]:
    """Cumulative import times of `dagster` and then `dagster_anylaunch` (whose number then
    counts only what dagster had not imported yet)."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import dagster; import dagster_anylaunch"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stderr
    top = {name: int(us) / 1000.0 for us, name in _LINE.findall(err)}
    assert "dagster" in top and "dagster_anylaunch" in top, err[-2000:]
    return {"dagster_ms": top["dagster"], "dagster_anylaunch_ms": top["dagster_anylaunch"]}


def test_import_dagster_anylaunch_on_top_of_dagster(benchmark: BenchmarkFixture) -> None:
    samples: List[Dict[str, float]] = []

    def measure() -> float:
        times = import_times_ms()
        samples.append(times)
        return times["dagster_anylaunch_ms"]

    benchmark.pedantic(measure, rounds=5, iterations=1)
    added = sorted(s["dagster_anylaunch_ms"] for s in samples)
    base = sorted(s["dagster_ms"] for s in samples)
    benchmark.extra_info["dagster_anylaunch_ms_median"] = added[len(added) // 2]
    benchmark.extra_info["dagster_ms_median"] = base[len(base) // 2]
    benchmark.extra_info["dagster_anylaunch_ms_all_rounds"] = [
        s["dagster_anylaunch_ms"] for s in samples
    ]
    print(f"\nimport dagster_anylaunch on top of dagster: {benchmark.extra_info}")
    assert all(ms > 0 for ms in added)
