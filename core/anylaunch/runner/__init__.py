"""The Runner API: submit AppDefs (or named components) to a scheduler and manage them.

>>> from anylaunch.runner import get_runner
>>> runner = get_runner()
>>> runner.session_name
'anylaunch'
>>> runner.close()

Run options in ``.anylaunchconfig`` files are applied by :meth:`Runner.dryrun` (see
:mod:`anylaunch.runner.config`). Reading many replicas' logs at once: :mod:`anylaunch.runner.logs`.
"""

from typing import TYPE_CHECKING

from anylaunch.lazy import lazy_getattr
from anylaunch.runner.api import (
    DEFAULT_SESSION_NAME,
    ENV_ANYLAUNCH_JOB_ID,
    ENV_ANYLAUNCH_PARENT_RUN_ID,
    ENV_ANYLAUNCH_SESSION,
    Runner,
    get_runner,
)
from anylaunch.runner.errors import AppWaitTimeoutError
from anylaunch.runner.watch import poll_intervals

if TYPE_CHECKING:
    from anylaunch.runner.logs import LineSink, LogPump, find_replicas

# the log readers are needed by few callers: load them on first use only
_LAZY = {"anylaunch.runner.logs": ("LineSink", "LogPump", "find_replicas")}
__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "DEFAULT_SESSION_NAME",
    "ENV_ANYLAUNCH_JOB_ID",
    "ENV_ANYLAUNCH_PARENT_RUN_ID",
    "ENV_ANYLAUNCH_SESSION",
    "AppWaitTimeoutError",
    "LineSink",
    "LogPump",
    "Runner",
    "find_replicas",
    "get_runner",
    "poll_intervals",
]
