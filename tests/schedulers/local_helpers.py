"""Helpers of the local_cwd tests: launching apps and waiting on conditions (with a generous
deadline, as a safety net only: nothing asserts on durations)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from anylaunch.schedulers.api import DescribeAppResponse
from anylaunch.schedulers.local import state as ls
from anylaunch.schedulers.local_scheduler import LocalScheduler
from anylaunch.specs import AppDef, AppState, Role

PY = sys.executable
CFG: dict[str, Any] = {"cancel_grace_s": 0.5}
DEADLINE_S = 30.0


def wait_until(predicate: Callable[[], Any], what: str, timeout: float = DEADLINE_S) -> Any:
    """The first true value of ``predicate()``, polled until ``timeout``; fails the test then."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"gave up waiting for {what}")


def wait_running(sched: LocalScheduler, app_id: str) -> DescribeAppResponse:
    """``schedule`` returns before the supervisor started the replicas: wait for RUNNING."""

    def running() -> DescribeAppResponse | None:
        desc = sched.describe(app_id)
        return desc if desc is not None and desc.state == AppState.RUNNING else None

    desc: DescribeAppResponse = wait_until(running, f"{app_id} to be RUNNING")
    return desc


def wait_done(sched: LocalScheduler, app_id: str) -> DescribeAppResponse:
    """The app's description once it is in a terminal state."""

    def done() -> DescribeAppResponse | None:
        desc = sched.describe(app_id)
        assert desc is not None
        return desc if desc.state.is_terminal() else None

    result: DescribeAppResponse = wait_until(done, f"{app_id} to end")
    return result


def gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (a zombie waiting for its reaper counts as gone)."""
    return ls.process_start_time(pid) is None


def py_role(name: str, code: str, *args: str, image: str = ".", **kwargs: Any) -> Role:
    """A role running ``code`` with this interpreter (``args`` follow as sys.argv[1:])."""
    return Role(name, image=image, entrypoint=PY, args=["-c", code, *args], **kwargs)


def run(
    sched: LocalScheduler, *roles: Role, name: str = "app", cfg: dict[str, Any] | None = None
) -> str:
    """Submits an app of ``roles`` (with :data:`CFG` under ``cfg``); returns its id."""
    return sched.submit(AppDef(name, roles=list(roles)), {**CFG, **(cfg or {})})


def replica_pids(sched: LocalScheduler, app_id: str) -> list[int]:
    """The pids of the app's replicas, once the supervisor has started all of them
    (``schedule`` returns before that)."""

    def started() -> list[int] | None:
        state = ls.read_state(sched.state_root() / app_id)
        assert state is not None
        replicas = state.get("replicas") or []
        pids = [r["pid"] for r in replicas if r.get("pid")]
        return pids if replicas and len(pids) == len(replicas) else None

    pids: list[int] = wait_until(started, f"replicas of {app_id} started")
    return pids
