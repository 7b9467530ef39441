"""A backend that cannot be asked is one clear error and exit code 4, on every scheduler;
"the scheduler has no such app" stays exit code 3. Nothing here needs the backend to be up:
each case points the scheduler at a cluster, engine or endpoint where nothing answers."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.backends import require_backend
from tests.cli.conftest import Cli

EXIT_UNKNOWN_APP = 3
EXIT_UNREACHABLE = 4


def _dead_slurm_conf(tmp_path: Path) -> dict[str, str]:
    """The provisioned cluster's slurm.conf with slurmctld moved to a port nobody listens on
    (squeue then exits 0 with an empty job list and an error entry: it must not read as
    "no such job")."""
    conf = os.environ.get("SLURM_CONF", "")
    require_backend(
        "slurm", bool(conf) and shutil.which("squeue") is not None, "scripts/provision/20-slurm.sh"
    )
    text = Path(conf).read_text()
    dead = re.sub(r"(?m)^SlurmctldPort=.*$", "SlurmctldPort=9", text)
    if dead == text:
        dead = "SlurmctldPort=9\n" + text
    path = tmp_path / "dead-slurm" / "slurm.conf"
    path.parent.mkdir()
    path.write_text(dead)
    return {"SLURM_CONF": str(path)}


def _no_kubeconfig(tmp_path: Path) -> dict[str, str]:
    return {"KUBECONFIG": str(tmp_path / "no-kubeconfig")}


def _no_docker(tmp_path: Path) -> dict[str, str]:
    return {"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}


def _no_aws_endpoint(tmp_path: Path) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # the discard port: connection refused
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_MAX_ATTEMPTS": "1",
    }


def _no_lsf(tmp_path: Path) -> dict[str, str]:
    return {"PATH": str(Path(sys.executable).parent)}  # python, but no bjobs


CASES = {
    "slurm://s/12345": _dead_slurm_conf,
    "kubernetes://s/default:app-x1y2": _no_kubeconfig,
    # an id no Kubernetes app can have: still "no cluster", never "unknown app"
    "kubernetes://x/y": _no_kubeconfig,
    "kubernetes_mcad://s/default:app-x1y2": _no_kubeconfig,
    "local_docker://s/app-x1y2": _no_docker,
    "aws_batch://s/queue:app-x1y2": _no_aws_endpoint,
    "aws_sagemaker://s/app-x1y2": _no_aws_endpoint,
    "lsf://s/app-x1y2": _no_lsf,
}


@pytest.mark.parametrize("handle", list(CASES))
def test_an_unreachable_backend_is_exit_code_4_with_one_clear_line(
    cli: Cli, tmp_path: Path, handle: str
) -> None:
    env = CASES[handle](tmp_path)
    scheduler = handle.split("://")[0]
    result = cli("status", handle, env=env)
    assert result.returncode == EXIT_UNREACHABLE, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    backend = "local_docker" if scheduler == "local_docker" else scheduler.split("_mcad")[0]
    assert lines[0].startswith(f"anylaunch: error: cannot reach the {backend} backend: ")
    assert "Fix: " in lines[0]
    assert "unknown app" not in lines[0]
    assert result.stdout == ""


def test_an_unknown_app_on_a_reachable_backend_stays_exit_code_3(cli: Cli) -> None:
    result = cli("status", "local_cwd://s/never-launched-x1y2")
    assert result.returncode == EXIT_UNKNOWN_APP
    assert "unknown app" in result.stderr
