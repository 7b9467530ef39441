"""Benchmark: one event loop running 500 AnylaunchAppTriggers against 500 live local_cwd apps
(what one triggerer process would do), measured in a fresh interpreter.

The apps wait for a "go" file, so every trigger polls a RUNNING app for a steady-state window;
then the file appears, the apps end and every trigger fires. Recorded (no timed asserts):
process CPU and RSS growth over the window, the event loop's worst lag (backend calls must
run off the loop), how many batched ``describe_many`` calls served the status polls, and how
long after the apps ended all events were in. Run this file as a script to print the numbers:
``python tests/benchmarks/test_airflow_triggers.py 500``.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict

from pytest_benchmark.fixture import BenchmarkFixture

N_TRIGGERS = 500
WINDOW_S = 10.0
POLL_INTERVAL_S = 2.0


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def measure(
    n: int, window: float = WINDOW_S, poll_interval: float = POLL_INTERVAL_S
) -> Dict[str, Any]:
    """Launches ``n`` apps, runs ``n`` triggers in one loop, returns the measurements."""
    import asyncio
    import resource
    import time

    import anylaunch.specs as specs
    from airflow_anylaunch.triggers import AnylaunchAppTrigger
    from anylaunch.runner import get_runner
    from anylaunch.schedulers.local_scheduler import LocalScheduler

    go = Path(tempfile.mkdtemp()) / "go"
    app = specs.AppDef(
        name="bench",
        roles=[
            specs.Role(
                name="w",
                image=".",
                entrypoint="sh",
                args=["-c", f"while [ ! -e {go} ]; do sleep 1; done; echo finished"],
            )
        ],
    )
    started = time.perf_counter()
    with get_runner() as runner:
        handles = [runner.run(app, "local_cwd") for _ in range(n)]
    launch_s = time.perf_counter() - started

    # count the batched status calls (instrumentation for the numbers, not a test double)
    calls = {"batches": 0, "apps": 0}
    original = LocalScheduler.describe_many

    def counted(self: LocalScheduler, app_ids: Any) -> Any:
        calls["batches"] += 1
        calls["apps"] += len(app_ids)
        return original(self, app_ids)

    LocalScheduler.describe_many = counted  # type: ignore[method-assign]

    def cpu_s() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    async def main() -> Dict[str, Any]:
        loop = asyncio.get_running_loop()
        # worst event-loop lag per phase: start (first polls), steady, firing (after "go":
        # 500 supervisors and apps exit at once on this machine's cores, and the triggers fire)
        lag = {"start": 0.0, "steady": 0.0, "firing": 0.0}
        phase = {"now": "start"}
        peak = {"rss": _rss_mb()}
        stop = asyncio.Event()

        async def heartbeat() -> None:
            while not stop.is_set():
                before = loop.time()
                await asyncio.sleep(0.05)
                now = phase["now"]
                lag[now] = max(lag[now], loop.time() - before - 0.05)
                peak["rss"] = max(peak["rss"], _rss_mb())

        beat = asyncio.create_task(heartbeat())
        rss0, cpu0, t0 = _rss_mb(), cpu_s(), time.perf_counter()
        triggers = [AnylaunchAppTrigger(h, poll_interval=poll_interval) for h in handles]
        waits = [asyncio.create_task(t.run().__anext__()) for t in triggers]
        await asyncio.sleep(2)  # every trigger has polled: the rest of the window is steady
        cpu_warm, t_warm = cpu_s(), time.perf_counter()
        phase["now"] = "steady"
        await asyncio.sleep(window - 2)
        cpu_window = cpu_s() - cpu0
        cpu_steady = (cpu_s() - cpu_warm) / (time.perf_counter() - t_warm)
        batches_window, apps_window = calls["batches"], calls["apps"]
        rss_window = peak["rss"]
        go.touch()
        phase["now"] = "firing"
        t_go, cpu_go = time.perf_counter(), cpu_s()
        events = await asyncio.wait_for(asyncio.gather(*waits), timeout=120)
        fire_s = time.perf_counter() - t_go
        cpu_firing = cpu_s() - cpu_go
        stop.set()
        await beat
        return {
            "n_triggers": n,
            "launch_s": round(launch_s, 2),
            "window_s": window,
            "poll_interval_s": poll_interval,
            "cpu_s_window": round(cpu_window, 3),
            "cpu_pct_of_one_core": round(100 * cpu_window / window, 1),
            "cpu_pct_steady": round(100 * cpu_steady, 1),
            "rss_before_mb": round(rss0, 1),
            "rss_peak_window_mb": round(rss_window, 1),
            "rss_per_trigger_kb": round((rss_window - rss0) * 1024 / n, 1),
            "max_loop_lag_ms_start": round(lag["start"] * 1000, 1),
            "max_loop_lag_ms_steady": round(lag["steady"] * 1000, 1),
            "max_loop_lag_ms_firing": round(lag["firing"] * 1000, 1),
            "status_batches_window": batches_window,
            "apps_per_batch": round(apps_window / max(batches_window, 1), 1),
            "all_fired_after_go_s": round(fire_s, 2),
            "cpu_s_firing": round(cpu_firing, 3),
            "total_s": round(time.perf_counter() - t0, 2),
            "succeeded": sum(e.payload["status"] == "success" for e in events),
        }

    try:
        return asyncio.run(main())
    finally:
        with get_runner() as runner:
            for handle in handles:
                runner.cancel(handle)


def test_one_event_loop_runs_500_triggers_on_live_apps(
    benchmark: BenchmarkFixture, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "ANYLAUNCH_LOCAL_STATE_DIR": str(tmp_path / "state"),
    }
    result: Dict[str, Any] = {}

    def run() -> None:
        out = subprocess.run(
            [sys.executable, __file__, str(N_TRIGGERS)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        result.update(json.loads(out.stdout.strip().splitlines()[-1]))

    benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(result)
    print("\n500 triggers in one event loop:", json.dumps(result, indent=2))
    assert result["succeeded"] == N_TRIGGERS  # every trigger fired once, with SUCCEEDED


if __name__ == "__main__":
    import logging

    logging.disable(logging.INFO)  # 500 triggers' "waiting for" lines are not the point
    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else N_TRIGGERS)))
