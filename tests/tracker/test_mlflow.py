"""The MLflow tracker against a real local tracking store (SQLite, as MLflow 3 wants it), in
this process and from a real local_cwd job that tracks through ``AppRun.run_from_env()``."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest

from anylaunch.runner import get_runner
from anylaunch.schedulers.local import forkserver
from anylaunch.specs import AppDef, AppState, Resource, Role
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.tracker.api import ENV_ANYLAUNCH_JOB_ID, ENV_ANYLAUNCH_PARENT_RUN_ID, AppRun
from anylaunch.tracker.errors import TrackerError
from anylaunch.tracker.mlflow import (
    ENV_ANYLAUNCH_TRACKING_EXPERIMENT_NAME,
    MLflowTracker,
    create_tracker,
)
from tests.cli.conftest import Cli

RUN = "local_cwd://s/train-1"


@pytest.fixture(autouse=True)
def no_job_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in (ENV_ANYLAUNCH_JOB_ID, ENV_ANYLAUNCH_PARENT_RUN_ID, "ANYLAUNCH_TRACKERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(ENV_ANYLAUNCH_TRACKING_EXPERIMENT_NAME, raising=False)
    yield
    while mlflow.active_run() is not None:  # a failed test must not leave its run active
        mlflow.end_run()


@pytest.fixture(autouse=True, scope="module")
def close_forkserver_connections() -> Iterator[None]:
    """The local_cwd job below leaves no fork-server connection open at exit."""
    yield
    forkserver.close_connections()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SQLite store for the module: creating its tables costs ~2 s."""
    return tmp_path_factory.mktemp("mlflow")


def _tracker(store: Path, experiment: str) -> MLflowTracker:
    return MLflowTracker(
        experiment,
        tracking_uri=f"sqlite:///{store / 'mlflow.db'}",
        artifact_location=(store / "artifacts" / experiment).as_uri(),
    )


def test_importing_the_module_leaves_mlflow_unloaded() -> None:
    code = "import sys, anylaunch.tracker.mlflow; print('mlflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "False"


def test_metadata_artifacts_and_sources_round_trip(store: Path, tmp_path: Path) -> None:
    tracker = _tracker(store, "round-trip")
    tracker.add_metadata(RUN, lr=0.1, optimizer="adam", layers=[1, 2])
    model = tmp_path / "model.pt"
    model.write_text("weights")
    tracker.add_artifact(RUN, "model", str(model), {"format": "torchscript"})
    tracker.add_artifact(RUN, "dataset", "s3://bucket/data/v2")
    tracker.add_source(RUN, "local_cwd://s/prepare-1", artifact_name="dataset")

    # MLflow tags are strings: a str stays, other JSON data is JSON text
    assert dict(tracker.metadata(RUN)) == {"lr": "0.1", "optimizer": "adam", "layers": "[1, 2]"}
    artifacts = tracker.artifacts(RUN)
    assert artifacts["dataset"].path == "s3://bucket/data/v2"
    uploaded = artifacts["model"]
    assert uploaded.metadata == {"format": "torchscript"}
    assert uploaded.path.endswith("/artifacts/model/model.pt")
    assert Path(uploaded.path.removeprefix("file://")).read_text() == "weights"  # a real upload
    assert [(s.source_run_id, s.artifact_name) for s in tracker.sources(RUN)] == [
        ("local_cwd://s/prepare-1", "dataset")
    ]
    assert list(tracker.sources(RUN, artifact_name="parent")) == []
    assert list(tracker.run_ids()) == [RUN]
    assert list(tracker.run_ids(parent_run_id="local_cwd://s/prepare-1")) == [RUN]
    assert list(tracker.run_ids(parent_run_id="nope")) == []
    assert tracker.has_run(RUN) and not tracker.has_run("local_cwd://s/other-1")
    assert dict(tracker.metadata("local_cwd://s/other-1")) == {}

    # the run is MLflow's active run, as in TorchX: mlflow.log_* in the job goes to it
    mlflow.log_metric("loss", 0.25)
    run = tracker.get_run(RUN)
    assert run.info.run_name == RUN and run.data.metrics == {"loss": 0.25}
    assert tracker.get_run_id(RUN) == run.info.run_id
    with pytest.raises(TrackerError, match="is active in this process"):
        tracker.get_run("local_cwd://s/other-1")

    tracker.close()
    assert mlflow.active_run() is None
    assert mlflow.MlflowClient(tracker.tracking_uri).get_run(run.info.run_id).info.status == (
        "FINISHED"
    )
    # a second tracker (another replica, a reader) finds the same run by its name
    again = _tracker(store, "round-trip")
    assert again.experiment_id == tracker.experiment_id
    assert again.get_run_id(RUN) == run.info.run_id
    again.close()


