"""Whether a trigger being cancelled was moved to another triggerer rather than killed.

Airflow (3.3) hands a trigger to another triggerer when its triggerer misses heartbeats for
``[triggerer] triggerer_health_check_threshold`` seconds (lost, or only paused or stalled).
When the old triggerer comes back, it finds the trigger no longer assigned to it and cancels
it the way it cancels a trigger the user killed (mark failed, clear): it calls ``on_kill``.
Cancelling the app there would end an app the other triggerer is still watching for a task
that still waits for it.

A user's kill changes the task instance first: mark failed or success ends it, a clear sets
it to none, and a cleared try that defers again has launched (and pushed) a fresh app. So a
trigger was *moved*, not killed, when its task instance is still ``deferred`` and still
names this trigger's app in XCom (``app_handle``). Anything unknown (no task instance, a
call that fails) counts as a kill: the app is cancelled, as before.

The calls block (they go through the triggerer's supervisor): call them off the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from airflow_anylaunch._common import XCOM_APP_HANDLE

__all__ = ["moved", "still_waiting"]

_log = logging.getLogger(__name__)


def still_waiting(
    states: Mapping[str, Mapping[str, Any]], ti: Any, pushed_handle: object, app_handle: str
) -> bool:
    """True if ``states`` (``get_task_states``' answer: run id -> task key -> state) has the
    task instance ``ti`` deferred and ``pushed_handle`` (its ``app_handle`` XCom) is
    ``app_handle``: it still waits for this app.

    >>> from types import SimpleNamespace
    >>> ti = SimpleNamespace(run_id="r", task_id="app", map_index=-1)
    >>> still_waiting({"r": {"app": "deferred"}}, ti, "slurm://s/1", "slurm://s/1")
    True
    >>> still_waiting({"r": {"app": "failed"}}, ti, "slurm://s/1", "slurm://s/1")  # marked failed
    False
    >>> still_waiting({"r": {"app": "deferred"}}, ti, "slurm://s/2", "slurm://s/1")  # cleared
    False
    >>> mapped = SimpleNamespace(run_id="r", task_id="app", map_index=3)
    >>> still_waiting({"r": {"app_3": "deferred"}}, mapped, "k://s/a", "k://s/a")
    True
    """
    map_index = getattr(ti, "map_index", -1)
    key = ti.task_id if map_index is None or map_index < 0 else f"{ti.task_id}_{map_index}"
    return states.get(ti.run_id, {}).get(key) == "deferred" and pushed_handle == app_handle


def moved(ti: Any, app_handle: str) -> bool:
    """True if the trigger of task instance ``ti`` waiting for ``app_handle`` is being
    cancelled because another triggerer took it over (see the module's docstring); False
    for a kill, and whenever it cannot tell."""
    if ti is None or not all(hasattr(ti, n) for n in ("dag_id", "task_id", "run_id")):
        return False
    map_index = getattr(ti, "map_index", -1)
    try:
        from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

        from airflow_anylaunch._compat import BaseXCom

        states = RuntimeTaskInstance.get_task_states(
            dag_id=ti.dag_id,
            task_ids=[ti.task_id],
            run_ids=[ti.run_id],
            map_index=None if map_index is None or map_index < 0 else map_index,
        )
        pushed = BaseXCom.get_one(
            key=XCOM_APP_HANDLE,
            dag_id=ti.dag_id,
            task_id=ti.task_id,
            run_id=ti.run_id,
            map_index=-1 if map_index is None else map_index,
        )
    except Exception as e:  # cannot tell: a kill, as before
        _log.warning("cannot tell whether the trigger of %s moved: %s", app_handle, e)
        return False
    return still_waiting(states, ti, pushed, app_handle)
