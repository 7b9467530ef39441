"""The runner's own errors (the specs' errors cover bad input and unknown apps)."""

from __future__ import annotations

from anylaunch.specs.api import AppHandle, AppState
from anylaunch.specs.errors import AnylaunchError

__all__ = ["AppWaitTimeoutError"]


class AppWaitTimeoutError(AnylaunchError, TimeoutError):
    """``Runner.wait`` gave up before the app reached a terminal state (the app keeps running).

    >>> print(AppWaitTimeoutError("local_cwd://s/echo-1", AppState.RUNNING, 5))
    app local_cwd://s/echo-1 did not finish within 5s (last state: RUNNING). Fix: wait longer (a larger timeout), or stop it with Runner.cancel('local_cwd://s/echo-1') / `anylaunch cancel local_cwd://s/echo-1`
    """

    def __init__(self, app_handle: AppHandle, last_state: AppState, timeout: float) -> None:
        self.app_handle = app_handle
        self.last_state = last_state
        self.timeout = timeout
        super().__init__(
            f"app {app_handle} did not finish within {timeout:g}s (last state: "
            f"{last_state.name}). Fix: wait longer (a larger timeout), or stop it with "
            f"Runner.cancel({app_handle!r}) / `anylaunch cancel {app_handle}`"
        )
