"""The tracker API and its fsspec backend on a temporary directory: records, lineage, the
configuration a launcher hands its jobs, and every bad input refused with the field named."""

from __future__ import annotations

import functools
import threading
from pathlib import Path

import pytest

from anylaunch.runner import get_runner
from anylaunch.runner.config import load_sections
from anylaunch.specs import AppDef, Resource, Role
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.tracker import AppRun, app_run_from_env
from anylaunch.tracker.api import (
    ENV_ANYLAUNCH_JOB_ID,
    ENV_ANYLAUNCH_PARENT_RUN_ID,
    ENV_ANYLAUNCH_TRACKERS,
    AppRunTrackableSource,
    TrackerArtifact,
    TrackerSource,
    build_trackers,
    tracker_config_env_var_name,
    trackers_from_environ,
)
from anylaunch.tracker.backend.fsspec import FsspecTracker, create
from anylaunch.tracker.config import configured_trackers, tracker_env
from anylaunch.tracker.errors import TrackerLoadError

RUN = "local_cwd://team/train-1a2b"


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No tracker, job id or config file of the caller leaks in; the cwd is an empty dir."""
    for name in (ENV_ANYLAUNCH_TRACKERS, ENV_ANYLAUNCH_JOB_ID, ENV_ANYLAUNCH_PARENT_RUN_ID):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANYLAUNCHCONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def tracker(tmp_path: Path) -> FsspecTracker:
    return FsspecTracker(str(tmp_path / "tracking"))


# --- the fsspec backend -------------------------------------------------------------------------


def test_metadata_merges_in_write_order(tracker: FsspecTracker) -> None:
    assert dict(tracker.metadata(RUN)) == {}
    assert not tracker.has_run(RUN)
    tracker.add_metadata(RUN, lr=0.1, epochs=3)
    tracker.add_metadata(RUN, lr=0.01, layers=[64, 32], opt={"name": "adam"})
    assert dict(tracker.metadata(RUN)) == {
        "lr": 0.01,
        "epochs": 3,
        "layers": [64, 32],
        "opt": {"name": "adam"},
    }
    assert tracker.has_run(RUN)
    assert list(tracker.run_ids()) == [RUN]


def test_artifacts_by_name_last_write_wins(tracker: FsspecTracker) -> None:
    tracker.add_artifact(RUN, "model", "/tmp/old.pt")
    tracker.add_artifact(RUN, "model", "s3://b/model.pt", {"format": "torchscript"})
    tracker.add_artifact(RUN, "eval report", "/tmp/eval.json")
    assert dict(tracker.artifacts(RUN)) == {
        "eval report": TrackerArtifact("eval report", "/tmp/eval.json", None),
        "model": TrackerArtifact("model", "s3://b/model.pt", {"format": "torchscript"}),
    }


def test_sources_and_the_parent_filter(tracker: FsspecTracker) -> None:
    child, other = "local_cwd://team/eval-9", "local_cwd://team/other-1"
    tracker.add_source(child, RUN, "model")
    tracker.add_source(child, "s3://b/data/v2", "dataset")
    tracker.add_source(child, RUN, "model")  # the same relation twice is kept once
    tracker.add_metadata(other, x=1)
    assert list(tracker.sources(child)) == [
        TrackerSource(RUN, "model"),
        TrackerSource("s3://b/data/v2", "dataset"),
    ]
    assert list(tracker.sources(child, artifact_name="dataset")) == [
        TrackerSource("s3://b/data/v2", "dataset")
    ]
    assert list(tracker.run_ids()) == [child, other]
    assert list(tracker.run_ids(parent_run_id=RUN)) == [child]
    assert list(tracker.run_ids(parent_run_id="nobody")) == []


def test_any_run_id_round_trips(tracker: FsspecTracker) -> None:
    odd = ["kubernetes://s/ns:job-1", "ünïcode/ids %2F ok", "." * 3, "x" * 600]
    for i, run_id in enumerate(odd):
        tracker.add_metadata(run_id, i=i)
    assert sorted(tracker.run_ids()) == sorted(odd)
    assert [dict(tracker.metadata(r)) for r in odd] == [{"i": i} for i in range(len(odd))]


def test_a_write_under_way_is_not_read(tracker: FsspecTracker, tmp_path: Path) -> None:
    tracker.add_metadata(RUN, done=True)
    folder = next((tmp_path / "tracking").iterdir()) / "metadata"
    (folder / ".00000000000000000009-1-x.json.1-1.tmp").write_text('{"half": ')
    (tmp_path / "tracking" / ".tmp-dir").mkdir()
    assert dict(tracker.metadata(RUN)) == {"done": True}
    assert list(tracker.run_ids()) == [RUN]


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    # replicas of one job write the same run at once, each with its own tracker object
    def replica(rank: int) -> None:
        mine = FsspecTracker(str(tmp_path / "tracking"))
        for step in range(5):
            mine.add_metadata(RUN, **{f"r{rank}_s{step}": step})

    threads = [threading.Thread(target=replica, args=(r,)) for r in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = FsspecTracker(str(tmp_path / "tracking")).metadata(RUN)
    assert dict(got) == {f"r{r}_s{s}": s for r in range(6) for s in range(5)}


# --- AppRun ----------------------------------------------------------------------------------


def test_app_run_writes_every_backend_and_reads_the_first(tmp_path: Path) -> None:
    first, second = FsspecTracker(str(tmp_path / "a")), FsspecTracker(str(tmp_path / "b"))
    run = AppRun(RUN, iter([first, second]))  # an iterator is kept as a list
    run.add_metadata(lr=0.1)
    run.add_artifact("model", tmp_path / "model.pt", {"bytes": 12})
    run.add_source("s3://b/data", "dataset")
    for t in (first, second):
        assert dict(t.metadata(RUN)) == {"lr": 0.1}
        assert t.artifacts(RUN)["model"].path == str(tmp_path / "model.pt")
    second.add_source(RUN, "only-in-second")
    [source] = run.sources()
    assert source == AppRunTrackableSource(AppRun("s3://b/data", [first, second]), "dataset")
    assert source.parent.job_id() == "s3://b/data"


def test_run_from_env_builds_the_launchers_trackers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(tmp_path / "tracking")
    assert app_run_from_env().job_id() == "<UNDEFINED>"
    assert list(app_run_from_env().backends) == []
    monkeypatch.setenv(ENV_ANYLAUNCH_JOB_ID, RUN)
    monkeypatch.setenv(ENV_ANYLAUNCH_TRACKERS, "fsspec")
    monkeypatch.setenv(tracker_config_env_var_name("fsspec"), root)
    monkeypatch.setenv(ENV_ANYLAUNCH_PARENT_RUN_ID, "airflow:dag/run-7/train")
    run = AppRun.run_from_env()
    assert run is AppRun.run_from_env()  # built once per environment
    assert run.job_id() == RUN
    [backend] = run.backends
    assert isinstance(backend, FsspecTracker) and backend.root_dir == root
    assert list(FsspecTracker(root).run_ids(parent_run_id="airflow:dag/run-7/train")) == [RUN]


def test_no_tracker_configured_tracks_nothing_but_still_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV_ANYLAUNCH_JOB_ID, RUN)
    run = AppRun.run_from_env()
    assert run.job_id() == RUN and list(run.backends) == [] and list(run.sources()) == []
    run.add_metadata(lr=0.1)
    with pytest.raises(InvalidSpecError, match=r"add_metadata\.loss"):
        run.add_metadata(loss=float("nan"))


# --- bad input ----------------------------------------------------------------------------------

BAD_CALLS = {
    "nan": (lambda r: r.add_metadata(loss=float("nan")), "add_metadata.loss"),
    "inf in a list": (
        lambda r: r.add_metadata(hist=[1.0, float("-inf")]),
        r"add_metadata.hist\[1\]",
    ),
    "object": (lambda r: r.add_metadata(model=object()), "add_metadata.model"),
    "int dict key": (lambda r: r.add_metadata(by_epoch={1: 0.5}), "add_metadata.by_epoch.<key>"),
    "empty key": (lambda r: r.add_metadata(**{"": 1}), "add_metadata.<key>"),
    "NUL in key": (lambda r: r.add_metadata(**{"a\0b": 1}), "add_metadata.<key>"),
    "empty name": (lambda r: r.add_artifact("", "/tmp/x"), "add_artifact.name"),
    "name not str": (lambda r: r.add_artifact(3, "/tmp/x"), "add_artifact.name"),
    "NUL in path": (lambda r: r.add_artifact("m", "/tmp/\0x"), "add_artifact.path"),
    "path not str": (lambda r: r.add_artifact("m", 7), "add_artifact.path"),
    "newline in path": (lambda r: r.add_artifact("m", "/tmp/a\nb"), "add_artifact.path"),
    "artifact metadata": (lambda r: r.add_artifact("m", "/x", ["a"]), "add_artifact.metadata"),
    "artifact metadata value": (
        lambda r: r.add_artifact("m", "/x", {"n": float("nan")}),
        "add_artifact.metadata.n",
    ),
    "source id": (lambda r: r.add_source(None), "add_source.source_id"),
    "source relation": (lambda r: r.add_source("x", ""), "add_source.artifact_name"),
}


@pytest.mark.parametrize("case", BAD_CALLS, ids=list(BAD_CALLS))
@pytest.mark.parametrize("through", ["AppRun", "FsspecTracker"])
def test_bad_input_is_refused_naming_the_field(
    case: str, through: str, tracker: FsspecTracker
) -> None:
    call, field = BAD_CALLS[case]
    run: object = AppRun(RUN, [])
    if through == "FsspecTracker":  # the backend checks too: it is public on its own
        run = _Direct(tracker)
    with pytest.raises(InvalidSpecError, match=rf"^{field}=.* is invalid: .* Fix: "):
        call(run)
    assert list(tracker.run_ids()) == []  # nothing was written


class _Direct:
    """AppRun's methods, calling the tracker directly."""

    def __init__(self, tracker: FsspecTracker) -> None:
        self.t = tracker

    def add_metadata(self, **kw: object) -> None:
        self.t.add_metadata(RUN, **kw)

    def add_artifact(self, *args: object) -> None:
        self.t.add_artifact(RUN, *args)  # type: ignore[arg-type]

    def add_source(self, *args: object) -> None:
        self.t.add_source(RUN, *args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: AppRun("", []), "AppRun.id"),
        (lambda: AppRun("a\0b", []), "AppRun.id"),
        (lambda: AppRun(RUN, [object()]), r"AppRun.backends\[0\]"),
        (lambda: create(None), "fsspec tracker config"),
        (lambda: create("relative/dir"), "fsspec tracker config"),
        (lambda: create("memory://tracking"), "fsspec tracker config"),
        (lambda: FsspecTracker("/tmp/a\0"), "FsspecTracker.root_dir"),
        (lambda: FsspecTracker("/tmp/t").metadata("x\ny"), "run_id"),
        (lambda: list(FsspecTracker("/tmp/t").run_ids(parent="x")), "run_ids.parent"),
    ],
)
def test_bad_construction_is_refused(make: object, field: str) -> None:
    with pytest.raises(InvalidSpecError, match=rf"^{field}=.* is invalid: .* Fix: "):
        make()  # type: ignore[operator]


