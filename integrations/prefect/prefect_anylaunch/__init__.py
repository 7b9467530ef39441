"""anylaunch for Prefect: launch, watch, stream logs from and cancel anylaunch apps.

Blocks (registered by ``prefect block register -m prefect_anylaunch``, and automatically
through the ``prefect.collections`` entry point): :class:`AnylaunchJob`, whose ``trigger()``
returns an :class:`AnylaunchJobRun` (its ``targets``, :class:`AnylaunchTarget`, place the app
on the first of several schedulers that can run it), and :class:`AnylaunchSchedulerSettings`.
Tasks:
:func:`launch_app`, :func:`wait_for_app`, :func:`cancel_app`, :func:`get_app_logs`. Flow:
:func:`run_app`, with the hook :func:`cancel_launched_apps` for your own flows.

Importing it imports Prefect's block machinery and the anylaunch core, and no backend SDK.
The tasks and the flow are created on first access: Prefect builds a flow's parameter
schema when the flow is defined, which would cost every Prefect process that loads this
collection ~0.2 s.

>>> import prefect_anylaunch
>>> prefect_anylaunch.AnylaunchJob.get_block_type_slug()
'anylaunch-job'
"""

from typing import TYPE_CHECKING

from anylaunch.lazy import lazy_getattr
from prefect_anylaunch.blocks import AnylaunchJob, AnylaunchJobRun, AnylaunchSchedulerSettings
from prefect_anylaunch.errors import (
    AnylaunchAppFailedError,
    AnylaunchAppLostError,
    AnylaunchAppTimeoutError,
    retry_infrastructure_failures,
)
from prefect_anylaunch.placement import AnylaunchTarget

if TYPE_CHECKING:
    from prefect_anylaunch.flows import cancel_launched_apps, run_app
    from prefect_anylaunch.tasks import (
        cancel_app,
        get_app_logs,
        launch_app,
        stop_app,
        wait_for_app,
    )

_LAZY = {
    "prefect_anylaunch.flows": ("cancel_launched_apps", "run_app"),
    "prefect_anylaunch.tasks": (
        "cancel_app",
        "get_app_logs",
        "launch_app",
        "stop_app",
        "wait_for_app",
    ),
}

__all__ = [
    "AnylaunchAppFailedError",
    "AnylaunchAppLostError",
    "AnylaunchAppTimeoutError",
    "AnylaunchJob",
    "AnylaunchJobRun",
    "AnylaunchSchedulerSettings",
    "AnylaunchTarget",
    "cancel_app",
    "cancel_launched_apps",
    "get_app_logs",
    "launch_app",
    "retry_infrastructure_failures",
    "run_app",
    "stop_app",
    "wait_for_app",
]

__getattr__ = lazy_getattr(__name__, _LAZY)
