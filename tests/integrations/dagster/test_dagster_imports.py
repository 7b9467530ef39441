"""`import dagster_anylaunch` stays cheap: it needs Dagster, never another orchestrator or a
backend SDK."""

import subprocess
import sys

import pytest

HEAVY = ("airflow", "prefect", "kubernetes", "boto3", "botocore", "docker")


# also run in each engine version's own environment (scripts/engine_envs.sh)
pytestmark = pytest.mark.engine_matrix


@pytest.mark.parametrize(
    "statement",
    [
        "import dagster_anylaunch",
        "from dagster_anylaunch import AnylaunchResource, PipesAnylaunchClient, anylaunch_op",
    ],
)
def test_importing_the_integration_loads_no_sdk_and_no_other_orchestrator(statement: str) -> None:
    code = f"import sys; {statement}; print('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    loaded = {name.split(".")[0] for name in out.split()}
    assert "dagster" in loaded
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