def test_unknown_and_broken_factories() -> None:
    with pytest.raises(InvalidSpecError, match="Did you mean 'fsspec'"):
        build_trackers({"fspec": "/tmp/t"})
    with pytest.raises(TrackerLoadError, match=r"importing it failed .*ModuleNotFoundError"):
        build_trackers({"no_such_pkg.mod:create": None})
    with pytest.raises(TrackerLoadError, match="returned a str, not a TrackerBase"):
        build_trackers({"json:dumps": None})
    with pytest.raises(TrackerLoadError, match="its factory raised TypeError"):
        build_trackers({"builtins:iter": None})
    with pytest.raises(InvalidSpecError, match="ANYLAUNCH_TRACKERS='a b'"):
        trackers_from_environ({ENV_ANYLAUNCH_TRACKERS: "a b"})


# --- what a launcher hands its jobs ---------------------------------------------------------------


def _config(tmp_path: Path, text: str) -> functools.partial[dict[str, dict[str, str]]]:
    (tmp_path / "cfg").mkdir(exist_ok=True)
    (tmp_path / "cfg" / ".anylaunchconfig").write_text(text)
    return functools.partial(load_sections, dirs=[str(tmp_path / "cfg")])


def test_config_file_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANYLAUNCHCONFIG")
    loader = _config(
        tmp_path,
        "[anylaunch:tracker]\nfs = fsspec\nml = my_pkg.tracking:create\n"
        "[tracker:fs]\nconfig = /shared/tracking\n[tracker:ml]\nconfig = http://mlflow:5000\n",
    )
    assert configured_trackers(loader, {}) == {
        "fsspec": "/shared/tracking",
        "my_pkg.tracking:create": "http://mlflow:5000",
    }
    # the env picks names (of the section, or factories) and overrides a config
    env = {ENV_ANYLAUNCH_TRACKERS: "ml", "ANYLAUNCH_TRACKER_ML_CONFIG": "http://other"}
    assert configured_trackers(loader, env) == {"my_pkg.tracking:create": "http://other"}
    assert configured_trackers(loader, {ENV_ANYLAUNCH_TRACKERS: ""}) == {}
    assert tracker_env(configured_trackers(loader, {})) == {
        "ANYLAUNCH_TRACKERS": "fsspec,my_pkg.tracking:create",
        "ANYLAUNCH_TRACKER_FSSPEC_CONFIG": "/shared/tracking",
        "ANYLAUNCH_TRACKER_MY_PKG_TRACKING_CREATE_CONFIG": "http://mlflow:5000",
    }
    # what the job reads back is what the launcher configured
    job_env = tracker_env(configured_trackers(loader, {ENV_ANYLAUNCH_TRACKERS: "fs"}))
    [built] = trackers_from_environ(job_env)
    assert isinstance(built, FsspecTracker) and built.root_dir == "/shared/tracking"


