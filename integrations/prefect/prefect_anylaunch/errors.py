"""Errors raised when a launched app does not succeed in time (bad input raises
:class:`anylaunch.specs.errors.InvalidSpecError` and its subclasses instead)."""

from __future__ import annotations

from typing import Any

from anylaunch.specs.api import AppHandle, AppState, AppStatus
from anylaunch.specs.errors import AnylaunchError

__all__ = [
    "AnylaunchAppFailedError",
    "AnylaunchAppLostError",
    "AnylaunchAppTimeoutError",
    "retry_infrastructure_failures",
]


class AnylaunchAppFailedError(AnylaunchError, RuntimeError):
    """The app ended FAILED or CANCELLED; the message carries the app's own message.

    >>> status = AppStatus(AppState.FAILED, msg="replica w/0 exited with code 3")
    >>> print(AnylaunchAppFailedError("local_cwd://s/x-1", status, "last stderr: boom"))
    app local_cwd://s/x-1 ended FAILED: replica w/0 exited with code 3; last stderr: boom
    """

    def __init__(
        self,
        app_handle: AppHandle,
        status: AppStatus | None,
        detail: str = "",
        *,
        message: str | None = None,
    ) -> None:
        self.app_handle = app_handle
        self.status = status
        if message is None:
            state = status.state.name if status is not None else "UNKNOWN"
            parts = [p for p in (status.msg if status is not None else "", detail) if p]
            message = f"app {app_handle} ended {state}" + (": " + "; ".join(parts) if parts else "")
        super().__init__(message)

    @property
    def failure_category(self) -> str | None:
        """Why the app failed (:mod:`anylaunch.runner.failures`), e.g. ``application``."""
        from anylaunch.runner.failures import failure_category

        category = failure_category(self.status)
        return category.value if category is not None else None


class AnylaunchAppLostError(AnylaunchAppFailedError):
    """The watch lost the app: it vanished (deleted, or purged by its scheduler), or its
    scheduler kept failing; ``reason`` is ``vanished``, ``poll_errors`` or ``permanent_error``
    (see :class:`anylaunch.runner.watch.Lost`). ``status`` is the last one seen (or None).
    """

    def __init__(
        self, app_handle: AppHandle, status: AppStatus | None, message: str, reason: str = ""
    ) -> None:
        self.reason = reason
        super().__init__(app_handle, status, message=message)

    @property
    def failure_category(self) -> str | None:
        """A lost app is an infrastructure failure."""
        return "infrastructure"


class AnylaunchAppTimeoutError(AnylaunchError, TimeoutError):
    """The app did not start (``startup``) or finish (``run``) within its timeout.

    >>> print(AnylaunchAppTimeoutError("local_cwd://s/x-1", "run", 60, AppState.RUNNING, True))
    app local_cwd://s/x-1 did not finish within 60s of running (last state: RUNNING); it was cancelled. Fix: raise run_timeout_s, or make the app faster
    """

    def __init__(
        self,
        app_handle: AppHandle,
        which: str,
        timeout_s: float,
        last_state: AppState,
        cancelled: bool,
        *,
        message: str | None = None,
    ) -> None:
        self.app_handle = app_handle
        self.which = which
        self.timeout_s = timeout_s
        self.last_state = last_state
        self.cancelled = cancelled
        what = "start" if which == "startup" else "finish"
        since = "" if which == "startup" else " of running"
        fate = (
            "it was cancelled"
            if cancelled
            else f"it keeps running (cancel it with `anylaunch cancel {app_handle}`)"
        )
        fix = (
            "raise startup_timeout_s, or check why the scheduler does not start it"
            if which == "startup"
            else "raise run_timeout_s, or make the app faster"
        )
        super().__init__(
            message
            or f"app {app_handle} did not {what} within {timeout_s:g}s{since} "
            f"(last state: {last_state.name}); {fate}. Fix: {fix}"
        )

    @property
    def failure_category(self) -> str:
        """A startup timeout is a ``startup`` failure, a run timeout the ``application``'s."""
        return "startup" if self.which == "startup" else "application"


def retry_infrastructure_failures(task: Any, task_run: Any, state: Any) -> bool:
    """A ``retry_condition_fn`` for Prefect tasks: retry only failures retrying can fix (a
    lost replica, node loss or preemption, an image pull or scheduling failure, a startup
    timeout), never an app's own failure (non-zero exit, out of memory, run timeout).

    Example:
        ```python
        @task(retries=3, retry_condition_fn=retry_infrastructure_failures)
        def train(job: AnylaunchJob) -> dict:
            return job.trigger().wait_for_completion() or {}
        ```
    """
    from anylaunch.runner.failures import FailureCategory, retryable

    try:
        state.result(raise_on_failure=True)
    except (AnylaunchAppFailedError, AnylaunchAppTimeoutError) as e:
        category = e.failure_category
        return category is not None and retryable(FailureCategory(category))
    except Exception:
        return True  # not an app failure (e.g. the API was unreachable): Prefect's default
    return True
