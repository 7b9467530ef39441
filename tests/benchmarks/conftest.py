"""Shared benchmark fixtures."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TORCHX_ENV = REPO / ".cache" / "torchx-0.7.0"


@pytest.fixture(scope="session")
def torchx_python() -> Path:
    """The interpreter of a throwaway environment with TorchX 0.7.0 (made on first use)."""
    python = TORCHX_ENV / "bin" / "python"
    if not python.exists():
        uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
        subprocess.run(
            [uv, "venv", "--quiet", "--python", sys.executable, str(TORCHX_ENV)], check=True
        )
        subprocess.run(
            [uv, "pip", "install", "--quiet", "--python", str(python), "torchx==0.7.0"], check=True
        )
    return python
