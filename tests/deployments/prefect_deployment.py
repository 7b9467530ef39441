"""Prefect 3 as operators run it: ``prefect server start`` (on PostgreSQL), a process work
pool, a deployment of a flow from source, and ``prefect worker start`` running flow runs in
processes of their own; loopback only, free ports, stopped by PID."""

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
                "ANYLAUNCH_LOCAL_STATE_DIR": str(self.state_dir),
                "PYTHONPATH": os.pathsep.join(
                    [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]
                ),
            }
        )
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
        deploy = (
            "from prefect import flow\n"
            f"flow.from_source(source={str(FLOWS)!r}, entrypoint='anylaunch_flows.py:ticker_parent')"
            f".deploy(name='ticker', work_pool_name={POOL!r})\n"
        )
        self.run(sys.executable, "-c", deploy)
        self.daemons["worker"] = Daemon(
            "worker",
            [str(BIN / "prefect"), "worker", "start", "--pool", POOL, "--type", "process"],
            self.env(),
            self.root / "logs",
            self.root,
        )
        return self

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

    def run_deployment(self, **parameters: Any) -> str:
        import json

        code = (
            "d = client.read_deployment_by_name('ticker-parent/ticker')\n"
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
        """PIDs of the worker's flow-run processes."""
        from tests.deployments.processes import descendants

        return descendants(self.daemons["worker"].pid)
