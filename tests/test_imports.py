"""Imports stay cheap: the core never pulls in a backend SDK or an orchestrator."""

import subprocess
import sys

import pytest

HEAVY = ("kubernetes", "boto3", "botocore", "docker", "airflow", "prefect", "dagster")


def modules_loaded_by(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    return {name.split(".")[0] for name in out.split()}


@pytest.mark.parametrize(
    "statement",
    [
        "import anylaunch",
        "import anylaunch.specs",
        "import anylaunch.specs.api",
        "import anylaunch.schedulers; anylaunch.schedulers.get_scheduler_factories()",
    ],
)
def test_core_imports_no_sdk_or_orchestrator(statement: str) -> None:
    loaded = modules_loaded_by(statement)
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_specs_import_leaves_yaml_and_fsspec_unloaded() -> None:
    loaded = modules_loaded_by("import anylaunch.specs")
    assert "yaml" not in loaded
    assert "fsspec" not in loaded


def test_the_sdks_are_installed_so_the_check_above_means_something() -> None:
    # The test env installs every extra; otherwise "not imported" would be trivially true.
    code = f"import importlib.util as u; print([m for m in {HEAVY!r} if u.find_spec(m) is None])"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "module", ["anylaunch.workspace.docker_workspace", "anylaunch.workspace.dir_workspace"]
)
def test_workspaces_stand_below_the_schedulers(module: str) -> None:
    # workspaces are used by schedulers, never the other way round (require_sdk is anylaunch.sdk)
    code = f"import sys, {module}; print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert [m for m in out.stdout.split() if m.startswith("anylaunch.schedulers")] == []
