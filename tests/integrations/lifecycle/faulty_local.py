"""``faulty_local``: local_cwd behind a status API that fails on cue, registered as a
third-party scheduler plugin (an ``anylaunch.schedulers`` entry point).

The apps are real local_cwd processes; only the scheduler's status calls (``describe``,
``describe_many``) are faulted, the way a flaky or unreachable status endpoint fails a client.
Cancel, delete and logs reach the real backend (a control path that still works), so a test
can tell whether the engine cancelled the app when it gave up on it.

Faults come from the JSON file named by ``$ANYLAUNCH_TEST_FAULTS``: ``{app name: fault}`` with
``{"errors": N}`` (the next N status calls of that app raise, then it recovers) or
``{"down_after": N}`` (after N good status calls, every later one raises).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

from anylaunch.schedulers.api import DescribeAppResponse
from anylaunch.schedulers.local_scheduler import LocalScheduler

BACKEND = "faulty_local"
FAULTS_ENV = "ANYLAUNCH_TEST_FAULTS"


@contextlib.contextmanager
def _faults() -> Iterator[dict[str, Any]]:
    """The fault table, read and written back under a lock (engines poll from threads)."""
    path = os.environ.get(FAULTS_ENV)
    if not path or not os.path.exists(path):
        yield {}
        return
    with open(path, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        table: dict[str, Any] = json.load(f)
        try:
            yield table
        finally:  # also when the fault raises: the countdown must stick
            f.seek(0)
            f.truncate()
            json.dump(table, f)


def _app_name(app_id: str) -> str:
    return app_id.rsplit("-", 1)[0]


class FaultyLocalScheduler(LocalScheduler):
    """local_cwd whose status calls fail as the fault table says."""

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__(session_name, state_dir=kwargs.get("state_dir"))
        self.backend = BACKEND
        self._control = False  # True inside cancel/delete: the control path is not faulted

    def _maybe_fail(self, app_id: str) -> None:
        if self._control:
            return
        with _faults() as table:
            fault = table.get(_app_name(app_id))
            if fault is None:
                return
            if fault.get("errors", 0) > 0:
                fault["errors"] -= 1
                raise ConnectionError(f"status API of {app_id}: connection refused (injected)")
            if "down_after" in fault:
                if fault["down_after"] > 0:
                    fault["down_after"] -= 1
                    return
                raise ConnectionError(f"status API of {app_id}: host unreachable (injected)")

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        self._maybe_fail(app_id)
        return super().describe(app_id)

    def describe_many(self, app_ids: Sequence[str]) -> dict[str, DescribeAppResponse | None]:
        for app_id in app_ids:
            self._maybe_fail(app_id)
        return super().describe_many(app_ids)

    def cancel(self, app_id: str) -> None:
        self._control = True
        try:
            super().cancel(app_id)
        finally:
            self._control = False

    def delete(self, app_id: str) -> None:
        self._control = True
        try:
            super().delete(app_id)
        finally:
            self._control = False


def create_scheduler(session_name: str, **kwargs: Any) -> FaultyLocalScheduler:
    return FaultyLocalScheduler(session_name, **kwargs)
