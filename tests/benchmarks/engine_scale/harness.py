"""What the engine-scale benchmark measures, and how.

- triggerer CPU seconds and peak RSS: sampled from /proc over the triggerer's process tree
  (``TreeSampler``); the triggerer is restarted before every run, so each run starts from a
  fresh process.
- API server requests by verb and resource: ``apiserver_request_total`` from the API server's
  ``/metrics``, before/after delta (every client: the waiters, and the controllers and kubelet
  that run the same pods). Slurm: controller RPCs by message type from ``sdiag``, delta.
- delay from a job's end to its task's success: the job's end is the pod container's
  ``State.FinishedAt`` from the Docker engine (nanoseconds; the pod status's ``finishedAt`` has
  whole seconds only), or the time the job script noted when it ended (local_cwd, Slurm); the
  task's success is the task instance's ``end_date``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.deployments.airflow_deployment import AirflowDeployment
from tests.deployments.processes import descendants, wait_until

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20
DOCKER_HOST = os.environ.get("DOCKER_HOST", "unix:///run/anylaunch-backends/docker/docker.sock")


# --- triggerer CPU and memory ------------------------------------------------------------------


def _cpu_and_rss(pid: int) -> tuple[float, float]:
    """CPU seconds (its own and its reaped children's) and RSS (MiB) of one process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0, 0.0
    # fields[0] is the state (field 3); utime, stime, cutime, cstime are fields 14-17
    ticks = sum(int(f) for f in fields[11:15])
    return ticks / CLK_TCK, pages * PAGE_MB


def tree_usage(pid: int) -> tuple[float, float]:
    """CPU seconds and RSS (MiB) of ``pid`` and every live descendant. A live process's
    ``cutime`` holds only its reaped children, so nothing is counted twice."""
    cpu = rss = 0.0
    for p in (pid, *descendants(pid)):
        c, r = _cpu_and_rss(p)
        cpu += c
        rss += r
    return cpu, rss


class TreeSampler:
    """Samples a process tree's CPU and RSS every ``interval`` seconds in a thread."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid = pid
        self.interval = interval
        self.start_cpu, _ = tree_usage(pid)
        self.max_cpu = self.start_cpu
        self.peak_rss = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            cpu, rss = tree_usage(self.pid)
            self.max_cpu = max(self.max_cpu, cpu)
            self.peak_rss = max(self.peak_rss, rss)
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def cpu_s(self) -> float:
        return self.max_cpu - self.start_cpu


def fresh_triggerer(airflow: AirflowDeployment) -> int:
    """Restarts the triggerer and waits until it heartbeats; returns its PID."""
    airflow.daemons["triggerer"].stop()
    started = time.time()
    airflow.restart("triggerer")

    def beating() -> bool:
        health = airflow.get("/api/v2/monitor/health")["triggerer"]
        beat = health.get("latest_triggerer_heartbeat")
        return bool(health.get("status") == "healthy" and beat and _parse_time(beat) > started)

    wait_until(beating, 120, "the restarted triggerer's heartbeat", interval=0.5)
    return airflow.daemons["triggerer"].pid


# --- API server and Slurm controller load ------------------------------------------------------

_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def apiserver_requests(metrics: str) -> Counter[str]:
    """``apiserver_request_total`` summed by ``"VERB resource[/subresource]"`` (resource
    requests only; the scrape itself is a non-resource request and is left out).

    >>> apiserver_requests('apiserver_request_total{code="200",resource="pods",verb="GET"} 3\\n'
    ...     'apiserver_request_total{code="404",resource="pods",verb="GET"} 1\\n'
    ...     'apiserver_request_total{code="200",resource="",verb="GET"} 9')
    Counter({'GET pods': 4})
    """
    counts: Counter[str] = Counter()
    for line in metrics.splitlines():
        match = _SAMPLE.match(line)
        if not match:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        resource = labels.get("resource", "")
        if not resource:
            continue
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        counts[f"{labels.get('verb', '?')} {resource}"] += int(float(match["value"]))
    return counts


def scrape_apiserver(client: Any) -> Counter[str]:
    return apiserver_requests(client.text("/metrics", {}))


def sdiag_rpcs() -> Counter[str]:
    """slurmctld's RPC counts by message type (``sdiag``; its own REQUEST_STATS_INFO left out)."""
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    section = out.split("Remote Procedure Call statistics by message type", 1)[-1]
    section = section.split("Remote Procedure Call statistics by user", 1)[0]
    counts = Counter(
        {
            m[1]: int(m[2])
            for m in re.finditer(r"^\s+(\w+)\s+\(\s*\d+\)\s+count:(\d+)", section, re.M)
        }
    )
    counts.pop("REQUEST_STATS_INFO", None)
    return counts


def delta(after: Counter[str], before: Counter[str]) -> dict[str, int]:
    """Positive differences, biggest first."""
    diff = {k: after[k] - before.get(k, 0) for k in after}
    return dict(sorted(((k, v) for k, v in diff.items() if v > 0), key=lambda kv: -kv[1]))


# --- job ends and task ends ----------------------------------------------------------------------


def _parse_time(text: str) -> float:
    """An RFC 3339 time (any fraction digits, ``Z`` or an offset) as a POSIX timestamp.

    >>> end = _parse_time("2026-11-25T17:00:00.123456789Z")
    >>> round(end - _parse_time("2026-11-25T18:00:00+01:00"), 6)
    0.123456
    """
    text = text.replace("Z", "+00:00")
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    return datetime.fromisoformat(text).timestamp()


def pod_container_ends(namespace: str) -> dict[int, float]:
    """``BENCH_INDEX`` → when the container exited, for the pods of ``namespace``."""
    docker = ["docker", "-H", DOCKER_HOST]
    ids = subprocess.run(
        [
            *docker,
            "ps",
            "-aq",
            "--filter",
            f"label=io.kubernetes.pod.namespace={namespace}",
            "--filter",
            "label=io.kubernetes.docker.type=container",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not ids:
        return {}
    inspected = json.loads(
        subprocess.run(
            [*docker, "inspect", *ids], capture_output=True, text=True, check=True
        ).stdout
    )
    ends: dict[int, float] = {}
    for container in inspected:
        env = dict(e.split("=", 1) for e in container["Config"]["Env"] if "=" in e)
        state = container["State"]
        if "BENCH_INDEX" in env and not state.get("Running"):
            ends[int(env["BENCH_INDEX"])] = _parse_time(state["FinishedAt"])
    return ends


def noted_ends(out: Path) -> dict[int, float]:
    """``BENCH_INDEX`` → the time the job script noted as it ended (local_cwd, Slurm)."""
    return {int(p.name): float(p.read_text()) for p in out.iterdir() if p.read_text().strip()}


def task_instances(airflow: AirflowDeployment, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    """Every mapped instance of task ``app`` in the run."""
    found: list[dict[str, Any]] = []
    offset = 0
    while True:
        page = airflow.get(
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances?limit=100&offset={offset}"
        )["task_instances"]
        found += [ti for ti in page if ti["task_id"] == "app"]
        if len(page) < 100:
            return found
        offset += 100


def delays(tis: list[dict[str, Any]], ends: Mapping[int, float]) -> list[float]:
    """Seconds from each job's end to its task instance's end."""
    return [
        _parse_time(ti["end_date"]) - ends[ti["map_index"]]
        for ti in tis
        if ti["map_index"] in ends and ti.get("end_date")
    ]


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank).

    >>> p95([float(i) for i in range(1, 101)])
    95.0
    """
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]


# --- one run ---------------------------------------------------------------------------------------

TERMINAL = ("success", "failed")


def run_dag(
    airflow: AirflowDeployment,
    dag_id: str,
    conf: Mapping[str, Any],
    timeout: float,
    load: Any = None,
) -> dict[str, Any]:
    """Triggers ``dag_id`` on a fresh triggerer and waits for the run to end. ``load`` is a
    callable returning a Counter of cluster requests (scraped before and after). Returns the
    measurements (without delays) and the task instances."""
    pid = fresh_triggerer(airflow)
    before = load() if load else Counter()
    started = time.monotonic()
    with TreeSampler(pid) as sampler:
        run_id = airflow.trigger(dag_id, conf)
        state = wait_until(
            lambda: (s := airflow.dag_run_state(dag_id, run_id)) in TERMINAL and s,
            timeout,
            f"run {run_id} of {dag_id}",
            interval=1.0,
        )
    wall = time.monotonic() - started
    requests = delta(load(), before) if load else {}
    tis = task_instances(airflow, dag_id, run_id)
    return {
        "state": state,
        "wall_s": round(wall, 1),
        "triggerer_cpu_s": round(sampler.cpu_s, 2),
        "triggerer_peak_rss_mb": round(sampler.peak_rss, 1),
        "requests": requests,
        "tis": tis,
    }


def summarize(measured: dict[str, Any], ends: Mapping[int, float], load_key: str) -> dict[str, Any]:
    """The JSON entry of one run."""
    tis = measured["tis"]
    waits = delays(tis, ends)
    states = Counter(ti["state"] for ti in tis)
    entry: dict[str, Any] = {
        load_key: sum(measured["requests"].values()) if measured["requests"] else None,
        "triggerer_cpu_s": measured["triggerer_cpu_s"],
        "triggerer_peak_rss_mb": measured["triggerer_peak_rss_mb"],
        "delay_median_s": round(statistics.median(waits), 3) if waits else None,
        "delay_p95_s": round(p95(waits), 3) if waits else None,
        "tasks": len(tis),
        "task_states": dict(states),
        "delays_measured": len(waits),
        "wall_s": measured["wall_s"],
    }
    if measured["requests"]:
        entry[f"{load_key}_by_kind"] = measured["requests"]
    return entry


@contextlib.contextmanager
def scratch_dir(path: Path) -> Iterator[Path]:
    """An empty directory every user can write to (Slurm jobs may run as another user)."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    path.chmod(0o777)
    yield path
