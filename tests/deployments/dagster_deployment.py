"""Dagster as operators run it at scale, without the UI: two code locations (a gRPC code
server each), ``dagster-daemon`` (the queued run coordinator, run monitoring, run retries)
and the default run launcher starting each run in a run worker process of its own (spawned by
the run's code server); runs are submitted with ``dagster job launch``, as the UI's launchpad
does."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.deployments.processes import Daemon, descendants, free_port, wait_until

FLOWS = Path(__file__).resolve().parent / "flows"
BIN = Path(sys.executable).parent
#: The code locations, each served by its own code server from its own definitions.
LOCATIONS = {
    "anylaunch": "anylaunch_dagster_defs.py",
    "anylaunch-slurm": "anylaunch_dagster_slurm_defs.py",
}

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
        self.ports = {location: free_port() for location in LOCATIONS}
        self.daemons: dict[str, Daemon] = {}

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER")}
        env.update(
            {
                "DAGSTER_HOME": str(self.home),
                "ANYLAUNCH_LOCAL_STATE_DIR": str(self.state_dir),
                "TICKER_DURATION": "25",
                "SLURM_TICKER_JOB_DIR": str(self.root / "slurm-jobs"),
                "PYTHONPATH": os.pathsep.join(
                    [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]
                ),
            }
        )
        # the Slurm cluster's provisioned configuration, for the second location's apps
        from tests.schedulers.slurm.cluster import SLURM_CONF

        env.setdefault("SLURM_CONF", SLURM_CONF)
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
            "load_from:\n"
            + "".join(
                f"  - grpc_server:\n      host: 127.0.0.1\n      port: {self.ports[location]}\n"
                f"      location_name: {location}\n"
                for location in LOCATIONS
            )
        )
        logs = self.root / "logs"
        # the instance's storage created once, before the servers (each would create it)
        self.instance_call("print(json.dumps(len(instance.get_runs())))")
        for location, defs in LOCATIONS.items():
            port = str(self.ports[location])
            serve = ["code-server", "start", "-f", str(FLOWS / defs), "-h", "127.0.0.1", "-p", port]
            self.daemons[f"code-server-{location}"] = Daemon(
                f"code-server-{location}",
                [str(BIN / "dagster"), *serve],
                self.env(),
                logs,
                self.root,
            )
        for location in LOCATIONS:  # the servers load their definitions side by side
            up = functools.partial(self._code_server_up, location)
            wait_until(up, 180, f"the {location} code server")
        self.daemons["daemon"] = Daemon(
            "daemon",
            [str(BIN / "dagster-daemon"), "run", "-w", str(workspace)],
            self.env(),
            logs,
            self.root,
        )
        self.workspace = workspace
        return self

    def _code_server_up(self, location: str) -> bool:
        import socket

        with socket.socket() as sock:
            sock.settimeout(2)
            return sock.connect_ex(("127.0.0.1", self.ports[location])) == 0

    def stop(self) -> None:
        for daemon in reversed(list(self.daemons.values())):
            daemon.stop()

    def launch(self, job: str = "ticker_job", location: str = "anylaunch") -> str:
        """Submits ``job`` of code ``location`` (queued; the daemon launches it); returns the
        run id."""
        ws = str(self.workspace)
        out = self.run(str(BIN / "dagster"), "job", "launch", "-w", ws, "-l", location, "-j", job)
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

    def log_messages(self, run_id: str) -> list[str]:
        """The messages of a run's event log, in order."""
        return list(
            self.instance_call(
                f"print(json.dumps([e.message for e in instance.all_logs({run_id!r})]))"
            )
        )

    def run_worker(self, run_id: str) -> int | None:
        """The PID of a run's worker process, as its code server logged it at launch."""
        import re

        for message in self.log_messages(run_id):
            if found := re.search(r"Started process for run \(pid: (\d+)\)", message):
                return int(found.group(1))
        return None

    def run_workers(self) -> list[int]:
        """PIDs of run worker processes: the code servers' spawned children that have an
        anylaunch process below them (the app's launcher)."""
        from tests.deployments.processes import cmdline

        servers = [self.daemons[f"code-server-{location}"].pid for location in LOCATIONS]
        workers = []
        for pid in (pid for server in servers for pid in descendants(server)):
            if "spawn_main" not in cmdline(pid):
                continue
            if any("anylaunch" in cmdline(child) for child in descendants(pid)):
                workers.append(pid)
        return workers
