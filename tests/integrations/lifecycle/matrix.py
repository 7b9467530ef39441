"""What every engine's matrix test shares: the plugin's registration, a scenario's faults, the
app deleted underneath, and the checks of the outcome against the behaviour table.

An engine's test runs a scenario through the engine inside :func:`scenario_run`, giving it a
function that reads the handles the engine published (Airflow XCom, Prefect flow-run labels,
Dagster run tags), maps the engine's result to an :class:`Outcome` and calls :func:`check`,
which asserts the kind of outcome, the failure text, the warnings, that exactly one app was
launched, and the app's final state read through a fresh Runner from the real backend (never
through the faulted status API).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from anylaunch.specs import AppState
from anylaunch.specs.api import AppStatus, parse_app_handle
from tests.integrations.lifecycle.faulty_local import (
    BACKEND,
    FAULTS_ENV,
    INJECTED,
    read_rules,
    status_api,
    write_rules,
)
from tests.integrations.lifecycle.scenarios import (
    SCENARIOS,
    SESSION_TOKEN,
    SESSION_TOKEN_ENV,
    Kind,
    Scenario,
)

REPO = Path(__file__).resolve().parents[3]
#: A safety net for waits on a loaded machine, never a timing assertion.
DEADLINE_S = 120.0
#: The plugin's distribution, as an installer would lay it out.
DIST_INFO = "faulty_local_plugin-0.dist-info"
ENTRY_POINT = f"{BACKEND} = tests.integrations.lifecycle.faulty_local:create_scheduler"

__all__ = [
    "DEADLINE_S",
    "SCENARIOS",
    "Outcome",
    "Run",
    "check",
    "faulty_local_plugin",
    "plugin_site",
    "prepare",
    "real_handle",
    "scenario_run",
]


# --- the plugin ------------------------------------------------------------------------------


@functools.cache
def plugin_site() -> Path:
    """A directory holding the ``faulty_local`` plugin's dist-info (its entry point), as an
    installer lays it out; made once per test session."""
    site = Path(tempfile.mkdtemp(prefix="faulty-local-site-"))
    atexit.register(shutil.rmtree, site, True)
    dist = site / DIST_INFO
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: faulty_local_plugin\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(f"[anylaunch.schedulers]\n{ENTRY_POINT}\n")
    return site


@pytest.fixture(scope="module")
def faulty_local_plugin() -> Iterator[None]:
    """Puts the plugin on ``sys.path`` and ``PYTHONPATH`` (for this process, its threads, the
    Airflow trigger and any subprocess) while a matrix module runs; other tests never see it."""
    from anylaunch.schedulers import get_scheduler_factories

    site = plugin_site()
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(site))
        mp.setenv(SESSION_TOKEN_ENV, SESSION_TOKEN)
        inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        mp.setenv("PYTHONPATH", os.pathsep.join([str(site), str(REPO), *inherited]))
        importlib.invalidate_caches()  # importlib.metadata caches the paths it has searched
        assert BACKEND in get_scheduler_factories(), sys.path[:3]
        yield
    importlib.invalidate_caches()


def prepare(
    scenario: Scenario,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """Everything a scenario needs before its engine runs: its backend (the Slurm cluster for
    the held job) and its fault file. Returns the fault file."""
    if scenario.scheduler == "slurm":
        request.getfixturevalue("slurm_cluster")
    faults = tmp_path / "faults"
    write_rules(faults, scenario.fault_rules())  # also when empty: its lock orders a delete
    monkeypatch.setenv(FAULTS_ENV, str(faults))
    return faults


# --- a run -----------------------------------------------------------------------------------


def real_handle(handle: str) -> str:
    """The handle on the real backend: a ``faulty_local`` app is a local_cwd app.

    >>> real_handle("faulty_local://s/a-1"), real_handle("slurm://s/42")
    ('local_cwd://s/a-1', 'slurm://s/42')
    """
    backend, session, app_id = parse_app_handle(handle)
    return f"local_cwd://{session}/{app_id}" if backend == BACKEND else handle


def _real_backend(scenario: Scenario) -> str:
    return "local_cwd" if scenario.scheduler == BACKEND else scenario.scheduler


def _status(handle: str) -> AppStatus | None:
    from anylaunch.runner import get_runner

    with get_runner() as runner:
        return runner.status(real_handle(handle))


#: The ids of the apps earlier runs launched: a backend's listing may lag (Slurm's does), so
#: an app of an earlier run can first show up during a later run of the same scenario.
_EARLIER_APPS: set[str] = set()


def _launched(scenario: Scenario) -> set[str]:
    """The ids of this scenario's apps the real backend knows (but those of earlier runs)."""
    from anylaunch.runner import get_runner

    with get_runner() as runner:
        listed = runner.list(_real_backend(scenario))
    return {
        a.app_id
        for a in listed
        if a.name == scenario.app_name or a.app_id.startswith(f"{scenario.app_name}-")
    } - _EARLIER_APPS


@dataclass
class Outcome:
    """What an engine made of a scenario."""

    kind: Kind
    #: the failure text (the exception's or the failure's); "" on success
    text: str = ""
    #: the engine's warning records
    warnings: list[str] = field(default_factory=list)


