"""End to end: a ported TorchX plugin package, installed into a fresh venv, runs an app.

The venv gets anylaunch built from (a copy of) this checkout and the plugin package built from
its sources, both by ``uv pip install --offline --no-deps`` (the build backend comes from uv's
cache, which ``uv sync`` filled). anylaunch's own dependencies (fsspec, PyYAML) come from the
project venv through a ``.pth`` file, so nothing is downloaded. Then ``anylaunch run`` in that
venv must find the plugin scheduler, component and named resource with no configuration.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.plugins.plugin_package import write_plugin_package

CHECKOUT = Path(__file__).resolve().parents[2]
UV = shutil.which("uv")


def _run(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _clean_env(**extra: str) -> dict[str, str]:
    # Nothing of this test process's environment may leak anylaunch into the venv.
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "ANYLAUNCHCONFIG"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(extra)
    return env


def _copy_of_the_checkout(dest: Path) -> Path:
    """The checkout's sources, at a new path: uv caches a local project's build by its path
    and pyproject.toml, so building the checkout in place could install a stale copy."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(CHECKOUT / name, dest / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("core", "integrations"):
        shutil.copytree(CHECKOUT / name, dest / name, ignore=skip)
    return dest


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if UV is None:
        pytest.skip("uv is not on PATH (the project is set up with `uv sync`)")
    root = tmp_path_factory.mktemp("plugin_e2e")
    venv = root / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], _clean_env(), root)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    package = write_plugin_package(root / "myplug")
    install_cmd = [UV, "pip", "install", "--no-deps", "--python", str(python)]
    sources = [str(_copy_of_the_checkout(root / "anylaunch-src")), str(package)]
    # Offline first: the build backend (hatchling) is in uv's cache after `uv sync`. A CI
    # cache pruned of it needs the index once, which such a runner can reach.
    install = _run([*install_cmd, "--offline", *sources], _clean_env(), root)
    if install.returncode != 0:
        install = _run([*install_cmd, *sources], _clean_env(), root)
    assert install.returncode == 0, install.stdout + install.stderr
    site = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        _clean_env(),
        root,
    ).stdout.strip()
    # anylaunch's dependencies, from the project venv (appended to sys.path, after the venv's
    # own site-packages, so the anylaunch installed above is the one imported)
    Path(site, "_project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


@pytest.mark.slow
def test_the_installed_plugin_package_runs_an_app_end_to_end(venv: Path, tmp_path: Path) -> None:
    python = venv / "bin" / "python"
    where = _run(
        [str(python), "-c", "import anylaunch, anylaunch_plugins; print(anylaunch.__file__)"],
        _clean_env(),
        tmp_path,
    )
    assert where.returncode == 0, where.stderr
    assert where.stdout.startswith(str(venv)), where.stdout  # the copy installed in the venv

    home = tmp_path / "home"
    home.mkdir()
    env = _clean_env(HOME=str(home), ANYLAUNCH_LOCAL_STATE_DIR=str(tmp_path / "state"))
    cli = str(venv / "bin" / "anylaunch")

    builtins = _run([cli, "builtins"], env, tmp_path)
    assert builtins.returncode == 0, builtins.stderr
    assert "myplug.hello" in builtins.stdout
    assert "utils.echo" in builtins.stdout  # the built-ins stay

    component_args = ["--msg", "hi-from-plugin", "--h", "myplug_cpu_2"]
    run = _run(
        [cli, "run", "--log", "-s", "myplug", "myplug.hello", *component_args],
        env,
        tmp_path,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    handle = next(line for line in run.stdout.split() if line.startswith("myplug://"))
    assert "hi-from-plugin scheduler=myplug resource=myplug_cpu_2 fractional=True mem=2048" in out

    status = _run([cli, "status", handle], env, tmp_path)
    assert status.returncode == 0, status.stderr
    assert "SUCCEEDED" in status.stdout

    # the plugin scheduler joined the built-ins instead of replacing them
    listing = _run(
        [
            str(python),
            "-c",
            "from anylaunch.schedulers import get_scheduler_factories as f; print(*f())",
        ],
        env,
        tmp_path,
    )
    assert listing.returncode == 0, listing.stderr
    names = listing.stdout.split()
    assert names[0] == "local_cwd" and "myplug" in names and "kubernetes" in names

    # with plugins switched off, the same command names the unknown scheduler
    off = _run(
        [cli, "run", "-s", "myplug", "myplug.hello", *component_args],
        {**env, "ANYLAUNCH_PLUGINS_SOURCE": "0"},
        tmp_path,
    )
    assert off.returncode != 0
    assert "unknown scheduler 'myplug'" in off.stderr
