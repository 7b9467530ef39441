"""Benchmark: what ``import prefect_anylaunch`` adds on top of ``import prefect`` in a fresh
interpreter (and that it pulls in no other orchestrator and no backend SDK).

Run with `pytest tests/benchmarks/test_prefect_import_time.py --benchmark-enable -s`.
"""

import re
import subprocess
import sys

from pytest_benchmark.fixture import BenchmarkFixture

HEAVY = ("airflow", "dagster", "kubernetes", "boto3", "botocore", "docker")
CODE = (
    "import sys; import prefect; import prefect_anylaunch;"
    f" print([m for m in {HEAVY!r} if m in sys.modules])"
)


def _cumulative_ms(stderr: str, module: str) -> float:
    match = re.search(rf"^import time:\s+\d+ \|\s+(\d+) \| {re.escape(module)}$", stderr, re.M)
    assert match, stderr[-2000:]
    return int(match.group(1)) / 1000.0


def import_times_ms() -> dict:
    """Cumulative import times of prefect, and of prefect_anylaunch once prefect is loaded."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", CODE],
        check=True,
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == "[]", out.stdout  # no other orchestrator or SDK came along
    return {
        "prefect_ms": _cumulative_ms(out.stderr, "prefect"),
        "prefect_anylaunch_ms": _cumulative_ms(out.stderr, "prefect_anylaunch"),
    }


def test_import_prefect_anylaunch_on_top_of_prefect(benchmark: BenchmarkFixture) -> None:
    runs: list = []

    def measure() -> float:
        times = import_times_ms()
        runs.append(times)
        return times["prefect_anylaunch_ms"]

    benchmark.pedantic(measure, rounds=5, iterations=1)
    best = min(runs, key=lambda t: t["prefect_anylaunch_ms"])
    benchmark.extra_info.update(best)
    benchmark.extra_info["heavy_modules_checked"] = list(HEAVY)
    print(
        f"\nimport prefect: {best['prefect_ms']:.1f} ms; "
        f"prefect_anylaunch on top: {best['prefect_anylaunch_ms']:.1f} ms (best of {len(runs)})"
    )
    assert best["prefect_anylaunch_ms"] > 0
