"""The orphan reaper on real local_cwd apps: owners are decided by an engine's answer (here a
table standing in for the engine's API, whose own checkers are tested against real
Airflow, Prefect and Dagster in their suites)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

import anylaunch.specs as specs
from anylaunch.runner import Runner, get_runner
from anylaunch.runner.reap import OwnerState, owner_checker, owner_id, reap
from anylaunch.specs.errors import InvalidSpecError

SLEEPER = specs.AppDef(
    name="sleeper",
    roles=[
        specs.Role(
            name="s",
            image=".",
            entrypoint=sys.executable,
            args=["-c", "import time; time.sleep(300)"],
        )
    ],
)


class TableChecker:
    """The answers of an engine about its runs."""

    engine = "prefect"

    def __init__(self, answers: Mapping[str, OwnerState]) -> None:
        self.answers = answers
        self.asked: list[list[str]] = []

    def check(self, owners: Sequence[str]) -> Mapping[str, OwnerState]:
        self.asked.append(list(owners))
        return {o: self.answers[o] for o in owners if o in self.answers}


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runner]:
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("ANYLAUNCH_PARENT_RUN_ID", raising=False)
    with get_runner() as runner:
        yield runner
        for app in runner.list("local_cwd"):
            runner.cancel(app.app_handle)


def _launch(runner: Runner, owner: str | None) -> str:
    handle = runner.run(SLEEPER, "local_cwd", parent_run_id=owner)
    deadline = time.monotonic() + 120
    while (status := runner.status(handle)) is None or status.state != specs.AppState.RUNNING:
        assert time.monotonic() < deadline, f"{handle} never ran: {status}"
        time.sleep(0.05)
    return handle


def _state(runner: Runner, handle: str) -> specs.AppState:
    status = runner.wait(handle, wait_interval=0.1, timeout=60)
    assert status is not None
    return status.state


def test_cancels_apps_whose_owner_ended_or_is_gone_and_keeps_the_rest(runner: Runner) -> None:
    ended, gone, alive, unknown = (owner_id("prefect", f"run-{i}") for i in range(4))
    handles = {
        name: _launch(runner, owner)
        for name, owner in [
            ("ended", ended),
            ("gone", gone),
            ("alive", alive),
            ("unknown", unknown),
            ("no owner", None),
            ("other engine", owner_id("dagster", "r1")),
        ]
    }
    checker = TableChecker(
        {ended: OwnerState.ENDED, gone: OwnerState.GONE, alive: OwnerState.ALIVE}
    )

    report = reap(runner, ["local_cwd"], [checker])

    assert sorted(report.cancelled) == sorted([handles["ended"], handles["gone"]])
    assert not report.errors
    assert checker.asked == [sorted([ended, gone, alive, unknown])]  # one batch per engine
    assert _state(runner, handles["ended"]) == specs.AppState.CANCELLED
    assert _state(runner, handles["gone"]) == specs.AppState.CANCELLED
    for kept in ("alive", "unknown", "no owner", "other engine"):
        status = runner.status(handles[kept])
        assert status is not None and status.state == specs.AppState.RUNNING, kept
    assert "2 orphan(s), 2 cancelled, 0 error(s)" in report.summary()


def test_a_dry_run_reports_and_cancels_nothing(runner: Runner) -> None:
    owner = owner_id("prefect", "gone-run")
    handle = _launch(runner, owner)
    report = reap(runner, ["local_cwd"], [TableChecker({owner: OwnerState.GONE})], dry_run=True)
    assert [(a.handle, a.action) for a in report.actions] == [(handle, "cancel")]
    assert report.cancelled == []
    status = runner.status(handle)
    assert status is not None and status.state == specs.AppState.RUNNING


def test_an_engine_that_cannot_be_asked_decides_nothing(runner: Runner) -> None:
    class Down:
        engine = "prefect"

        def check(self, owners: Sequence[str]) -> Mapping[str, OwnerState]:
            raise ConnectionError("api unreachable")

    handle = _launch(runner, owner_id("prefect", "x"))
    report = reap(runner, ["local_cwd"], [Down()])
    assert report.cancelled == [] and [a.action for a in report.actions] == ["keep"]
    status = runner.status(handle)
    assert status is not None and status.state == specs.AppState.RUNNING


def test_reapers_running_at_once_cancel_each_orphan_without_error(runner: Runner) -> None:
    owner = owner_id("prefect", "ended-run")
    handles = [_launch(runner, owner) for _ in range(3)]
    reports = []

    def one_pass() -> None:  # each reaper with its own runner, as separate processes would
        with get_runner() as own:
            reports.append(reap(own, ["local_cwd"], [TableChecker({owner: OwnerState.ENDED})]))

    threads = [threading.Thread(target=one_pass) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(reports) == 3 and not any(r.errors for r in reports)
    for handle in handles:
        assert _state(runner, handle) == specs.AppState.CANCELLED


def test_owner_ids_name_a_known_engine() -> None:
    with pytest.raises(InvalidSpecError, match="engine"):
        owner_id("luigi", "x")


# --- each engine's checker comes from its integration, through the plugin registry ----------


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )


def test_an_engines_checker_is_found_through_the_registry_and_only_that_engine_is_imported() -> (
    None
):
    proc = _python(
        """
        import json, sys
        from anylaunch.plugins import PluginType, find
        from anylaunch.runner.reap import owner_checker
        engines = sorted(find(PluginType.OWNER_CHECKER))
        before = [m for m in ("prefect", "dagster", "airflow") if m in sys.modules]
        checker = owner_checker("prefect")
        after = [m for m in ("prefect", "dagster", "airflow") if m in sys.modules]
        print(json.dumps([engines, before, after, checker.engine]))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [
        ["airflow", "dagster", "prefect"],
        [],
        ["prefect"],
        "prefect",
    ]


