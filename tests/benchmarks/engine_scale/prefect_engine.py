"""The Prefect adapter of the engine-scale harness: the project's Prefect deployment
(tests/deployments/prefect_deployment.py: server on PostgreSQL, a process work pool, one
worker) serving the benchmark's flows (flows/engine_scale_prefect.py), a fresh worker per run
(its process tree, with the flow-run process it starts, is what is sampled), the flow run, and
each mapped task run's end time from the API (``app-{i}``: job ``i``)."""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.benchmarks.engine_scale.harness import TreeSampler, measure_run, parse_time
from tests.deployments.postgres import Postgres
from tests.deployments.prefect_deployment import BIN, POOL, PrefectDeployment
from tests.deployments.processes import Daemon, wait_until

FLOWS = Path(__file__).resolve().parent / "flows"
#: tool -> the flow's entrypoint in flows/engine_scale_prefect.py
FLOW_OF = {"anylaunch": "engine_scale_anylaunch", "incumbent": "engine_scale_incumbent"}
DEPLOYMENT = "bench"
#: flow run states that end it
TERMINAL = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")


def api(prefect: PrefectDeployment, method: str, path: str, body: Any = None) -> Any:
    """One request to the Prefect server's REST API."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(prefect.api_url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=60) as response:
        text = response.read()
    return json.loads(text) if text else None


def start(root: Path, postgres: Postgres) -> PrefectDeployment:
    """The deployment, with the benchmark's flows deployed to its work pool."""
    prefect = PrefectDeployment(root, postgres).start()
    for entrypoint in FLOW_OF.values():
        prefect.run(
            sys.executable,
            "-c",
            "from prefect import flow\n"
            f"flow.from_source(source={str(FLOWS)!r}, "
            f"entrypoint='engine_scale_prefect.py:{entrypoint}')"
            f".deploy(name={DEPLOYMENT!r}, work_pool_name={POOL!r})\n",
        )
    return prefect


def fresh_worker(prefect: PrefectDeployment) -> int:
    """Stops the deployment's workers and starts one anew (named ``bench``); waits until it
    heartbeats; returns its PID. One worker: every flow run, and all its tasks, run in its
    process tree."""
    for name in [n for n in prefect.daemons if n != "server"]:
        prefect.daemons.pop(name).stop()
    started = time.time()
    argv = [str(BIN / "prefect"), "worker", "start", "--pool", POOL, "--type", "process"]
    worker = Daemon(
        "worker", [*argv, "--name", "bench"], prefect.env(), prefect.root / "logs", prefect.root
    )
    prefect.daemons["worker"] = worker

    def beating() -> bool:
        workers = api(prefect, "POST", f"/work_pools/{POOL}/workers/filter", {})
        return any(
            w.get("name") == "bench"
            and w.get("last_heartbeat_time")
            and parse_time(w["last_heartbeat_time"]) > started
            for w in workers
        )

    wait_until(beating, 120, "the restarted Prefect worker's heartbeat", interval=0.5)
    return worker.pid


def task_runs(prefect: PrefectDeployment, flow_run_id: str) -> list[dict[str, Any]]:
    """The flow run's task runs named ``app-{i}``, as Airflow-shaped records (``map_index``,
    ``end_date``, ``state``: ``success`` for COMPLETED)."""
    found: list[dict[str, Any]] = []
    offset = 0
    while True:
        page = api(
            prefect,
            "POST",
            "/task_runs/filter",
            {"flow_runs": {"id": {"any_": [flow_run_id]}}, "limit": 200, "offset": offset},
        )
        for run in page:
            name = str(run.get("name", ""))
            if not name.startswith("app-") or not name[4:].isdigit():
                continue
            state = str(run.get("state_type") or "")
            found.append(
                {
                    "map_index": int(name[4:]),
                    "end_date": run.get("end_time"),
                    "state": "success" if state == "COMPLETED" else state.lower(),
                }
            )
        if len(page) < 200:
            return found
        offset += 200


def run_flow(
    prefect: PrefectDeployment,
    tool: str,
    parameters: dict[str, Any],
    timeout: float,
    load: Callable[[], Counter[str]] | None = None,
    audit: Path | None = None,
) -> dict[str, Any]:
    """Runs ``tool``'s flow on a fresh worker and waits for the flow run to end
    (:func:`~tests.benchmarks.engine_scale.harness.measure_run`)."""
    flow_name = FLOW_OF[tool].replace("_", "-")
    deployment = api(prefect, "GET", f"/deployments/name/{flow_name}/{DEPLOYMENT}")
    sampler = TreeSampler(fresh_worker(prefect))

    def trigger() -> str:
        run = api(
            prefect,
            "POST",
            f"/deployments/{deployment['id']}/create_flow_run",
            {"parameters": parameters},
        )
        return str(run["id"])

    def ended(run_id: str) -> str | None:
        state = api(prefect, "GET", f"/flow_runs/{run_id}").get("state_type")
        return str(state) if state in TERMINAL else None

    measured = measure_run(
        trigger, ended, sampler, timeout, f"flow run of {flow_name}", load, audit
    )
    measured["tis"] = settled_task_runs(prefect, measured["run_id"], int(parameters["n"]))
    return measured


#: How long after its flow run ends the server may take to record the task runs' last states.
SETTLE_S = 300.0


def settled_task_runs(prefect: PrefectDeployment, flow_run_id: str, n: int) -> list[dict[str, Any]]:
    """:func:`task_runs` once all ``n`` have a final state: the server records task-run states
    from the client's events, behind the flow run's own state when hundreds end at once (the
    end times are the client's, so waiting for them changes no measurement)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        tis = task_runs(prefect, flow_run_id)
        final = [ti for ti in tis if ti["state"] not in ("running", "pending", "scheduled")]
        if (len(final) == n and len(tis) == n) or time.monotonic() > deadline:
            return tis
        time.sleep(2.0)
