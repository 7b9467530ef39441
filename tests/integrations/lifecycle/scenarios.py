"""The rows of the lifecycle matrix: one app and one fault each, with the outcome the behaviour
table (docs/lifecycle.md) prescribes for every engine.

>>> [s.name for s in SCENARIOS.values()]  # doctest: +NORMALIZE_WHITESPACE
['success', 'nonzero_exit', 'startup_timeout', 'run_timeout', 'errors_then_recovery',
 'backend_gone', 'deleted_underneath']
>>> SCENARIOS["backend_gone"].fault_rules() == [f"matrix-backend-gone-{SESSION_TOKEN} down after 2"]
True
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any, Literal

from anylaunch.specs import AppState
from tests.integrations.lifecycle.faulty_local import BACKEND

Kind = Literal["success", "failed", "timeout", "lost"]

#: The environment variable that hands :data:`SESSION_TOKEN` down to subprocesses.
SESSION_TOKEN_ENV = "ANYLAUNCH_MATRIX_SESSION"
#: In every app name: tells this test session's apps from those of other sessions running at
#: the same time on a shared backend (the Slurm cluster lists every job of the user).
SESSION_TOKEN = os.environ.get(SESSION_TOKEN_ENV) or f"p{os.getpid()}"

#: The longest any poll sleeps (polls back off from 0.1 s up to it).
POLL_INTERVAL_S = 0.5
#: How long an engine waits for an app it cancelled to end before it gives up waiting (the
#: status API may be down for good, then every wait runs to its end).
CANCEL_WAIT_S = 3.0

# The headlines the core policy gives its decisions (anylaunch.runner.watch); every engine's
# failure text starts with the decision's message.
STARTUP_TIMEOUT_TEXT = "did not start (RUNNING)"
RUN_TIMEOUT_TEXT = "did not finish"
POLL_ERRORS_TEXT = "failed status calls in a row"
VANISHED_TEXT = "no longer exists"
FAILED_TEXT = "ended FAILED"

SLEEP_LONG = "import time; print('running', flush=True); time.sleep(120)"


@dataclass(frozen=True)
class Scenario:
    """One row of the matrix."""

    name: str
    #: the app's Python code (local apps)
    code: str = ""
    #: where the app runs: the faulty local plugin, or Slurm (a real queue hold)
    scheduler: str = BACKEND
    cfg: dict[str, Any] = field(default_factory=dict)
    #: the fault of the app's status calls (a rule of the fault file, without the target)
    fault: str | None = None
    startup_timeout: float | None = None
    run_timeout: float | None = None
    #: the test deletes the app (through a Runner) once the engine published its handle
    delete_when_running: bool = False
    #: the app's final state (None: the scheduler no longer knows it)
    expected_state: AppState | None = AppState.SUCCEEDED
    #: the kind of engine outcome
    expected_kind: Kind = "success"
    #: what the engine's failure text must say (its headline)
    expected_text: str = ""
    #: the engine must log a warning for the injected status errors
    expect_warnings: bool = False

    @property
    def app_name(self) -> str:
        return f"matrix-{self.name.replace('_', '-')}-{SESSION_TOKEN}"

    def fault_rules(self) -> list[str]:
        """The fault file's lines for this scenario."""
        return [f"{self.app_name} {self.fault}"] if self.fault else []

    def app(self) -> dict[str, Any]:
        """The AppDef in its dict form."""
        role: dict[str, Any]
        if self.scheduler == "slurm":
            # never runs: Slurm holds the job (a BeginTime an hour away)
            role = {"name": "main", "image": "/tmp", "entrypoint": "sleep", "args": ["120"]}
            role["resource"] = {"cpu": 1, "gpu": 0, "memMB": 64}
        else:
            role = {"name": "main", "image": ".", "entrypoint": sys.executable}
            role["args"] = ["-c", self.code]
        return {"name": self.app_name, "roles": [role]}


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("success", "print('hello from the matrix', flush=True)"),
        Scenario(
            "nonzero_exit",
            "import sys; print('failing', flush=True); sys.exit(3)",
            expected_state=AppState.FAILED,
            expected_kind="failed",
            expected_text=FAILED_TEXT,
        ),
        Scenario(
            "startup_timeout",
            scheduler="slurm",
            cfg={"sbatch_args": ["--begin=now+3600"]},
            startup_timeout=3,
            expected_state=AppState.CANCELLED,
            expected_kind="timeout",
            expected_text=STARTUP_TIMEOUT_TEXT,
        ),
        Scenario(
            "run_timeout",
            SLEEP_LONG,
            run_timeout=2,
            expected_state=AppState.CANCELLED,
            expected_kind="timeout",
            expected_text=RUN_TIMEOUT_TEXT,
        ),
        Scenario(
            "errors_then_recovery",
            "import time; print('working', flush=True); time.sleep(4)",
            fault="errors 4",
            expect_warnings=True,
        ),
        Scenario(
            "backend_gone",
            SLEEP_LONG,
            fault="down after 2",
            expected_state=AppState.CANCELLED,
            expected_kind="lost",
            expected_text=POLL_ERRORS_TEXT,
            expect_warnings=True,
        ),
        Scenario(
            "deleted_underneath",
            SLEEP_LONG,
            delete_when_running=True,
            expected_state=None,
            expected_kind="lost",
            expected_text=VANISHED_TEXT,
        ),
    )
}
