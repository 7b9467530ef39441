"""Real Dagster, in process, with real local_cwd apps, isolated per test.

Every test gets its own local_cwd state directory, working directory and HOME (no
``.anylaunchconfig`` leaks in) and an ephemeral DagsterInstance. Tests that need a run worker
in another process (termination, crash and re-execution) share a persistent instance in a
temporary DAGSTER_HOME-like directory with that process.
"""

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import List

import dagster as dg
import pytest

from anylaunch.runner import get_runner
from anylaunch.schedulers.api import ListAppResponse

# a safety net against a hung run or app, not a measurement
DEADLINE_S = 60.0

# Persistent test instances (shared with run worker processes): no telemetry.
INSTANCE_YAML = """\
telemetry:
  enabled: false
"""


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private local_cwd state dir, cwd and HOME for each test; apps a failed test left
    running are cancelled at the end."""
    state = tmp_path / "local_cwd_state"
    work = tmp_path / "work"
    home = tmp_path / "home"
    for d in (state, work, home):
        d.mkdir()
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(state))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DAGSTER_DISABLE_TELEMETRY", "1")
    for name in ("ANYLAUNCHCONFIG", "ANYLAUNCH_PARENT_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(work)
    yield tmp_path
    with get_runner() as runner:
        for app in runner.list("local_cwd"):
            if not app.state.is_terminal():
                runner.cancel(app.app_handle)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture
def instance_dir(tmp_path: Path) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(INSTANCE_YAML)
    return home


@pytest.fixture
def persistent_instance(instance_dir: Path) -> Iterator[dg.DagsterInstance]:
    from dagster._core.instance.ref import InstanceRef

    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(instance_dir))) as inst:
        yield inst


def _launched_apps() -> List[ListAppResponse]:
    with get_runner() as runner:
        return runner.list("local_cwd")


def _user_logs(instance: dg.DagsterInstance, run_id: str) -> List[str]:
    return [e.user_message for e in instance.all_logs(run_id) if e.dagster_event is None]


def _wait_for(what: str, done: Callable[[], bool], timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def launched_apps() -> Callable[[], List[ListAppResponse]]:
    """Lists every app in this test's local_cwd state dir (whoever launched it)."""
    return _launched_apps


@pytest.fixture
def user_logs() -> Callable[[dg.DagsterInstance, str], List[str]]:
    """The run's context.log messages, in order."""
    return _user_logs


@pytest.fixture
def wait_for() -> Callable[..., None]:
    """Polls a condition until it holds; fails after a generous deadline."""
    return _wait_for
