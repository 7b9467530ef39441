"""The Runner API: submit AppDefs (or named components) to a scheduler and manage them.

>>> from anylaunch.runner import get_runner
>>> runner = get_runner()
>>> runner.session_name
'anylaunch'
>>> runner.close()

Run options in ``.anylaunchconfig`` files are applied by :meth:`Runner.dryrun` (see
:mod:`anylaunch.runner.config`).
"""

from anylaunch.runner.api import (
    DEFAULT_SESSION_NAME,
    ENV_ANYLAUNCH_JOB_ID,
    ENV_ANYLAUNCH_PARENT_RUN_ID,
    ENV_ANYLAUNCH_SESSION,
    AppWaitTimeoutError,
    Runner,
    get_runner,
    poll_intervals,
)

__all__ = [
    "DEFAULT_SESSION_NAME",
    "ENV_ANYLAUNCH_JOB_ID",
    "ENV_ANYLAUNCH_PARENT_RUN_ID",
    "ENV_ANYLAUNCH_SESSION",
    "AppWaitTimeoutError",
    "Runner",
    "get_runner",
    "poll_intervals",
]
