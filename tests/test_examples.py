"""The examples run as they are, from the repository root."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_hello_local(tmp_path: Path) -> None:
    env = {**os.environ, "ANYLAUNCH_LOCAL_STATE_DIR": str(tmp_path / "state")}
    out = subprocess.run(
        [sys.executable, "examples/core/hello_local.py"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "greeter/0 hello from replica 0" in out.stdout
    assert "greeter/1 hello from replica 1" in out.stdout
    assert "final state: SUCCEEDED" in out.stdout
