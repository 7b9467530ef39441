"""Dagster as operators run it without the UI: a gRPC code server, ``dagster-daemon`` (run
queue, run monitoring, run retries) and the default run launcher starting a run worker process
per run; runs are submitted with ``dagster job launch``, as the UI's launchpad does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.deployments.processes import Daemon, descendants, free_port, wait_until

FLOWS = Path(__file__).resolve().parent / "flows"
BIN = Path(sys.executable).parent

DAGSTER_YAML = """
run_coordinator:
  module: dagster._core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: 1
run_launcher:
  module: dagster._core.launcher
  class: DefaultRunLauncher
run_monitoring:
  enabled: true
  poll_interval_seconds: 2
run_retries:
  enabled: true
telemetry:
  enabled: false
"""


class DagsterDeployment:
    """``DagsterDeployment(root).start()``; ``.stop()`` ends every process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "dagster-home"
        self.state_dir = root / "anylaunch-state"
        self.port = free_port()
        self.daemons: dict[str, Daemon] = {}

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER")}
        env.update(
            {
                "DAGSTER_HOME": str(self.home),
                "ANYLAUNCH_LOCAL_STATE_DIR": str(self.state_dir),
                "TICKER_DURATION": "25",
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

    def start(self) -> DagsterDeployment:
        for path in (self.home, self.state_dir, self.root / "logs"):
            path.mkdir(parents=True, exist_ok=True)
        (self.home / "dagster.yaml").write_text(DAGSTER_YAML)
        workspace = self.root / "workspace.yaml"
        workspace.write_text(
            f"load_from:\n  - grpc_server:\n      host: 127.0.0.1\n      port: {self.port}\n"
            "      location_name: anylaunch\n"
        )
        defs = FLOWS / "anylaunch_dagster_defs.py"
        logs = self.root / "logs"
        serve = ["code-server", "start", "-f", str(defs), "-h", "127.0.0.1", "-p", str(self.port)]
        self.daemons["code-server"] = Daemon(
            "code-server",
            [str(BIN / "dagster"), *serve],
            self.env(),
            logs,
            self.root,
        )
        wait_until(lambda: self._code_server_up(), 180, "the code server")
        self.daemons["daemon"] = Daemon(
            "daemon",
            [str(BIN / "dagster-daemon"), "run", "-w", str(workspace)],
            self.env(),
            logs,
            self.root,
        )
        self.workspace = workspace
        return self

    def _code_server_up(self) -> bool:
        import socket

        with socket.socket() as sock:
            sock.settimeout(2)
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self) -> None:
        for daemon in reversed(list(self.daemons.values())):
            daemon.stop()

    def launch(self) -> str:
        """Submits ``ticker_job`` (queued; the daemon launches it); returns the run id."""
        out = self.run(
            str(BIN / "dagster"), "job", "launch", "-w", str(self.workspace), "-j", "ticker_job"
        )
        return out.strip().split()[-1] if out.strip() else self.latest_run_id()

    def instance_call(self, code: str) -> Any:
        script = (
            "import json\nimport dagster as dg\ninstance = dg.DagsterInstance.get()\n" + code + "\n"
        )
        return json.loads(self.run(sys.executable, "-c", script).strip().splitlines()[-1])

    def latest_run_id(self) -> str:
        return str(self.instance_call("print(json.dumps(instance.get_runs(limit=1)[0].run_id))"))

    def runs(self) -> list[dict[str, Any]]:
        """Every run, oldest first: id, status, parent run."""
        return list(
            self.instance_call(
                "print(json.dumps([{'id': r.run_id, 'status': r.status.value, "
                "'parent': r.parent_run_id} for r in reversed(instance.get_runs())]))"
            )
        )

    def cancel(self, run_id: str) -> None:
        """Terminates a run as the UI's Terminate button does."""
        self.instance_call(f"print(json.dumps(instance.run_coordinator.cancel_run({run_id!r})))")

    def run_workers(self) -> list[int]:
        """PIDs of run worker processes: the code server's spawned children that have an
        anylaunch process below them (the app's launcher)."""
        from tests.deployments.processes import cmdline

        workers = []
        for pid in descendants(self.daemons["code-server"].pid):
            if "spawn_main" not in cmdline(pid):
                continue
            if any("anylaunch" in cmdline(child) for child in descendants(pid)):
                workers.append(pid)
        return workers
