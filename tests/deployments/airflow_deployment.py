"""Airflow 3 as operators run it, distributed: a scheduler with the CeleryExecutor, two Celery
workers (``w1``, ``w2``), two triggerers (HA: ``t1``, ``t2``), a dag-processor and an
api-server as separate processes, on a PostgreSQL metadata database (also Celery's result
backend) and a Redis broker, loopback only. Without a Redis URL: the scheduler with the
LocalExecutor and one triggerer (the engine-scale benchmark's deployment).

Tests drive it the way a user does: through the REST API (trigger a run, read task
instances, mark failed, clear) with a JWT from the simple auth manager.

Each worker and triggerer reports a hostname of its own (``hostname_callable`` below), so a
task instance's ``hostname`` says which worker ran it. The log files are on one shared disk
(every process of this deployment runs on one host), so the workers and triggerers serve no
logs: the api-server reads the files.
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
from tests.deployments.processes import (
    Daemon,
    cmdline,
    descendants,
    free_port,
    kill_tree,
    wait_until,
)

DAGS = Path(__file__).resolve().parent / "dags"
REPO = Path(__file__).resolve().parents[2]
#: The ``fulllocal`` plugin scheduler (local_cwd whose capacity says no) the placed DAG names.
PLUGINS = REPO / "tests" / "integrations" / "airflow" / "plugins"
BIN = Path(sys.executable).parent
#: The Redis DB this deployment's Celery broker uses (its own: other tests may share the server).
BROKER_DB = 11
#: The Celery workers and the triggerers: daemon name -> the hostname it reports.
WORKERS = {"worker-1": "w1", "worker-2": "w2"}
TRIGGERERS = {"triggerer-1": "t1", "triggerer-2": "t2"}
#: Where a worker or triggerer finds the hostname it reports (``[core] hostname_callable``).
ENV_HOSTNAME = "ANYLAUNCH_AIRFLOW_HOSTNAME"


def hostname() -> str:
    """``[core] hostname_callable`` of the deployment: a worker's or triggerer's own name
    (``$ANYLAUNCH_AIRFLOW_HOSTNAME``), else the host's FQDN."""
    import socket

    return os.environ.get(ENV_HOSTNAME) or socket.getfqdn()


#: The Airflow settings that make a lost process noticed within seconds, not minutes: a task
#: whose supervisor stops heartbeating fails (and is retried) after 20 s; a triggerer that
#: stops heartbeating loses its triggers to the other after 15 s.
FAST_FAILOVER = {
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "20",
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
    "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "2",
    "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
    "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "15",
}


