"""How far a deferred task has streamed its app's log, kept where a rebuilt trigger finds it.

A triggerer that restarts (or hands a trigger to another triggerer) rebuilds the trigger from
the kwargs it was deferred with, which cannot change afterwards; without a cursor it would
stream the app's log again from the first line. The trigger therefore keeps its log positions
in an XCom of its task instance (``anylaunch_log_cursor``, with the app's handle): triggers
may read and write XComs through the triggerer. A new try of the task starts with no XComs,
so the cursor never leaks across tries or clears. A placed app's cursor also names the attempt
it was read from: after a move the new attempt's log starts from its first line.

The calls block (they go through the triggerer's supervisor): call them off the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

XCOM_LOG_CURSOR = "anylaunch_log_cursor"

_log = logging.getLogger(__name__)


class LogCursor:
    """The log positions of one app (of one attempt of a placed app), stored on one task
    instance (``None``: no task instance, as for a trigger run outside a triggerer: then
    nothing is stored)."""

    def __init__(self, task_instance: Any, app_handle: str, attempt: int | None = None) -> None:
        self.app_handle = app_handle
        self.attempt = attempt
        self._where: dict[str, Any] | None = None
        if task_instance is not None and all(
            hasattr(task_instance, name) for name in ("dag_id", "task_id", "run_id")
        ):
            self._where = {
                "dag_id": task_instance.dag_id,
                "task_id": task_instance.task_id,
                "run_id": task_instance.run_id,
                "map_index": getattr(task_instance, "map_index", -1),
            }
        self._saved: dict[str, int] = {}

    def load(self) -> dict[str, int]:
        """The positions stored for this app, or {} (none, another app's, or unreadable)."""
        if self._where is None:
            return {}
        try:
            from airflow_anylaunch._compat import BaseXCom

            value = BaseXCom.get_one(key=XCOM_LOG_CURSOR, **self._where)
        except Exception as e:  # a cursor is an optimisation: never fail the watch over it
            _log.warning("cannot read the log cursor of %s: %s", self.app_handle, e)
            return {}
        if not isinstance(value, Mapping) or value.get("app_handle") != self.app_handle:
            return {}
        if value.get("attempt") != self.attempt:  # another attempt's lines
            return {}
        positions = value.get("positions")
        if not isinstance(positions, Mapping):
            return {}
        self._saved = {  # a malformed entry is dropped: that replica's log starts over
            str(k): v
            for k, v in positions.items()
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0
        }
        return dict(self._saved)

    def save(self, positions: Mapping[str, int]) -> None:
        """Stores ``positions`` if they moved since the last save."""
        current = {str(k): int(v) for k, v in positions.items()}
        if self._where is None or current == self._saved:
            return
        try:
            from airflow_anylaunch._compat import BaseXCom

            BaseXCom.set(
                XCOM_LOG_CURSOR,
                {"app_handle": self.app_handle, "attempt": self.attempt, "positions": current},
                **self._where,
            )
            self._saved = current
        except Exception as e:
            _log.warning("cannot store the log cursor of %s: %s", self.app_handle, e)
