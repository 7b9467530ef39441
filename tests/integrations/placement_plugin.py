"""What the engines' placement tests share: ``full_local``, a scheduler plugin that is local_cwd
whose capacity check always says no (a backend that is full right now), registered the way a
third-party scheduler is (an ``anylaunch.schedulers`` entry point); an app that resumes from
its checkpoint URL; and the infrastructure loss of a local app (its supervisor SIGKILLed).
"""

from __future__ import annotations

import atexit
import functools
import importlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anylaunch.schedulers.common.capacity import CanRun, Capacity
from anylaunch.schedulers.local.scheduler import LocalScheduler
from anylaunch.specs import AppDef

#: The plugin scheduler's name (and its entry point's).
FULL = "full_local"
#: What its capacity check says.
FULL_REASON = "every slot is taken"
#: A safety net for waits on a loaded machine, never a timing assertion.
DEADLINE_S = 120.0

# attempt 0 writes its progress under the checkpoint URL, then runs until the platform takes
# it away; a later attempt finds that progress and finishes
RESUMABLE = """
import os, pathlib, time
attempt = os.environ["ANYLAUNCH_ATTEMPT"]
ckpt = pathlib.Path(os.environ["ANYLAUNCH_CHECKPOINT_URL"])
ckpt.mkdir(parents=True, exist_ok=True)
done = ckpt / "step"
if done.exists():
    print(f"attempt {attempt} resumes from {done.read_text()}", flush=True)
else:
    done.write_text(f"attempt {attempt}")
    print(f"attempt {attempt} wrote its checkpoint", flush=True)
    time.sleep(600)
"""

# an application failure: never relaunched, whatever the budget
EXITS_3 = (
    "import os, sys; print('attempt', os.environ['ANYLAUNCH_ATTEMPT'], flush=True); sys.exit(3)"
)


class FullLocal(LocalScheduler):
    """local_cwd whose capacity check always says no."""

    def _check_capacity(self, app: AppDef, cfg: Any) -> Capacity:
        return Capacity(CanRun.NO, FULL_REASON, calls=1)


def create_scheduler(session_name: str, **kwargs: Any) -> FullLocal:
    """The entry point's factory (``state_dir`` as for local_cwd)."""
    return FullLocal(session_name, **kwargs)


@functools.cache
def _plugin_site() -> Path:
    site = Path(tempfile.mkdtemp(prefix="full-local-site-"))
    atexit.register(shutil.rmtree, site, True)
    dist = site / "full_local_plugin-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: full_local_plugin\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(
        f"[anylaunch.schedulers]\n{FULL} = tests.integrations.placement_plugin:create_scheduler\n"
    )
    return site


@pytest.fixture
def full_local_plugin() -> Iterator[None]:
    """Registers ``full_local`` while a test runs (other tests never see it)."""
    from anylaunch.schedulers import get_scheduler_factories

    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(_plugin_site()))
        importlib.invalidate_caches()  # importlib.metadata caches the paths it has searched
        assert FULL in get_scheduler_factories()
        yield
    importlib.invalidate_caches()


def checkpoint_written(root: Path) -> bool:
    """True once attempt 0 of a RESUMABLE app placed under ``root`` wrote its checkpoint."""
    return any(root.glob("*/*/checkpoint/step"))


def kill_running_supervisor() -> str:
    """SIGKILLs the supervisor of the one running local_cwd app (what losing its machine
    does to it: the replicas die with it); returns the app's handle."""
    from anylaunch.runner import get_runner

    with get_runner() as runner:
        running = [a for a in runner.list("local_cwd") if not a.state.is_terminal()]
        assert len(running) == 1, running
        sched, app_id = runner._scheduler_app_id(running[0].app_handle)
        desc = sched.describe(app_id)
        assert desc is not None
        os.kill(int(desc.metadata["supervisor_pid"]), signal.SIGKILL)
        return running[0].app_handle


def wait_until(what: str, done: Any, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
