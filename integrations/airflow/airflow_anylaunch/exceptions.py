"""Exceptions the Airflow integration raises, as Airflow exception types.

An app that ends badly fails its task with :class:`AnylaunchAppError` (retried by Airflow like
any failure: a retry launches a fresh app). Bad input and sensor failures raise subclasses of
``AirflowFailException``: retrying cannot help, so Airflow fails the task at once (and a
sensor's ``soft_fail`` turns them into a skip).
"""

from __future__ import annotations

from typing import Any

from airflow_anylaunch._compat import AirflowException, AirflowFailException

__all__ = [
    "AnylaunchAppError",
    "AnylaunchAppFailedNoRetry",
    "AnylaunchAppLost",
    "AnylaunchAppTimeout",
    "AnylaunchInputError",
    "AnylaunchSensorError",
]


class AnylaunchAppError(AirflowException):
    """The app ended FAILED or CANCELLED, or vanished, while the task waited for it.

    >>> err = AnylaunchAppError("app local_cwd://s/x-1 ended FAILED", "local_cwd://s/x-1")
    >>> err.app_handle, str(err)
    ('local_cwd://s/x-1', 'app local_cwd://s/x-1 ended FAILED')
    """

    def __init__(
        self,
        message: str,
        app_handle: str | None = None,
        status: dict[str, Any] | None = None,
        failure_category: str | None = None,
    ) -> None:
        super().__init__(message)
        self.app_handle = app_handle
        #: the app's final status (``AppStatus.to_dict()`` plus ``app_handle``), if known
        self.status = status
        #: why it failed (``anylaunch.runner.failures.FailureCategory`` value), if known
        self.failure_category = failure_category


class AnylaunchAppTimeout(AnylaunchAppError):
    """The app did not start (startup timeout) or finish (execution timeout) in time; it was
    cancelled."""


class AnylaunchAppLost(AnylaunchAppError):
    """The wait lost the app: it vanished (deleted, or purged by its scheduler), or its
    scheduler kept failing (the app was cancelled, best effort, unless told to keep it)."""


class AnylaunchAppFailedNoRetry(AnylaunchAppError, AirflowFailException):
    """The app failed for a reason retrying cannot fix (its own exit code, out of memory, a
    run timeout) and the task has ``retry_only_infrastructure_failures=True``: the task fails
    at once, without using its retries."""


class AnylaunchInputError(AirflowFailException):
    """An argument of an anylaunch task (or of its connection) cannot work; fix the DAG.

    Wraps the anylaunch error (``InvalidSpecError``, ``UnknownSchedulerException``, ...) that
    names the field, the bad value and the fix.
    """


class AnylaunchSensorError(AirflowFailException):
    """The watched app ended FAILED or CANCELLED, or does not exist."""

    def __init__(
        self, message: str, app_handle: str | None = None, status: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.app_handle = app_handle
        self.status = status
