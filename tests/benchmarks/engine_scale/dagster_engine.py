"""The Dagster adapter of the engine-scale harness: the project's Dagster deployment
(tests/deployments/dagster_deployment.py: a gRPC code server, ``dagster-daemon`` with the
queued run coordinator, the default run launcher) serving the benchmark's jobs
(flows/engine_scale_dagster.py) instead of the deployment tests' ones; runs submitted with
``dagster job launch``; the run worker the code server starts for each run (its process tree)
is what is sampled; each job's end is the op's ``ENDED {i}`` entry in the run's event log."""

from __future__ import annotations

import json
import socket
import sqlite3
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.benchmarks.engine_scale.harness import TreesSampler, measure_run, new_top_processes
from tests.deployments.dagster_deployment import BIN, DAGSTER_YAML, DagsterDeployment
from tests.deployments.processes import Daemon, descendants, free_port, wait_until

DEFS = Path(__file__).resolve().parent / "flows" / "engine_scale_dagster.py"
#: tool -> the job in flows/engine_scale_dagster.py
JOB_OF = {"anylaunch": "engine_scale_anylaunch", "incumbent": "engine_scale_incumbent"}
#: what the op logs as each job ends (flows/engine_scale_dagster.py's ENDED)
ENDED = "engine-scale: ended"
#: run statuses that end it
TERMINAL = ("SUCCESS", "FAILURE", "CANCELED")


class BenchDagster(DagsterDeployment):
    """The deployment with the benchmark's definitions in its (one) code server."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.bench_port = free_port()

    def _listening(self) -> bool:
        with socket.socket() as sock:
            sock.settimeout(2)
            return sock.connect_ex(("127.0.0.1", self.bench_port)) == 0

    def start(self) -> BenchDagster:
        for path in (self.home, self.state_dir, self.root / "logs"):
            path.mkdir(parents=True, exist_ok=True)
        (self.home / "dagster.yaml").write_text(DAGSTER_YAML)
        self.workspace = self.root / "workspace.yaml"
        self.workspace.write_text(
            f"load_from:\n  - grpc_server:\n      host: 127.0.0.1\n      port: {self.bench_port}\n"
            "      location_name: engine-scale\n"
        )
        logs = self.root / "logs"
        serve = [
            "code-server",
            "start",
            "-f",
            str(DEFS),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.bench_port),
        ]
        self.daemons["code-server"] = Daemon(
            "code-server", [str(BIN / "dagster"), *serve], self.env(), logs, self.root
        )
        wait_until(self._listening, 180, "the code server")
        daemon = [str(BIN / "dagster-daemon"), "run", "-w", str(self.workspace)]
        self.daemons["daemon"] = Daemon("daemon", daemon, self.env(), logs, self.root)
        return self

    def launch_job(self, job: str, config: dict[str, Any]) -> str:
        """Submits ``job`` with op config ``config`` (queued; the daemon launches it)."""
        run_config = json.dumps({"ops": {_op_of(job): {"config": config}}})
        out = self.run(
            str(BIN / "dagster"),
            *("job", "launch", "-w", str(self.workspace), "-j", job),
            *("--config-json", run_config),
        )
        return out.strip().split()[-1] if out.strip() else self.latest_run_id()

    def run_status(self, run_id: str) -> str | None:
        """The run's status, read from the instance's SQLite run storage."""
        with sqlite3.connect(f"file:{self.home / 'history' / 'runs.db'}?mode=ro", uri=True) as db:
            row = db.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else str(row[0])

    def job_ends(self, run_id: str) -> list[dict[str, Any]]:
        """The op's ``ENDED {i}`` entries, as Airflow-shaped records (``map_index``,
        ``end_date``, ``state``)."""
        found = self.instance_call(
            f"print(json.dumps([[e.user_message, e.timestamp] for e in instance.all_logs({run_id!r})"
            f" if e.user_message.startswith({ENDED!r})]))"
        )
        return [
            {
                "map_index": int(message.rsplit(" ", 1)[1]),
                "end_date": datetime.fromtimestamp(stamp, UTC).isoformat(),
                "state": "success",
            }
            for message, stamp in found
        ]


def _op_of(job: str) -> str:
    return job.replace("engine_scale_", "wait_all_")


def start(root: Path) -> BenchDagster:
    """The deployment, serving the benchmark's jobs."""
    return BenchDagster(root).start()


def run_job(
    dagster: BenchDagster,
    tool: str,
    config: dict[str, Any],
    timeout: float,
    load: Callable[[], Counter[str]] | None = None,
    audit: Path | None = None,
) -> dict[str, Any]:
    """Runs ``tool``'s job and waits for the run to end
    (:func:`~tests.benchmarks.engine_scale.harness.measure_run`), sampling the run worker."""
    server = dagster.daemons["code-server"].pid
    before = descendants(server)
    sampler = TreesSampler(lambda: new_top_processes(server, before))
    job = JOB_OF[tool]

    def ended(run_id: str) -> str | None:
        status = dagster.run_status(run_id)
        return status if status in TERMINAL else None

    measured = measure_run(
        lambda: dagster.launch_job(job, config),
        ended,
        sampler,
        timeout,
        f"run of {job}",
        load,
        audit,
    )
    measured["run_workers"] = len(sampler.roots)
    measured["tis"] = dagster.job_ends(measured["run_id"])
    return measured
