"""Benchmark: how long `import anylaunch.specs` takes in a fresh interpreter (target < 50 ms,
bytecode compiled). Run with `pytest tests/benchmarks --benchmark-enable`."""

import re
import subprocess
import sys

from pytest_benchmark.fixture import BenchmarkFixture


def import_time_ms(module: str) -> float:
    """Cumulative import time of ``module`` as CPython's -X importtime reports it."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        check=True,
        capture_output=True,
        text=True,
    ).stderr
    pattern = re.compile(rf"^import time:\s+\d+ \|\s+(\d+) \| {re.escape(module)}$", re.M)
    match = pattern.search(err)
    assert match, err[-2000:]
    return int(match.group(1)) / 1000.0


def test_import_anylaunch_specs(benchmark: BenchmarkFixture) -> None:
    result = benchmark.pedantic(import_time_ms, args=("anylaunch.specs",), rounds=10, iterations=1)
    benchmark.extra_info["import_ms"] = result
    benchmark.extra_info["target_ms"] = 50
    assert result > 0