@dataclass
class Run:
    """One scenario through one engine."""

    scenario: Scenario
    faults: Path
    #: reads the handles the engine has published so far (may raise while the engine writes)
    published: Callable[[], set[str]]
    before_published: set[str] = field(default_factory=set)
    before_apps: set[str] = field(default_factory=set)
    #: the app the test deleted underneath the engine
    deleted: list[str] = field(default_factory=list)
    #: what went wrong in the deleter thread
    errors: list[BaseException] = field(default_factory=list)

    def new_handles(self) -> set[str]:
        return self.published() - self.before_published

    def handle(self) -> str:
        """The handle the engine published for this run (exactly one)."""
        new = self.new_handles()
        assert len(new) == 1, f"{self.scenario.name}: the engine published {sorted(new)}"
        return next(iter(new))


def _wait_for(what: str, check: Callable[[], object], stop: threading.Event) -> object:
    deadline = time.monotonic() + DEADLINE_S
    while not stop.is_set():
        try:
            value = check()
        except Exception:  # the engine may be writing what we read (a locked SQLite)
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {DEADLINE_S:g}s waiting for {what}")
        time.sleep(0.05)
    return None


def _delete_when_running(run: Run, stop: threading.Event) -> None:
    """Deletes the app through a Runner once the engine published its handle and it runs."""
    from anylaunch.runner import get_runner

    try:
        if not _wait_for("the engine to publish the handle", run.new_handles, stop):
            return
        handle = sorted(run.new_handles())[0]

        def running() -> bool:
            status = _status(handle)
            return status is not None and status.state == AppState.RUNNING

        if not _wait_for(f"{handle} to run", running, stop):
            return
        # Holding the status API's lock, no status call runs while the app is deleted: the
        # engine's next call finds the app unknown, never half-deleted (cancelled, its record
        # still there), as when a scheduler purges a record at once.
        with status_api(str(run.faults)), get_runner() as runner:
            runner.delete(handle)
        run.deleted.append(handle)
    except BaseException as e:  # reported by check()
        run.errors.append(e)


@contextlib.contextmanager
def scenario_run(
    scenario: Scenario, faults: Path, published: Callable[[], set[str]]
) -> Iterator[Run]:
    """Around one engine run: snapshots what existed before, deletes the app underneath the
    engine if the scenario says so, and afterwards cancels whatever still runs (a test that
    failed must not leave a held Slurm job or a sleeping app behind)."""
    run = Run(scenario, faults, published, published(), _launched(scenario))
    stop = threading.Event()
    deleter = threading.Thread(target=_delete_when_running, args=(run, stop), daemon=True)
    if scenario.delete_when_running:
        deleter.start()
    try:
        yield run
    finally:
        stop.set()
        if deleter.is_alive():
            deleter.join(timeout=DEADLINE_S)
        _cancel_leftovers(run)


def _cancel_leftovers(run: Run) -> None:
    from anylaunch.runner import get_runner

    backend = _real_backend(run.scenario)
    with contextlib.suppress(Exception), get_runner() as runner:
        launched = _launched(run.scenario) - run.before_apps
        with contextlib.suppress(Exception):
            launched |= {parse_app_handle(h).app_id for h in run.new_handles()}
        _EARLIER_APPS.update(launched)
        for app_id in launched:
            handle = f"{backend}://anylaunch/{app_id}"
            status = runner.status(handle)
            if status is not None and not status.is_terminal():
                runner.cancel(handle)


# --- the checks ------------------------------------------------------------------------------


def check(run: Run, outcome: Outcome) -> None:
    """Asserts the behaviour table's cell: the engine's outcome and the app's final state."""
    scenario = run.scenario
    assert not run.errors, f"deleting the app underneath failed: {run.errors!r}"
    assert outcome.kind == scenario.expected_kind, (
        f"{scenario.name}: the engine's outcome is {outcome.kind!r}, the table says "
        f"{scenario.expected_kind!r}; its text:\n{outcome.text[-3000:]}"
    )
    if scenario.expected_text:
        assert scenario.expected_text in outcome.text, outcome.text[-3000:]
    if scenario.expect_warnings:
        injected = [w for w in outcome.warnings if INJECTED in w]
        assert injected, f"no warning about the failed status calls in {outcome.warnings}"
    if scenario.fault and scenario.fault.startswith("errors"):
        # the engine really met the errors (and recovered from all of them)
        assert read_rules(run.faults) == [f"{scenario.app_name} errors 0"]

    handle = run.handle()
    app_id = parse_app_handle(handle).app_id
    expected = set() if scenario.expected_state is None else {app_id}
    deadline = time.monotonic() + DEADLINE_S
    launched = _launched(scenario) - run.before_apps
    while launched != expected and time.monotonic() < deadline:
        time.sleep(0.5)  # a backend's listing may lag behind its status
        launched = _launched(scenario) - run.before_apps
    assert launched == expected, f"{scenario.name}: launched {sorted(launched)}, not {expected}"
    if scenario.expected_state is None:  # deleted underneath: the scheduler forgot it
        assert run.deleted == [handle], f"the test never deleted {handle}: {run.deleted}"
        assert _status(handle) is None
        return
    status = _status(handle)
    deadline = time.monotonic() + DEADLINE_S
    while (status is None or not status.is_terminal()) and time.monotonic() < deadline:
        time.sleep(0.2)  # a cancel takes effect asynchronously
        status = _status(handle)
    assert status is not None, f"{handle} is gone"
    assert status.state == scenario.expected_state, (
        f"{scenario.name}: app {handle} ended {status.state.name}, the table says "
        f"{scenario.expected_state.name}"
    )