@pytest.mark.parametrize(
    ("text", "env", "match"),
    [
        ("[tracker:fs]\nconfg = /x\n", {}, r"\[tracker:fs\] confg='<not shown>'.*Did you mean"),
        ("[anylaunch:tracker]\nfs =\n", {}, r"\[anylaunch:tracker\] fs='' .*gives no factory"),
        ("[anylaunch:tracker]\nfs = not a factory\n", {}, r"\[anylaunch:tracker\] fs="),
        ("[anylaunch:tracker]\nfs = fsspec\n", {}, r"\[tracker:fs\] config \(or ANYLAUNCH_TRACK"),
        ("[anylaunch:tracker]\nfs = fsspec\n[tracker:fs]\nconfig = rel\n", {}, "relative path"),
        (
            "[anylaunch:tracker]\na = fsspec\nb = fsspec\n"
            "[tracker:a]\nconfig = /a\n[tracker:b]\nconfig = /b\n",
            {},
            "uses the factory 'fsspec' of another configured tracker",
        ),
        ("", {ENV_ANYLAUNCH_TRACKERS: "mine, x;y"}, "ANYLAUNCH_TRACKERS='x;y'"),
        (
            "",
            {ENV_ANYLAUNCH_TRACKERS: "fsspec", "ANYLAUNCH_TRACKER_FSSPEC_CONFIG": "memory://t"},
            "ANYLAUNCH_TRACKER_FSSPEC_CONFIG='memory://t'",
        ),
    ],
)
def test_bad_configuration_fails_at_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, env: dict[str, str], match: str
) -> None:
    monkeypatch.delenv("ANYLAUNCHCONFIG")
    with pytest.raises(InvalidSpecError, match=match):
        configured_trackers(_config(tmp_path, text), env)


