"""Engines deployed the way operators run them, for fault-injection tests (issue 17).

Each deployment is module-scoped: started once (its own PostgreSQL database, free ports,
loopback only), shared by the module's scenarios, and torn down by PID at the end. Every
scenario checks that no app process outlives it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import require_backend
from tests.deployments import postgres as pg
from tests.schedulers.docker.docker_engine import busybox_image, docker_client
from tests.schedulers.kubernetes.kube_cluster import kube_client, kube_namespace, kubelet
from tests.schedulers.slurm.cluster import slurm_cluster

__all__ = [
    "app_ids",
    "app_state",
    "busybox_image",
    "docker_client",
    "kube_client",
    "kube_namespace",
    "kubelet",
    "live_processes",
    "postgres",
    "redis_url",
    "slurm_cluster",
]

collect_ignore = ["dags"]


@pytest.fixture(scope="session")
def postgres() -> Iterator[pg.Postgres]:
    """One PostgreSQL cluster for every deployment of the session (a database each). It lives
    in its own directory under /tmp: pytest's tmp dirs are private to root, and PostgreSQL
    runs as ``postgres``."""
    require_backend("postgresql", pg.available(), "apt-get install postgresql-15 (initdb on PATH)")
    root = Path(tempfile.mkdtemp(prefix="anylaunch-postgres-"))
    server = pg.Postgres(root)
    try:
        yield server.start()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def _redis_answers(url: str) -> bool:
    """True if a Redis server answers PING at ``url`` (redis://host:port[/db])."""
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(url)
    try:
        with socket.create_connection((where.hostname or "", where.port or 6379), 5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The provisioned Redis (``$ANYLAUNCH_REDIS_URL``), the Celery broker of the distributed
    Airflow deployment; each deployment uses a DB number of its own."""
    import os

    url = os.environ.get("ANYLAUNCH_REDIS_URL", "")
    require_backend(
        "redis",
        bool(url) and _redis_answers(url),
        ". scripts/provision/50-redis.sh (exports ANYLAUNCH_REDIS_URL)",
    )
    return url


def app_ids(state_dir: Path, name: str) -> list[str]:
    """The ids of the local_cwd apps called ``name`` launched into ``state_dir``."""
    if not state_dir.exists():
        return []
    return sorted(
        p.name for p in state_dir.iterdir() if p.is_dir() and p.name.startswith(f"{name}-")
    )


def app_state(state_dir: Path, app_id: str) -> str:
    """A local_cwd app's state from its state file (SUBMITTED before its supervisor ran)."""
    import json

    state = state_dir / app_id / "state.json"
    return str(json.loads(state.read_text())["state"]) if state.exists() else "SUBMITTED"


def live_processes(marker: str) -> list[int]:
    """PIDs whose command line contains ``marker`` (an app's script)."""
    from tests.deployments.processes import cmdline

    return [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and marker in cmdline(int(entry.name))
    ]
