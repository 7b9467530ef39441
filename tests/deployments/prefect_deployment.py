"""Prefect 3 as teams that outgrew one machine run it: ``prefect server start`` (on
PostgreSQL), one process work pool served by two workers (``worker-a``, ``worker-b``: either
may pick up a flow run, each runs it in a process of its own), deployments of flows from
source, flow-run heartbeats and the zombie automation that marks a flow run CRASHED once its
heartbeats stop (its worker host lost); loopback only, free ports, stopped by PID."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.deployments.postgres import Postgres
from tests.deployments.processes import Daemon, free_port, wait_until

FLOWS = Path(__file__).resolve().parent / "flows"
BIN = Path(sys.executable).parent
POOL = "anylaunch-pool"
WORKERS = ("worker-a", "worker-b")
#: Seconds between a flow run's heartbeats (Prefect's minimum) and the silence after which the
#: zombie automation crashes it.
HEARTBEAT_S = 30
ZOMBIE_AFTER_S = 45
DEPLOYMENTS = {"ticker": "ticker_parent", "kube-ticker": "kube_ticker_parent"}
# Prefect's recipe for zombie flow runs (docs: "Detect zombie flows"): no heartbeat and no
# final state within ZOMBIE_AFTER_S of the last heartbeat crashes the flow run
ZOMBIE_AUTOMATION = f"""
from datetime import timedelta
from prefect.automations import Automation
from prefect.client.schemas.objects import StateType
from prefect.events.actions import ChangeFlowRunState
from prefect.events.schemas.automations import EventTrigger, Posture

