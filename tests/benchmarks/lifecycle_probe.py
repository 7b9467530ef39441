"""Measures one lifecycle scenario through a TorchX-compatible Python API and prints JSON.

Run by the benchmarks with two interpreters — ours and a throwaway TorchX 0.7.0 env — as
``python lifecycle_probe.py PACKAGE SCENARIO WORKDIR``, where PACKAGE is ``anylaunch`` or ``torchx``.
It only uses the API the two share, so the same code measures both (the CPU count also
reads the CPU of anylaunch's fork-server, which runs the supervisors).
"""

import importlib
import json
import os
import resource
import statistics
import sys
import time

TICKER = (
    "import sys, time\n"
    "for _ in range(int(sys.argv[1])):\n"
    "    print(repr(time.time()), flush=True)\n"
    "    time.sleep(0.02)\n"
)


SERVER_MODULE = b"anylaunch.schedulers.local.forkserver_server"


def _argv(pid: str) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def cpu_seconds(state_root: str) -> float:
    """CPU time of this process, its reaped children, and anylaunch's fork-server of
    ``state_root`` with the supervisors it reaped (TorchX starts the apps itself)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    ticks = os.sysconf("SC_CLK_TCK")
    root = os.fsencode(state_root)
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        argv = _argv(entry)
        if SERVER_MODULE not in argv or root not in argv:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if SERVER_MODULE in _argv(fields[1].decode()):
            continue  # a spare or supervisor it forked: counted in the server once reaped
        total += sum(int(x) for x in fields[11:15]) / ticks  # utime stime cutime cstime
    return total


def main() -> None:
    package, scenario, workdir = sys.argv[1:4]
    specs = importlib.import_module(f"{package}.specs")
    get_runner = importlib.import_module(f"{package}.runner").get_runner
    cfg = {"log_dir": workdir}

    def app(name: str, entrypoint: str, args: list) -> object:
        role = specs.Role(name="main", image=workdir, entrypoint=entrypoint, args=args)
        return specs.AppDef(name=name, roles=[role])

    result: dict = {"package": package, "scenario": scenario}
    with get_runner() as runner:
        if scenario == "launch_100":
            # (anylaunch's state root: the probe runs with ANYLAUNCH_LOCAL_STATE_DIR set)
            state_root = os.environ.get("ANYLAUNCH_LOCAL_STATE_DIR", "")
            cpu_start = cpu_seconds(state_root)
            start = time.perf_counter()
            handles = [
                runner.run(app(f"bench{i}", "true", []), "local_cwd", cfg) for i in range(100)
            ]
            result["launch_s"] = time.perf_counter() - start
            for handle in handles:
                runner.wait(handle, wait_interval=0.05)
            result["all_done_s"] = time.perf_counter() - start
            # the last supervisors exit, and the fork-server reaps them (at least once a
            # second): only then is their CPU in its count
            time.sleep(1.5)
            # the CPU every process spent on it: on a shared machine, steadier than wall time
            result["cpu_s"] = cpu_seconds(state_root) - cpu_start
        elif scenario == "tail_latency":
            handle = runner.run(
                app("ticker", sys.executable, ["-u", "-c", TICKER, "100"]), "local_cwd", cfg
            )
            latencies = []
            for line in runner.log_lines(handle, "main", k=0, should_tail=True):
                received = time.time()
                try:
                    latencies.append((received - float(line.strip())) * 1000)
                except ValueError:
                    continue
            latencies.sort()
            result["lines"] = len(latencies)
            result["median_ms"] = statistics.median(latencies)
            result["p95_ms"] = latencies[int(len(latencies) * 0.95) - 1]
        else:
            raise SystemExit(f"unknown scenario {scenario!r}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
