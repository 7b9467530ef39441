"""One scenario matrix for every engine: the same apps and faults, the same expected app
state and the same kind of engine outcome (the behaviour table in docs/lifecycle.md).

Engines: Airflow sync, Airflow deferred (its trigger), Prefect, Dagster. Each engine's test
module runs every scenario through the engine and maps the engine's result to an outcome kind
(``success``, ``failed``, ``timeout``, ``lost``); this module holds what they share.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from anylaunch.specs import AppState
from tests.integrations.lifecycle.faulty_local import BACKEND, FAULTS_ENV

#: A safety net for waits on a loaded machine, never a timing assertion.
DEADLINE_S = 90.0


@dataclass(frozen=True)
class Scenario:
    """One row of the matrix."""

    name: str
    #: the app's python code
    code: str
    #: where it runs: the faulty local plugin, or the real Slurm cluster (a real queue hold)
    scheduler: str = BACKEND
    cfg: dict[str, Any] = field(default_factory=dict)
    fault: dict[str, int] | None = None
    startup_timeout: float | None = None
    run_timeout: float | None = None
    #: delete the app (through a Runner) once it runs
    delete_when_running: bool = False
    #: the app's final state (None: the scheduler no longer knows it)
    expected_state: AppState | None = AppState.SUCCEEDED
    #: the kind of engine outcome
    expected_kind: str = "success"

    @property
    def app_name(self) -> str:
        return f"matrix-{self.name.replace('_', '-')}"


SLEEP = "import time; print('running', flush=True); time.sleep(60)"
SCENARIOS = {
    s.name: s
    for s in (
        Scenario("success", "print('hello from the matrix', flush=True)"),
        Scenario(
            "nonzero_exit",
            "import sys; print('failing', flush=True); sys.exit(3)",
            expected_state=AppState.FAILED,
            expected_kind="failed",
        ),
        Scenario(
            "startup_timeout",
            "",  # never starts: Slurm holds the job (BeginTime) for an hour
            scheduler="slurm",
            cfg={"sbatch_args": ["--begin=now+3600"]},
            startup_timeout=2,
            expected_state=AppState.CANCELLED,
            expected_kind="timeout",
        ),
        Scenario(
            "run_timeout",
            SLEEP,
            run_timeout=2,
            expected_state=AppState.CANCELLED,
            expected_kind="timeout",
        ),
        Scenario(
            "errors_then_recovery",
            "import time; print('working', flush=True); time.sleep(3)",
            fault={"errors": 4},
        ),
        Scenario(
            "backend_gone",
            SLEEP,
            fault={"down_after": 2},
            expected_state=AppState.CANCELLED,
            expected_kind="lost",
        ),
        Scenario(
            "deleted_underneath",
            SLEEP,
            delete_when_running=True,
            expected_state=None,
            expected_kind="lost",
        ),
    )
}


def app_dict(scenario: Scenario) -> dict[str, Any]:
    """The scenario's AppDef in its dict form."""
    if scenario.scheduler == "slurm":
        role = {"name": "main", "image": "/tmp", "entrypoint": "sleep", "args": ["60"]}
        role["resource"] = {"cpu": 1, "gpu": 0, "memMB": 64}
    else:
        role = {"name": "main", "image": ".", "entrypoint": sys.executable}
        role["args"] = ["-c", scenario.code]
    return {"name": scenario.app_name, "roles": [role]}


def install_plugin(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Registers ``faulty_local`` as an entry-point plugin for this test (this process and
    its children)."""
    import importlib

    site = root / "plugin-site"
    dist = site / "anylaunch_matrix_plugin-0.0.0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: anylaunch-matrix-plugin\n")
    (dist / "entry_points.txt").write_text(
        f"[anylaunch.schedulers]\n{BACKEND} = tests.integrations.lifecycle.faulty_local:"
        "create_scheduler\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", f"{site}:{Path.cwd()}")
    importlib.invalidate_caches()


def prepare(
    name: str, request: pytest.FixtureRequest, root: Path, monkeypatch: pytest.MonkeyPatch
) -> Scenario:
    """Everything a scenario needs before its engine runs: its backend (Slurm for the held
    job), the faulty plugin and the scenario's faults. Returns the scenario."""
    scenario = SCENARIOS[name]
    if scenario.scheduler == "slurm":
        request.getfixturevalue("slurm_cluster")
    install_plugin(root, monkeypatch)
    set_faults(root, scenario, monkeypatch)
    return scenario


def set_faults(root: Path, scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    path = root / "faults.json"
    path.write_text(json.dumps({scenario.app_name: scenario.fault} if scenario.fault else {}))
    monkeypatch.setenv(FAULTS_ENV, str(path))


def _apps(scenario: Scenario) -> dict[str, Any]:
    """This scenario's apps the scheduler knows: handle -> ListAppResponse."""
    from anylaunch.runner import get_runner

    with get_runner() as runner:
        listed = runner.list(scenario.scheduler)
    return {
        a.app_handle: a
        for a in listed
        if a.name == scenario.app_name or a.app_id.startswith(f"{scenario.app_name}-")
    }


@dataclass
class Run:
    """One scenario run through one engine: what existed before, and a deleter thread."""

    scenario: Scenario
    before: dict[str, Any]
    deleted: list[str] = field(default_factory=list)

    def new_apps(self) -> dict[str, Any]:
        return {h: a for h, a in _apps(self.scenario).items() if h not in self.before}


@contextlib.contextmanager
def scenario_run(scenario: Scenario) -> Iterator[Run]:
    """Around one engine run: snapshots the scenario's apps, and for ``delete_when_running``
    deletes the app (through a Runner, as an operator would) once it runs."""
    run = Run(scenario, _apps(scenario))
    stop = threading.Event()

    def delete_when_running() -> None:
        from anylaunch.runner import get_runner

        deadline = time.monotonic() + DEADLINE_S
        while not stop.is_set() and time.monotonic() < deadline:
            for handle, app in run.new_apps().items():
                if app.state == AppState.RUNNING:
                    with get_runner() as runner:
                        runner.delete(handle)
                    run.deleted.append(handle)
                    return
            time.sleep(0.1)

    thread = threading.Thread(target=delete_when_running, daemon=True)
    if scenario.delete_when_running:
        thread.start()
    try:
        yield run
    finally:
        stop.set()
        if thread.is_alive():
            thread.join(timeout=10)


def check(run: Run, kind: str) -> None:
    """Asserts the scenario's expected engine outcome kind and final app state."""
    scenario = run.scenario
    assert kind == scenario.expected_kind, f"{scenario.name}: engine outcome {kind}"
    if scenario.expected_state is None:  # deleted underneath: the scheduler forgot it
        assert run.deleted, "the app was never seen running"
        assert run.new_apps() == {}
        return
    deadline = time.monotonic() + DEADLINE_S
    while True:
        apps = run.new_apps()
        assert len(apps) == 1, f"{scenario.name}: launched {sorted(apps)}"
        (app,) = apps.values()
        if app.state == scenario.expected_state or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # a cancel takes effect asynchronously
    assert app.state == scenario.expected_state, f"{scenario.name}: app ended {app.state.name}"
