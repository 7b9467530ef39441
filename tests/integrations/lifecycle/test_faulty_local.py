"""The fault seam keeps the real contract: real local_cwd apps, status calls that fail exactly
as the fault file says, and a control path (cancel, delete) that still reaches the backend."""

import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from anylaunch.runner import get_runner
from anylaunch.specs import AppState
from anylaunch.specs.serialize import appdef_from_dict
from tests.integrations.lifecycle.faulty_local import INJECTED, read_rules, write_rules
from tests.integrations.lifecycle.matrix import DEADLINE_S, real_handle
from tests.integrations.lifecycle.matrix import faulty_local_plugin as faulty_local_plugin

pytestmark = pytest.mark.usefixtures("faulty_local_plugin")


@pytest.fixture
def faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    path = tmp_path / "faults"
    write_rules(path, [])
    monkeypatch.setenv("ANYLAUNCH_TEST_FAULTS", str(path))
    return path


def sleeper(name: str) -> dict[str, object]:
    code = "import time; time.sleep(120)"
    role = {"name": "main", "image": ".", "entrypoint": sys.executable, "args": ["-c", code]}
    return {"name": name, "roles": [role]}


def wait_until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_errors_count_down_then_the_status_comes_back(faults: Path) -> None:
    with get_runner() as runner:
        handle = runner.run(appdef_from_dict(sleeper("flaky")), "faulty_local")
        write_rules(faults, ["flaky errors 2", "* down"])  # the app's own rule wins over *
        for left in (1, 0):
            with pytest.raises(ConnectionError, match=re.escape(INJECTED)):
                runner.status(handle)
            assert read_rules(faults) == [f"flaky errors {left}", "* down"]
        status = runner.status(handle)
        assert status is not None and not status.is_terminal()
        runner.cancel(handle)


def test_down_fails_every_status_call_but_cancel_and_delete_reach_the_app(faults: Path) -> None:
    with get_runner() as runner:
        handle = runner.run(appdef_from_dict(sleeper("gone")), "faulty_local")
        write_rules(faults, ["* down after 1"])
        assert runner.status(handle) is not None
        for _ in range(3):
            with pytest.raises(ConnectionError):
                runner.status(handle)
        runner.cancel(handle)  # the control path still works
        real = real_handle(handle)

        def cancelled() -> bool:
            status = runner.status(real)
            return status is not None and status.state == AppState.CANCELLED

        wait_until(f"{real} to be CANCELLED", cancelled)
        runner.delete(handle)
        assert runner.status(real) is None
        with pytest.raises(ConnectionError):  # still down, even for an app it no longer has
            runner.status(handle)
