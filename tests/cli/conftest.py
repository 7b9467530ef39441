"""Runs the real ``anylaunch`` CLI in a subprocess, isolated in a temporary directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

# a safety net against a hung CLI, not a measurement
SUBPROCESS_TIMEOUT_S = 120


class Cli:
    """Invokes ``python -m anylaunch.cli.main`` with its own cwd, HOME and local state dir."""

    def __init__(self, root: Path) -> None:
        self.cwd = root / "work"
        self.cwd.mkdir()
        home = root / "home"
        home.mkdir()
        self.env = {
            **os.environ,
            "ANYLAUNCH_LOCAL_STATE_DIR": str(root / "state"),
            "HOME": str(home),  # no user-level .anylaunchconfig leaks in
            "PYTHONUNBUFFERED": "1",
        }
        for name in ("ANYLAUNCHCONFIG", "ANYLAUNCH_DEBUG", "ANYLAUNCH_PARENT_RUN_ID"):
            self.env.pop(name, None)

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "anylaunch.cli.main", *args]

    def __call__(
        self, *args: str, env: dict[str, str] | None = None, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            cwd=self.cwd,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT_S,
            input=input,
        )

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args),
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, as a shell job has
        )

    def launch(self, *args: str) -> str:
        """``anylaunch run`` without waiting; returns the handle it printed."""
        result = self("run", *args)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    def status(self, handle: str) -> dict[str, object]:
        result = self("status", "--json", handle)
        assert result.returncode == 0, result.stderr
        data: dict[str, object] = json.loads(result.stdout)
        return data

    def wait_for(self, handle: str, done: Callable[[dict[str, object]], bool]) -> dict[str, object]:
        """Polls ``status --json`` until ``done(status)``; fails after a generous deadline."""
        deadline = time.monotonic() + SUBPROCESS_TIMEOUT_S
        while True:
            status = self.status(handle)
            if done(status):
                return status
            assert time.monotonic() < deadline, f"{handle} stuck in {status['state']}"
            time.sleep(0.2)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def with_plugin_scheduler(cli: Cli, tmp_path: Path, name: str, source: str) -> Cli:
    """``cli`` with the scheduler plugin module ``name`` (its ``source``) on its path: a real
    ``anylaunch_plugins`` namespace package, found the way a user's plugin is."""
    plugin = tmp_path / "plugin" / "anylaunch_plugins" / "schedulers"
    plugin.mkdir(parents=True, exist_ok=True)
    (plugin / f"{name}.py").write_text(source)
    path = [str(tmp_path / "plugin"), cli.env.get("PYTHONPATH", "")]
    cli.env["PYTHONPATH"] = ":".join(p for p in path if p)
    return cli
