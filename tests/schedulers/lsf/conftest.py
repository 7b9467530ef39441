"""Fixtures of the lsf tests: a stand-in LSF cluster (bsub/bjobs/bkill on PATH, its state in a
temporary directory) that really runs the jobs as local processes.

The stand-ins are on PATH only inside tests that use ``lsf_cluster``; the directory of the
running interpreter goes on PATH too, so their ``#!/usr/bin/env python3`` runs this Python.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import stat
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

STANDINS = Path(__file__).parent / "standins"
COMMANDS = ("bsub", "bjobs", "bkill")
DEADLINE_S = 30.0
#: Arguments a shell would mangle: every one must reach the program unchanged.
HOSTILE = [
    "it's",
    '"double"',
    "$(touch /tmp/anylaunch-pwned)",
    "`id`",
    "line1\nline2",
    "*.py",
    "  spaced  ",
    "",
    "--flag=$HOME",
    "back\\slash",
    "semi;colon&&and|pipe>redirect",
    "ünïcødé ✓",
    "-n",
]


def load_standin() -> ModuleType:
    """The stand-in's module (for its helpers: force_stat, process_start, State)."""
    name = "anylaunch_tests_lsf_standin"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, STANDINS / "lsf_standin.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def wait_until(predicate: Callable[[], Any], what: str, timeout: float = DEADLINE_S) -> Any:
    """Polls ``predicate`` until it returns something truthy (a safety net, not a timing)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"gave up waiting for {what}")


class LsfCluster:
    """A stand-in LSF cluster: its state directory, config and jobs."""

    def __init__(self, state_dir: Path, jobdir: Path) -> None:
        self.state_dir = state_dir
        self.jobdir = jobdir
        self.standin = load_standin()

    def configure(self, **config: Any) -> None:
        """Updates cluster.json (queues, hosts, dispatch_delay_s, job_terminate_interval_s...)."""
        path = self.state_dir / "cluster.json"
        current = json.loads(path.read_text()) if path.exists() else {}
        current.update(config)
        path.write_text(json.dumps(current))

    def jobs(self) -> list[dict[str, Any]]:
        """Every job record (one per job or array element), oldest first."""
        jobs: list[dict[str, Any]] = self.standin.State(self.state_dir).all_jobs()
        return jobs

    def job(self, job_id: int | str) -> dict[str, Any]:
        found = [j for j in self.jobs() if j["id"] == int(job_id)]
        assert len(found) == 1, found
        return found[0]

    def force_stat(self, job_id: int | str, stat: str | None) -> None:
        self.standin.force_stat(self.state_dir, int(job_id), stat)

    def commands(self) -> list[list[str]]:
        """Every stand-in command run so far, as argv lists."""
        path = self.state_dir / "commands.log"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def shutdown(self) -> None:
        """Kills what a test left running: job process groups and the jobs' runners."""
        for job in self.jobs():
            pid, start = job.get("runner_pid"), job.get("runner_start")
            if not self.standin.process_alive(pid, start):
                continue
            if job.get("job_pgid"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(int(job["job_pgid"]), signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)


@pytest.fixture
def lsf_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LsfCluster]:
    """A fresh stand-in cluster; bsub/bjobs/bkill are on PATH for the test only."""
    for name in COMMANDS:  # a checkout may lose the executable bit
        path = STANDINS / name
        mode = path.stat().st_mode
        if not mode & stat.S_IXUSR:
            path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    state_dir = tmp_path / "lsf-state"
    state_dir.mkdir()
    jobdir = tmp_path / "jobs"
    monkeypatch.setenv(load_standin().STATE_ENV, str(state_dir))
    path = os.pathsep.join([str(STANDINS), str(Path(sys.executable).parent), os.environ["PATH"]])
    monkeypatch.setenv("PATH", path)
    cluster = LsfCluster(state_dir, jobdir)
    cluster.configure(job_terminate_interval_s=1.0)
    try:
        yield cluster
    finally:
        cluster.shutdown()