def _app() -> AppDef:
    roles = [
        Role(name, image=".", entrypoint="true", resource=Resource(cpu=1, gpu=0, memMB=64))
        for name in ("trainer", "evaluator")
    ]
    roles[1].env[ENV_ANYLAUNCH_TRACKERS] = ""  # this role opts out: the app's own env wins
    return AppDef("train", roles)


def _envs(info: object) -> list[dict[str, str]]:
    """Each role's env in local_cwd's native request (first replica)."""
    return [role.replicas[0].env for role in info.request.roles]  # type: ignore[attr-defined]


def test_dryrun_hands_the_trackers_to_every_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with get_runner("team") as runner:
        plain = _envs(runner.dryrun(_app(), "local_cwd"))[0]
        assert ENV_ANYLAUNCH_TRACKERS not in plain
        cfg = tmp_path / "tracked.anylaunchconfig"
        cfg.write_text(
            f"[anylaunch:tracker]\nfs = fsspec\n[tracker:fs]\nconfig = {tmp_path / 't'}\n"
        )
        monkeypatch.setenv("ANYLAUNCHCONFIG", str(cfg))
        info = runner.dryrun(_app(), "local_cwd")
    trainer, evaluator = _envs(info)
    assert trainer[ENV_ANYLAUNCH_TRACKERS] == "fsspec"
    assert trainer["ANYLAUNCH_TRACKER_FSSPEC_CONFIG"] == str(tmp_path / "t")
    assert trainer[ENV_ANYLAUNCH_JOB_ID] == f"local_cwd://team/{info.request.app_id}"  # type: ignore[attr-defined]
    assert evaluator[ENV_ANYLAUNCH_TRACKERS] == ""
