"""anylaunch vs TorchX 0.7.0 on local_cwd, measured in one run on the same machine.

TorchX is installed into a throwaway environment under ``.cache/`` (uv, from PyPI). Three
measurements, each the same work for both: the CLI echo end to end, launching 100 apps (wall
time to launched and to all done, and the CPU time all processes spent on it), and the
latency from a line being written to ``log_lines(should_tail=True)`` yielding it. The numbers are
printed and saved to ``.benchmarks/vs_torchx.json``; the target (not slower than TorchX) is read
from there, not asserted on wall time.
"""

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("lifecycle_probe.py")
RESULTS = REPO / ".benchmarks" / "vs_torchx.json"


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, float]]:
    collected: dict[str, dict[str, float]] = {}
    yield collected
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(collected, indent=2))
    print("\nanylaunch vs torchx 0.7.0 (lower is better):")
    for metric, pair in collected.items():
        print(f"  {metric:32s} anylaunch={pair['anylaunch']:.4f}  torchx={pair['torchx']:.4f}")


def isolated_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["ANYLAUNCH_LOCAL_STATE_DIR"] = str(tmp_path / "state")
    env["HOME"] = str(tmp_path)  # no user config files on either side
    return env


def median_seconds(
    cmd: list[str], cwd: Path, env: dict[str, str], expect: str, rounds: int = 5
) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
        times.append(time.perf_counter() - start)
        assert out.returncode == 0, out.stderr[-2000:]
        assert expect in out.stdout + out.stderr
    return statistics.median(times)


def probe(python: Path, package: str, scenario: str, tmp_path: Path) -> dict[str, float]:
    workdir = tmp_path / f"{package}-{scenario}"
    workdir.mkdir()
    out = subprocess.run(
        [str(python), str(PROBE), package, scenario, str(workdir)],
        cwd=workdir,
        env=isolated_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_cli_echo_end_to_end(
    torchx_python: Path, results: dict[str, dict[str, float]], tmp_path: Path
) -> None:
    env = isolated_env(tmp_path)
    ours = median_seconds(
        [
            str(Path(sys.executable).parent / "anylaunch"),
            "run",
            "--wait",
            "--log",
            "-s",
            "local_cwd",
            "utils.echo",
            "--msg",
            "hi",
        ],
        tmp_path,
        env,
        expect="echo/0 hi",
    )
    theirs = median_seconds(
        # with a log_dir torchx prints the app's output like `anylaunch run --log` does
        [
            str(torchx_python.parent / "torchx"),
            "run",
            "-s",
            "local_cwd",
            "-cfg",
            f"log_dir={tmp_path / 'torchx-logs'}",
            "utils.echo",
            "--msg",
            "hi",
        ],
        tmp_path,
        env,
        expect="Job finished: SUCCEEDED",
    )
    results["cli_echo_end_to_end_s"] = {"anylaunch": ours, "torchx": theirs}


def test_launch_100_apps(
    torchx_python: Path, results: dict[str, dict[str, float]], tmp_path: Path
) -> None:
    ours = probe(Path(sys.executable), "anylaunch", "launch_100", tmp_path)
    theirs = probe(torchx_python, "torchx", "launch_100", tmp_path)
    assert ours["all_done_s"] >= ours["launch_s"] > 0
    results["launch_100_apps_s"] = {"anylaunch": ours["launch_s"], "torchx": theirs["launch_s"]}
    results["launch_100_until_all_done_s"] = {
        "anylaunch": ours["all_done_s"],
        "torchx": theirs["all_done_s"],
    }
    # all the CPU it took (launcher, supervisors, the apps): what a busy machine pays
    results["launch_100_until_all_done_cpu_s"] = {
        "anylaunch": ours["cpu_s"],
        "torchx": theirs["cpu_s"],
    }


def test_tail_latency(
    torchx_python: Path, results: dict[str, dict[str, float]], tmp_path: Path
) -> None:
    ours = probe(Path(sys.executable), "anylaunch", "tail_latency", tmp_path)
    theirs = probe(torchx_python, "torchx", "tail_latency", tmp_path)
    assert ours["lines"] == 100, "every line written must be yielded by the tail"
    results["tail_latency_median_ms"] = {
        "anylaunch": ours["median_ms"],
        "torchx": theirs["median_ms"],
    }
    results["tail_latency_p95_ms"] = {"anylaunch": ours["p95_ms"], "torchx": theirs["p95_ms"]}