Automation(
    name="crash-zombie-flow-runs",
    trigger=EventTrigger(
        after={{"prefect.flow-run.heartbeat"}},
        expect={{
            "prefect.flow-run.heartbeat",
            "prefect.flow-run.Completed",
            "prefect.flow-run.Failed",
            "prefect.flow-run.Cancelled",
            "prefect.flow-run.Crashed",
        }},
        match={{"prefect.resource.id": ["prefect.flow-run.*"]}},
        for_each={{"prefect.resource.id"}},
        posture=Posture.Proactive,
        threshold=1,
        within=timedelta(seconds={ZOMBIE_AFTER_S}),
    ),
    actions=[ChangeFlowRunState(state=StateType.CRASHED, message="no heartbeat: worker lost")],
).create()
"""


class PrefectDeployment:
    """``PrefectDeployment(root, postgres).start()``; ``.stop()`` ends every process."""

    def __init__(self, root: Path, postgres: Postgres) -> None:
        self.root = root
        self.state_dir = root / "anylaunch-state"
        self.port = free_port()
        self.api_url = f"http://127.0.0.1:{self.port}/api"
        self.postgres = postgres
        self.daemons: dict[str, Daemon] = {}
        self.db_url = ""

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env.update(
            {
                "PREFECT_HOME": str(self.root / "prefect-home"),
                "PREFECT_API_URL": self.api_url,
                "PREFECT_SERVER_API_HOST": "127.0.0.1",
                "PREFECT_SERVER_API_PORT": str(self.port),
                "PREFECT_API_DATABASE_CONNECTION_URL": self.db_url,
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "DO_NOT_TRACK": "1",
                "PREFECT_LOCAL_STORAGE_PATH": str(self.root / "storage"),
                "PREFECT_SERVER_MEMO_STORE_PATH": str(self.root / "memo.toml"),
                "PREFECT_WORKER_QUERY_SECONDS": "1",
                "PREFECT_RUNNER_POLL_FREQUENCY": "1",
                "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(HEARTBEAT_S),
                "ANYLAUNCH_LOCAL_STATE_DIR": str(self.state_dir),
                "PYTHONPATH": os.pathsep.join(
                    [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]
                ),
            }
        )
        # the provisioned cluster, for the flows' Kubernetes apps
        from tests.schedulers.kubernetes.kube_cluster import kubeconfig

        if (config := kubeconfig()) is not None:
            env.setdefault("KUBECONFIG", config)
        return env

    def run(self, *argv: str, timeout: float = 300) -> str:
        result = subprocess.run(
            list(argv),
            env=self.env(),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def start(self) -> PrefectDeployment:
        for path in (self.root / "prefect-home", self.state_dir, self.root / "logs"):
            path.mkdir(parents=True, exist_ok=True)
        url = self.postgres.create_database(f"prefect_{secrets.token_hex(4)}")
        self.db_url = url.replace("postgresql+psycopg2://", "postgresql+asyncpg://")
        self.daemons["server"] = Daemon(
            "server",
            [str(BIN / "prefect"), "server", "start"],
            self.env(),
            self.root / "logs",
            self.root,
        )
        wait_until(lambda: self._healthy(), 240, "the Prefect server")
        self.run(str(BIN / "prefect"), "work-pool", "create", POOL, "--type", "process")
        deploy = "from prefect import flow\n" + "".join(
            f"flow.from_source(source={str(FLOWS)!r}, entrypoint='anylaunch_flows.py:{entry}')"
            f".deploy(name={name!r}, work_pool_name={POOL!r})\n"
            for name, entry in DEPLOYMENTS.items()
        )
        self.run(sys.executable, "-c", deploy)
        self.run(sys.executable, "-c", ZOMBIE_AUTOMATION)
        for name in WORKERS:
            self.start_worker(name)
        return self

    def start_worker(self, name: str) -> Daemon:
        """Starts (or restarts, once killed) worker ``name`` of the pool."""
        if (old := self.daemons.get(name)) is not None:
            old.stop()  # a lost one: only its log is left to close
        argv = ["worker", "start", "--pool", POOL, "--type", "process", "--name", name]
        self.daemons[name] = Daemon(
            name, [str(BIN / "prefect"), *argv], self.env(), self.root / "logs", self.root
        )
        return self.daemons[name]

    def _healthy(self) -> bool:
        import urllib.request

        with urllib.request.urlopen(f"{self.api_url}/health", timeout=5) as response:
            return response.status == 200

    def stop(self) -> None:
        for daemon in reversed(list(self.daemons.values())):
            daemon.stop()

    # --- API ---------------------------------------------------------------------------

    def client_call(self, code: str) -> Any:
        """Runs ``code`` (with ``client``, a sync Prefect client) in a subprocess against this
        server; returns what it prints as JSON."""
        import json

        script = (
            "import json, uuid\n"
            "from prefect.client.orchestration import get_client\n"
            "with get_client(sync_client=True) as client:\n"
            + "".join(f"    {line}\n" for line in code.splitlines())
        )
        return json.loads(self.run(sys.executable, "-c", script).strip().splitlines()[-1])

    def run_deployment(self, deployment: str = "ticker-parent/ticker", **parameters: Any) -> str:
        import json

        code = (
            f"d = client.read_deployment_by_name({deployment!r})\n"
            f"run = client.create_flow_run_from_deployment(d.id, parameters={json.dumps(parameters)})\n"
            "print(json.dumps(str(run.id)))"
        )
        return str(self.client_call(code))

    def flow_run(self, run_id: str) -> dict[str, Any]:
        code = (
            f"r = client.read_flow_run(uuid.UUID({run_id!r}))\n"
            "print(json.dumps({'state': r.state.type.value if r.state else None, "
            "'pid': (r.state.state_details.__dict__ if r.state else {}) and None, "
            "'labels': r.labels}, default=str))"
        )
        return dict(self.client_call(code))

    def flow_run_processes(self) -> list[int]:
        """PIDs of every worker's flow-run processes."""
        from tests.deployments.processes import descendants

        return [pid for name in WORKERS for pid in descendants(self.daemons[name].pid)]

    def worker_running(self, run_id: str) -> str | None:
        """The name of the worker whose process tree runs flow run ``run_id`` (None: none
        does yet); a flow-run process carries its run id in its environment."""
        from tests.deployments.processes import descendants, environ

        for name in WORKERS:
            for pid in descendants(self.daemons[name].pid):
                if environ(pid).get("PREFECT__FLOW_RUN_ID") == run_id:
                    return name
        return None
