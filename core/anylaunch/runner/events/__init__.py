"""Runner events: one record per action of the Runner, for the event-handler plugins.

TorchX's ``torchx.runner.events`` with ``torchx`` read as ``anylaunch``. The Runner records
an :class:`AnylaunchEvent` for each ``schedule`` (submission), ``cancel`` and ``retry``
(``Runner.retry_failed``), for each CHANGE of an app's status that a ``status`` or
``status_many`` call sees in this process (and for a failing status call, once per streak),
and the archive writer records ``archive``. Each event carries its timing (CPU and wall time,
start time) and, if the action raised, the exception's type, message, traceback and location.

Events go to the registered event-handler plugins (:mod:`anylaunch.runner.events.handlers`):
a failing handler is logged once at WARNING and never breaks the action. Run options and app
metadata are masked by the secret policy, and the text redacted of the app's secret env
values, before any handler sees an event.

Usage::

    from anylaunch.runner import events

    with events.log_event("my_action", app_handle=handle) as ctx:
        ...  # timed; an exception is recorded, then re-raised
    events.record(events.AnylaunchEvent(session="s", scheduler="local_cwd", api="note"))

>>> from anylaunch.runner.events import AnylaunchEvent, log_event, record
>>> with log_event("schedule", scheduler="local_cwd") as ctx:
...     pass
>>> ctx.event.api
'schedule'
"""

from __future__ import annotations

from anylaunch.runner.events.api import AnylaunchEvent, SourceType
from anylaunch.runner.events.handlers import get_logging_handler, registered_handlers
from anylaunch.runner.events.recording import log_event, record, record_action

__all__ = [
    "AnylaunchEvent",
    "SourceType",
    "get_logging_handler",
    "log_event",
    "record",
    "record_action",
    "registered_handlers",
]