@dataclasses.dataclass
class Inner:
    foo: str = "bar"


@dataclasses.dataclass
class Config:
    i: int = 1
    s: str = "string"
    names: list[str] = dataclasses.field(default_factory=lambda: ["a", "b"])
    inners: list[Inner] = dataclasses.field(
        default_factory=lambda: [Inner("hello"), Inner("world")]
    )
    inner: Inner = dataclasses.field(default_factory=Inner)


def test_log_params_flat_flattens_a_hydra_style_config(store: Path) -> None:
    tracker = _tracker(store, "params")
    tracker.log_params_flat(RUN, Config())
    assert tracker.get_run(RUN).data.params == {
        "i": "1",
        "s": "string",
        "names": "['a', 'b']",
        "inners._0.foo": "hello",
        "inners._1.foo": "world",
        "inner.foo": "bar",
    }
    tracker.close()


def test_create_tracker_reads_its_section_and_the_experiment_env(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANYLAUNCHCONFIG", raising=False)
    (tmp_path / ".anylaunchconfig").write_text(
        "[tracker:mlflow]\nconfig = ignored\nexperiment_name = from-config\n"
        f"tracking_uri = sqlite:///{store / 'mlflow.db'}\n"
    )
    assert create_tracker(str(tmp_path)).experiment_name == "from-config"
    monkeypatch.setenv(ENV_ANYLAUNCH_TRACKING_EXPERIMENT_NAME, "from-env")
    assert create_tracker(str(tmp_path)).experiment_name == "from-env"

    (tmp_path / ".anylaunchconfig").write_text("[tracker:mlflow]\ntracking_url = x\n")
    with pytest.raises(InvalidSpecError, match="Did you mean 'tracking_uri'"):
        create_tracker(str(tmp_path))
    with pytest.raises(InvalidSpecError, match="is not a directory"):
        create_tracker(str(tmp_path / "nope"))


def test_bad_arguments_and_an_unusable_store_raise_the_projects_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match=r"MLflowTracker\.experiment_name"):
        MLflowTracker("", tracking_uri=f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(TrackerError, match="could not open the experiment in the tracking store"):
        MLflowTracker("e", tracking_uri="nosuchscheme://nowhere")


JOB = """
from anylaunch.tracker import AppRun

run = AppRun.run_from_env()
run.add_metadata(epochs=3)
run.add_artifact("checkpoint", "s3://bucket/ckpt-3")
print("tracked as", run.job_id())
"""


def test_a_job_tracks_into_mlflow_through_its_env(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the launcher names the factory and its config dir; the job builds the tracker itself
    config_dir = tmp_path / "mlflow-config"
    config_dir.mkdir()
    (config_dir / ".anylaunchconfig").write_text(
        f"[tracker:mlflow]\nexperiment_name = jobs\ntracking_uri = sqlite:///{store / 'mlflow.db'}\n"
    )
    monkeypatch.delenv("ANYLAUNCHCONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    factory = "anylaunch.tracker.mlflow:create_tracker"
    monkeypatch.setenv("ANYLAUNCH_TRACKERS", factory)
    monkeypatch.setenv(
        "ANYLAUNCH_TRACKER_ANYLAUNCH_TRACKER_MLFLOW_CREATE_TRACKER_CONFIG", str(config_dir)
    )
    role = Role(
        "trainer",
        image=".",
        entrypoint=sys.executable,
        args=["-c", JOB],
        resource=Resource(cpu=1, gpu=0, memMB=128),
    )
    with get_runner("mlflow-test") as runner:
        handle = runner.run(AppDef("train", [role]), "local_cwd", parent_run_id="sweep-9")
        status = runner.wait(handle, wait_interval=0.2, timeout=180)
    assert status is not None and status.state == AppState.SUCCEEDED, status

    reader = _tracker(store, "jobs")
    assert dict(reader.metadata(handle)) == {"epochs": "3"}
    assert reader.artifacts(handle)["checkpoint"].path == "s3://bucket/ckpt-3"
    assert list(reader.run_ids(parent_run_id="sweep-9")) == [handle]
    # the AppRun API reads it back too
    assert [s.parent.id for s in AppRun(handle, [reader]).sources()] == ["sweep-9"]
    # and so does `anylaunch tracker`, in a process of its own configured the same way
    env = {
        "ANYLAUNCH_TRACKERS": factory,
        "ANYLAUNCH_TRACKER_ANYLAUNCH_TRACKER_MLFLOW_CREATE_TRACKER_CONFIG": str(config_dir),
    }
    (tmp_path / "reader").mkdir()
    listed = Cli(tmp_path / "reader")("tracker", "list", "metadata", "--json", handle, env=env)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"epochs": "3"}
