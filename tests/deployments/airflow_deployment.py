"""Airflow 3 as operators run it: scheduler (LocalExecutor), triggerer, dag-processor and
api-server as separate processes, on a PostgreSQL metadata database, loopback only.

Tests drive it the way a user does: through the REST API (trigger a run, read task
instances, mark failed, clear) with a JWT from the simple auth manager.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.deployments.postgres import Postgres
from tests.deployments.processes import Daemon, cmdline, descendants, free_port, wait_until

DAGS = Path(__file__).resolve().parent / "dags"
REPO = Path(__file__).resolve().parents[2]
#: The ``fulllocal`` plugin scheduler (local_cwd whose capacity says no) the placed DAG names.
PLUGINS = REPO / "tests" / "integrations" / "airflow" / "plugins"
BIN = Path(sys.executable).parent


class AirflowDeployment:
    """``AirflowDeployment(root, postgres).start()``; ``.stop()`` ends every process."""

    def __init__(self, root: Path, postgres: Postgres, extra_env: Mapping[str, str] = ()) -> None:  # type: ignore[assignment]
        self.root = root
        self.home = root / "airflow-home"
        self.logs = root / "logs"
        self.state_dir = root / "anylaunch-state"  # local_cwd apps of this deployment
        self.placements = root / "placements"  # the placement records of its placed apps
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.postgres = postgres
        self.daemons: dict[str, Daemon] = {}
        self._token: str | None = None
        self.extra_env = dict(extra_env)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update(
            {
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.db_url,
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__PARALLELISM": "4",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API__BASE_URL": self.url,
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__API_AUTH__JWT_SECRET": self._jwt_secret,
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
                "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
                "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
                "ANYLAUNCH_LOCAL_STATE_DIR": str(self.state_dir),
                "ANYLAUNCH_CHECKPOINT_ROOT": str(self.placements),
                "PYTHONPATH": os.pathsep.join(
                    [str(REPO), str(PLUGINS), os.environ.get("PYTHONPATH", "")]
                ),
            }
        )
        # the cluster backends' provisioned configuration, for the tasks' apps
        from tests.schedulers.slurm.cluster import SLURM_CONF

        env.setdefault("SLURM_CONF", SLURM_CONF)
        env.update(self.extra_env)
        return env

    def airflow(self, *args: str) -> None:
        import subprocess

        result = subprocess.run(
            [str(BIN / "airflow"), *args],
            env=self.env(),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"airflow {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
            )

    def start(self) -> AirflowDeployment:
        for path in (self.home, self.logs, self.state_dir):
            path.mkdir(parents=True, exist_ok=True)
        self._jwt_secret = secrets.token_hex(16)
        self.db_url = self.postgres.create_database(f"airflow_{secrets.token_hex(4)}")
        self.airflow("db", "migrate")
        for name, args in (
            ("api-server", ["api-server", "--port", str(self.port), "--host", "127.0.0.1"]),
            ("scheduler", ["scheduler"]),
            ("dag-processor", ["dag-processor"]),
            ("triggerer", ["triggerer"]),
        ):
            self.daemons[name] = Daemon(
                name, [str(BIN / "airflow"), *args], self.env(), self.logs, self.root
            )
        wait_until(lambda: self._get_raw("/api/v2/monitor/health"), 180, "the api-server")
        for dag_id in (
            "anylaunch_deploy_sync",
            "anylaunch_deploy_deferred",
            "anylaunch_deploy_slurm",
            "anylaunch_deploy_sweep",
            "anylaunch_deploy_placed",
            "anylaunch_deploy_k8s_ttl",
        ):
            wait_until(
                lambda dag_id=dag_id: self.get(f"/api/v2/dags/{dag_id}"),
                180,
                f"DAG {dag_id} parsed",
            )
            self.request("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
        return self

    def stop(self) -> None:
        for daemon in reversed(list(self.daemons.values())):
            daemon.stop()

    # --- REST ------------------------------------------------------------------------------

    def _get_raw(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return json.load(response)

    def token(self) -> str:
        if self._token is None:
            request = urllib.request.Request(f"{self.url}/auth/token", method="GET")
            with urllib.request.urlopen(request, timeout=10) as response:
                self._token = json.load(response)["access_token"]
        return self._token

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token()}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read()
        except urllib.error.HTTPError as e:
            raise RuntimeError(
                f"{method} {path}: HTTP {e.code}: {e.read().decode(errors='replace')}"
            ) from None
        return json.loads(text) if text else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def trigger(self, dag_id: str, conf: Mapping[str, Any]) -> str:
        run = self.request(
            "POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": dict(conf)}
        )
        return str(run["dag_run_id"])

    def task_instance(self, dag_id: str, run_id: str, task_id: str = "app") -> dict[str, Any]:
        return dict(self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}"))

    def dag_run_state(self, dag_id: str, run_id: str) -> str:
        return str(self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"])

    def task_runners(self) -> list[int]:
        """PIDs of the processes running a task's code: a LocalExecutor worker supervises
        each try in a child process titled ``airflow worker -- <task instance id>``."""
        return [
            pid
            for pid in descendants(self.daemons["scheduler"].pid)
            if cmdline(pid).startswith("airflow worker -- ") and "LocalExecutor" not in cmdline(pid)
        ]

    def restart(self, name: str) -> None:
        """Starts daemon ``name`` again (after a fault stopped it)."""
        old = self.daemons[name]
        self.daemons[name] = Daemon(name, old.argv, self.env(), self.logs, self.root)

    def task_log(self, dag_id: str, run_id: str, try_number: int, task_id: str = "app") -> str:
        """The text of one try's task log, as the UI shows it."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}"
        request = urllib.request.Request(self.url + path + "?full_content=true")
        request.add_header("Authorization", f"Bearer {self.token()}")
        request.add_header("Accept", "application/json")
        with urllib.request.urlopen(request, timeout=30) as response:
            body = json.load(response)
        content = body.get("content")
        if isinstance(content, list):  # structured log records
            return "\n".join(_record_text(r) for r in content)
        return str(content)


def _record_text(record: object) -> str:
    """One structured task-log record as the UI shows it: the event, then any error."""
    if not isinstance(record, dict):
        return str(record)
    text = str(record.get("event", ""))
    for error in record.get("error_detail") or []:
        if isinstance(error, dict):
            text += f"\n{error.get('exc_type')}: {error.get('exc_value')}"
    return text
