"""Real Prefect (one temporary API server for the session) with real local_cwd apps.

Prefect is configured through the environment BEFORE it is imported (and imported here, at
collection time: importing it replaces the root logging handlers, which must not happen in
the middle of another test): analytics off, and its home, local storage and memo store in a
temporary directory. Every test gets its own local_cwd state directory, working directory
and HOME.

A killed test session can leave the temporary server running (it is a child process): the
server is marked with the pid of the session that started it, and the next session stops
servers whose owner is gone.
"""

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Dict, List
from uuid import UUID

import pytest

_PREFECT_TMP = tempfile.mkdtemp(prefix="anylaunch-prefect-tests-")
atexit.register(shutil.rmtree, _PREFECT_TMP, True)  # also when no test started the server
PREFECT_ENV = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_HOME": os.path.join(_PREFECT_TMP, "home"),
    "PREFECT_LOCAL_STORAGE_PATH": os.path.join(_PREFECT_TMP, "storage"),
    "PREFECT_SERVER_MEMO_STORE_PATH": os.path.join(_PREFECT_TMP, "memo.toml"),
}
os.environ.update(PREFECT_ENV)

import prefect  # noqa: E402  (after the environment above, on purpose)

# The test harness pulls in docket -> key_value, which compiles itself through beartype's import
# hook. Imported lazily from deep inside pytest's fixture stack, CPython 3.11's AST compiler
# raises "SystemError: AST constructor recursion depth mismatch"; import it here, at a shallow
# stack, once for the whole session.
import prefect.testing.utilities  # noqa: E402
from prefect.client.orchestration import get_client  # noqa: E402
from prefect.logging.handlers import APILogWorker  # noqa: E402

from anylaunch.runner import get_runner  # noqa: E402
from anylaunch.schedulers.api import ListAppResponse  # noqa: E402
from anylaunch.specs.api import AppState, AppStatus  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
# a safety net against a hung flow or app, not a measurement
DEADLINE_S = 60.0
_OWNER_ENV = "ANYLAUNCH_PREFECT_TEST_SERVER_OWNER"
_SERVER_MARK = "prefect.server.api.server:create_app"

assert prefect.__version__.startswith("3."), prefect.__version__


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap_orphaned_servers() -> None:
    """Stops temporary API servers started by test sessions that no longer exist."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if _SERVER_MARK.encode() not in cmdline:
            continue
        owner = next(
            (v.split(b"=", 1)[1] for v in environ if v.startswith(_OWNER_ENV.encode() + b"=")),
            None,
        )
        if owner is not None and owner.isdigit() and not _alive(int(owner)):
            os.kill(int(entry.name), signal.SIGTERM)


@pytest.fixture(scope="session")
def prefect_api() -> Iterator[str]:
    """A temporary Prefect API server (SQLite) for the whole session; yields its URL."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    _reap_orphaned_servers()
    harness = prefect_test_harness(server_startup_timeout=120)
    # the server process inherits the mark; nothing else started later does
    os.environ[_OWNER_ENV] = str(os.getpid())
    try:
        harness.__enter__()
    finally:
        del os.environ[_OWNER_ENV]
    try:
        yield str(PREFECT_API_URL.value())
    finally:
        harness.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private local_cwd state dir, cwd and HOME for each test."""
    state = tmp_path / "local_cwd_state"
    work = tmp_path / "work"
    home = tmp_path / "home"
    for d in (state, work, home):
        d.mkdir()
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(state))
    monkeypatch.setenv("HOME", str(home))
    for name in ("ANYLAUNCHCONFIG", "ANYLAUNCH_PARENT_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(work)
    return tmp_path


def launched_apps() -> List[ListAppResponse]:
    """Every app in this test's local_cwd state dir (whoever launched it)."""
    with get_runner() as runner:
        return runner.list("local_cwd")


def app_status(handle: str) -> AppStatus:
    with get_runner() as runner:
        status = runner.status(handle)
    assert status is not None, handle
    return status


def wait_for(what: str, done: Callable[[], bool], timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def wait_for_state(handle: str, state: AppState, timeout: float = DEADLINE_S) -> None:
    wait_for(f"{handle} to be {state.name}", lambda: app_status(handle).state == state, timeout)


def run_logs(flow_run_id: UUID) -> List[str]:
    """The messages the flow run (and its task runs) logged, read back through the API."""
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    APILogWorker.drain_all()
    with get_client(sync_client=True) as client:
        logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
    return [log.message for log in logs]


def run_artifacts(flow_run_id: UUID) -> List[Any]:
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        return list(
            client.read_artifacts(
                artifact_filter=ArtifactFilter(
                    flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])
                )
            )
        )


def task_runs(flow_run_id: UUID) -> List[Any]:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        return list(
            client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
            )
        )


def read_flow_run(flow_run_id: UUID) -> Any:
    with get_client(sync_client=True) as client:
        return client.read_flow_run(flow_run_id)


def flow_run_labelled(app_handle: str) -> UUID | None:
    """The flow run that launched the app (its labels name the app's handle), if any."""
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(limit=200)
    return next((run.id for run in runs if app_handle in run.labels.values()), None)


def python_env(api_url: str, extra: Dict[str, str] | None = None) -> Dict[str, str]:
    """The environment for a Python subprocess that talks to the test API server."""
    return {**os.environ, **PREFECT_ENV, "PREFECT_API_URL": api_url, **(extra or {})}


def run_python(args: List[str], api_url: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=python_env(api_url),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def py_app(
    name: str, code: str, replicas: int = 1, env: Dict[str, str] | None = None
) -> Dict[str, Any]:
    """An AppDef (dict form) whose replicas run ``python -c code`` (REPLICA holds the index)."""
    return {
        "name": name,
        "roles": [
            {
                "name": "w",
                "image": ".",
                "entrypoint": sys.executable,
                "args": ["-c", code],
                "env": {"REPLICA": "${replica_id}", **(env or {})},
                "num_replicas": replicas,
            }
        ],
    }


class Helpers:
    """What the tests share (a fixture: test modules cannot import this conftest)."""

    def __init__(self, api_url: str) -> None:
        self.api_url = api_url

    launched_apps = staticmethod(launched_apps)
    app_status = staticmethod(app_status)
    wait_for = staticmethod(wait_for)
    wait_for_state = staticmethod(wait_for_state)
    run_logs = staticmethod(run_logs)
    run_artifacts = staticmethod(run_artifacts)
    task_runs = staticmethod(task_runs)
    read_flow_run = staticmethod(read_flow_run)
    flow_run_labelled = staticmethod(flow_run_labelled)
    py_app = staticmethod(py_app)

    def env(self, extra: Dict[str, str] | None = None) -> Dict[str, str]:
        return python_env(self.api_url, extra)

    def run_python(self, args: List[str], timeout: float = 120) -> subprocess.CompletedProcess:
        return run_python(args, self.api_url, timeout)


@pytest.fixture
def pf(prefect_api: str) -> Helpers:
    """The helpers, with the session's Prefect API server running."""
    return Helpers(prefect_api)
