"""examples/dagster/definitions.py loads and runs as it is, on real in-process Dagster with
real local_cwd apps."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from anylaunch.specs import AppState

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "dagster" / "definitions.py"


@pytest.fixture
def example_defs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dg.Definitions:
    import importlib.util

    monkeypatch.setenv("MODEL_DIR", str(tmp_path / "model"))
    spec = importlib.util.spec_from_file_location("anylaunch_dagster_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    defs = module.defs
    assert isinstance(defs, dg.Definitions)
    return defs


def test_dagster_itself_validates_the_example() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-f", str(EXAMPLE)],
        cwd=REPO,
        env={**os.environ, "DAGSTER_DISABLE_TELEMETRY": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "All code locations passed validation" in out.stdout + out.stderr


def test_hello_job(
    example_defs: dg.Definitions, instance: dg.DagsterInstance, user_logs, launched_apps
) -> None:
    result = example_defs.resolve_job_def("hello_job").execute_in_process(instance=instance)
    assert result.success
    assert result.output_for_node("greet").state == AppState.SUCCEEDED
    assert "echo/0 hello from dagster" in user_logs(instance, result.run_id)
    assert [a.name for a in launched_apps()] == ["echo"]


def test_train_and_report(
    tmp_path: Path,
    example_defs: dg.Definitions,
    instance: dg.DagsterInstance,
    user_logs,
    launched_apps,
) -> None:
    job = example_defs.resolve_job_def("train_and_report")
    result = job.execute_in_process(instance=instance)
    assert result.success

    train, report = launched_apps()
    assert (train.name, report.name) == ("train", "report")
    assert {train.state, report.state} == {AppState.SUCCEEDED}
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == [
        "weights-0.txt",
        "weights-1.txt",
    ]

    (trained,) = result.asset_materializations_for_node("trained_model")
    assert trained.metadata["handle"].value == train.app_handle
    assert trained.metadata["final_state"].value == "SUCCEEDED"
    (reported,) = result.asset_materializations_for_node("model_report")
    assert reported.metadata["accuracy"].value == pytest.approx(0.93)
    assert reported.metadata["weight_files"].value == 2
    (check,) = [
        e.asset_check_evaluation_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    ]
    assert check.check_name == "accuracy_above_threshold" and check.passed

    logs = "\n".join(user_logs(instance, result.run_id))
    for rank in (0, 1):
        assert f"trainer/{rank} rank {rank}: epoch 3/3" in logs
    assert "evaluating 2 weight file(s)" in logs  # a Pipes log message from report.py
