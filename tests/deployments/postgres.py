"""A throwaway PostgreSQL 15 cluster for a deployment's metadata database.

PostgreSQL refuses to run as root, so the cluster belongs to the ``postgres`` user when the
tests run as root. It listens on 127.0.0.1 on a free port, with ``trust`` authentication
(loopback only), fsync off (a test database), and is stopped by ``pg_ctl stop -m immediate``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

from tests.deployments.processes import free_port


def available() -> bool:
    """True if the PostgreSQL server binaries are on PATH."""
    return all(shutil.which(tool) for tool in ("initdb", "pg_ctl", "postgres"))


class Postgres:
    """``Postgres(root).start()`` → ``.url(database)``; ``.stop()`` ends it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self._owner = "postgres" if os.geteuid() == 0 else None

    def _run(self, *argv: str) -> None:
        prefix = ["runuser", "-u", self._owner, "--"] if self._owner else []
        result = subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {result.stdout}{result.stderr}")

    def start(self) -> Postgres:
        self.root.mkdir(parents=True, exist_ok=True)
        if self._owner:
            entry = pwd.getpwnam(self._owner)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._run("initdb", "-D", str(self.data), "--auth=trust", "-U", "postgres", "-E", "UTF8")
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off -c max_connections=200"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
            "-w",
            "start",
        )
        return self

    def create_database(self, name: str) -> str:
        """Creates ``name`` and returns its SQLAlchemy URL (psycopg2)."""
        import psycopg2

        connection = psycopg2.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname="postgres"
        )
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{name}"')
        finally:
            connection.close()
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.data.exists():
            subprocess.run(
                [
                    *(["runuser", "-u", self._owner, "--"] if self._owner else []),
                    "pg_ctl",
                    "-D",
                    str(self.data),
                    "-m",
                    "immediate",
                    "stop",
                ],
                capture_output=True,
                timeout=60,
            )
