"""The local two-node Slurm cluster (``scripts/provision/20-slurm.sh``), for any test.

Reuse it from another test directory by importing the fixture into that conftest::

    from tests.schedulers.slurm.cluster import slurm_cluster  # noqa: F401

A test that takes ``slurm_cluster`` runs with ``SLURM_CONF`` pointing at the cluster; it is
skipped on a machine without the cluster and fails under CI=true (``require_backend``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from anylaunch.schedulers.api import DescribeAppResponse, Scheduler
from tests.backends import require_backend

#: Where the provisioning script keeps the cluster's configuration (a fixed machine path).
SLURM_CONF = "/var/lib/anylaunch-backends/slurm/etc/slurm.conf"
PROVISION = Path(__file__).resolve().parents[3] / "scripts" / "provision" / "20-slurm.sh"
HOW = "bash scripts/provision/20-slurm.sh"
#: A safety net for waits, never a timing assertion.
DEADLINE_S = 90.0


def provision(mode: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Runs the provisioning script in ``mode`` (start, stop, status, stop-dbd, start-dbd)."""
    return subprocess.run(
        ["bash", str(PROVISION), mode], capture_output=True, text=True, timeout=timeout, check=False
    )


def cluster_available() -> bool:
    """True if the cluster runs and is healthy (both nodes up, accounting reachable)."""
    return os.path.exists(SLURM_CONF) and provision("status", timeout=60).returncode == 0


def wait_done(
    scheduler: Scheduler[object], app_id: str, timeout: float = DEADLINE_S
) -> DescribeAppResponse:
    """Polls ``describe`` until the app is in a terminal state."""
    end = time.monotonic() + timeout
    desc = None
    while time.monotonic() < end:
        desc = scheduler.describe(app_id)
        if desc is not None and desc.state.is_terminal():
            return desc
        time.sleep(0.2)
    raise AssertionError(f"app {app_id} did not finish within {timeout}s; last: {desc}")


def wait_until(predicate: object, what: str, timeout: float = DEADLINE_S) -> object:
    """Polls ``predicate()`` until it returns something truthy, and returns that."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()  # type: ignore[operator]
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting for {what} after {timeout}s")


@dataclass
class SlurmCluster:
    """Handle on the running cluster."""

    conf: str = SLURM_CONF

    @contextlib.contextmanager
    def accounting_stopped(self) -> Iterator[None]:
        """Stops slurmdbd for the duration of the block (sacct fails), then starts it again."""
        result = provision("stop-dbd")
        assert result.returncode == 0, result.stderr
        try:
            yield
        finally:
            result = provision("start-dbd")
            assert result.returncode == 0, result.stderr


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """The running cluster, with ``SLURM_CONF`` set for the session."""
    require_backend("slurm", cluster_available(), HOW)
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = SLURM_CONF
    try:
        yield SlurmCluster()
    finally:
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