@pytest.mark.parametrize("engine", ["airflow", "prefect", "dagster"])
def test_a_missing_engine_names_the_extra_to_install(engine: str) -> None:
    proc = _python(
        f"""
        import sys
        sys.modules[{engine!r}] = None  # as if the engine were not installed
        from anylaunch.runner.reap import MissingEngineError, owner_checker
        try:
            owner_checker({engine!r}, airflow_url="http://localhost:1")
        except MissingEngineError as e:
            assert isinstance(e, ImportError)
            print(e)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert f"the {engine} owner checker needs the Python package '{engine}'" in proc.stdout
    assert f"pip install 'anylaunch[{engine}]'" in proc.stdout


def test_an_unknown_engine_is_rejected_with_the_known_ones() -> None:
    with pytest.raises(
        InvalidSpecError, match=r"Did you mean 'prefect'.*airflow, dagster, prefect"
    ):
        owner_checker("prefekt")


def test_a_pass_archives_the_ended_apps_nobody_watched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anylaunch.runner.archive import ARCHIVE_URL_ENV, Archive

    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv(ARCHIVE_URL_ENV, raising=False)
    archive = tmp_path / "archive"
    role = specs.Role("w", str(tmp_path), entrypoint="sh", args=["-c", "echo unwatched"])
    with get_runner("launcher") as launcher:  # launches, and never looks at it again
        handle = launcher.run(specs.AppDef("a", [role]), "local_cwd", {"archive_url": str(archive)})
    state = tmp_path / "state" / handle.rsplit("/", 1)[1] / "state.json"
    deadline = time.monotonic() + 60
    while '"SUCCEEDED"' not in (state.read_text() if state.exists() else ""):
        assert time.monotonic() < deadline, "the app did not end"
        time.sleep(0.1)
    assert not Archive(str(archive)).has(handle)
    with get_runner("reaper") as reaper:  # no archive configured: the app's env names it
        report = reap(reaper, ["local_cwd"], [])
    assert report.actions == []
    assert Archive(str(archive)).has(handle)
    assert Archive(str(archive)).log_lines(handle, "w", 0, None) == ["unwatched\n"]