class AirflowDeployment:
    """``AirflowDeployment(root, postgres, redis_url).start()``; ``.stop()`` ends every process.

    ``redis_url`` (the broker's server): the CeleryExecutor, two workers, two triggerers;
    ``None``: the LocalExecutor and one triggerer (daemon ``triggerer``).
    """

    def __init__(
        self,
        root: Path,
        postgres: Postgres,
        redis_url: str | None = None,
        extra_env: Mapping[str, str] = (),  # type: ignore[assignment]
    ) -> None:
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
        self.celery = redis_url is not None
        #: the daemon names of the workers and triggerers -> the hostname each reports
        self.workers = dict(WORKERS) if self.celery else {}
        self.triggerers = dict(TRIGGERERS) if self.celery else {"triggerer": ""}
        # the broker: a DB of our own, and a queue of this deployment's own
        self.broker_url = ""
        self.queue = f"anylaunch-{secrets.token_hex(4)}"
        if redis_url is not None:
            from urllib.parse import urlsplit

            where = urlsplit(redis_url)
            if where.scheme != "redis" or not where.netloc:
                raise ValueError(f"redis_url={redis_url!r}: expected redis://host:port[/db]")
            self.broker_url = f"redis://{where.netloc}/{BROKER_DB}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update(
            {
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.db_url,
                "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor" if self.celery else "LocalExecutor",
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
        if self.celery:
            env.update(
                {
                    "AIRFLOW__CORE__HOSTNAME_CALLABLE": f"{__name__}.hostname",
                    "AIRFLOW__CELERY__BROKER_URL": self.broker_url,
                    "AIRFLOW__CELERY__RESULT_BACKEND": f"db+{self.db_url}",
                    "AIRFLOW__OPERATORS__DEFAULT_QUEUE": self.queue,
                    **FAST_FAILOVER,
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
        daemons: list[tuple[str, list[str]]] = [
            ("api-server", ["api-server", "--port", str(self.port), "--host", "127.0.0.1"]),
            ("scheduler", ["scheduler"]),
            ("dag-processor", ["dag-processor"]),
        ]
        # two triggerers on one host cannot both serve logs on one port: the files are shared
        serve_logs = ["--skip-serve-logs"] if self.celery else []
        daemons += [(name, ["triggerer", *serve_logs]) for name in self.triggerers]
        daemons += [
            (
                name,
                [
                    "celery",
                    "worker",
                    "--celery-hostname",
                    f"{host}@{self.queue}",
                    "--queues",
                    self.queue,
                    "--concurrency",
                    "2",
                    "--skip-serve-logs",
                    "--without-gossip",
                    "--without-mingle",
                ],
            )
            for name, host in self.workers.items()
        ]
        for name, args in daemons:
            self.daemons[name] = Daemon(
                name, [str(BIN / "airflow"), *args], self.daemon_env(name), self.logs, self.root
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

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM to every daemon's process group at once, SIGKILL to what is left after
        ``grace`` seconds."""
        import contextlib
        import signal
        import subprocess
        import time

        daemons = list(reversed(list(self.daemons.values())))
        for daemon in daemons:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(daemon.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for daemon in daemons:
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.process.wait(max(0.0, deadline - time.monotonic()))
        for daemon in daemons:
            daemon.stop(grace=0)  # SIGKILLs what is left, closes its log

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

    def daemon_env(self, name: str) -> dict[str, str]:
        """The environment of daemon ``name``: a worker or triggerer names itself."""
        env = self.env()
        own = self.workers.get(name) or self.triggerers.get(name)
        if own:
            env[ENV_HOSTNAME] = own
        return env

    def task_runners(self) -> list[int]:
        """PIDs of the processes running a task's code: a Celery worker's pool process (a
        LocalExecutor worker) supervises each try in a child process titled
        ``airflow worker -- <task instance id>``."""
        parents = [n for n in self.workers if self.daemons[n].alive()] or ["scheduler"]
        return [
            pid
            for name in parents
            for pid in descendants(self.daemons[name].pid)
            if cmdline(pid).startswith("airflow worker -- ") and "LocalExecutor" not in cmdline(pid)
        ]

    def worker(self, hostname: str) -> str:
        """The daemon name of the Celery worker that reports ``hostname`` (``w1``: worker-1)."""
        (name,) = (n for n, h in self.workers.items() if h == hostname)
        return name

    def trigger_host(self, dag_id: str, run_id: str, task_id: str = "app") -> str | None:
        """The hostname of the triggerer running the deferred task's trigger (None: the task
        is not deferred, or no triggerer has taken its trigger yet)."""
        ti = self.task_instance(dag_id, run_id, task_id)
        job_id = (ti.get("trigger") or {}).get("triggerer_id")
        if ti["state"] != "deferred" or job_id is None:
            return None
        jobs = self.get("/api/v2/jobs?job_type=TriggererJob&limit=100")["jobs"]
        return next((str(j["hostname"]) for j in jobs if j["id"] == job_id), None)

    def triggerer(self, hostname: str) -> str:
        """The daemon name of the triggerer that reports ``hostname`` (``t1``: triggerer-1)."""
        (name,) = (n for n, h in self.triggerers.items() if h == hostname)
        return name

    def kill_host(self, name: str) -> list[int]:
        """SIGKILLs daemon ``name`` with its whole process tree (the host it runs on is lost:
        for a worker, its pool processes, their task supervisors and task processes); returns
        the PIDs killed. Its process group goes too (a child that left the tree)."""
        import contextlib
        import signal

        daemon = self.daemons[name]
        killed = kill_tree(daemon.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(daemon.pid, signal.SIGKILL)
        daemon.process.wait(30)
        return killed

    def restart(self, name: str) -> None:
        """Starts daemon ``name`` again (after a fault stopped it)."""
        old = self.daemons[name]
        self.daemons[name] = Daemon(name, old.argv, self.daemon_env(name), self.logs, self.root)

    def ensure_running(self) -> None:
        """Restarts every daemon a fault left dead (a test's cleanup)."""
        for name, daemon in list(self.daemons.items()):
            if not daemon.alive():
                self.restart(name)

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
