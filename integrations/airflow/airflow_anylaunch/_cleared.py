"""Whether the app a retry finds was launched before its task instance was cleared.

The core reattach rule (:func:`anylaunch.runner.driver.status_for_reattach`) adopts a live app
of an earlier try unless its cancel was requested, or unless the engine says the user ended
that try (``ended_by_user``). A cancel request alone cannot tell a clear from a crash: when a
*deferred* task is cleared, Airflow (>= 3.3) cancels its trigger, whose ``on_kill`` cancels the
app, but the cleared task instance is scheduled at the same time, and its next try may look
at the app first.

Airflow records a clear on the task instance itself: clearing it gives it a fresh set of
retries (``max_tries = try_number + retries``), while a retry after a crash or a failure keeps
``max_tries``, and a triggerer restart starts no try at all. So the task instance's
``max_tries`` is its *generation*: the operator records it next to the app's handle when it
launches (in ``task_state_store``, Airflow >= 3.3), and a later try that finds the generation
changed knows the user cleared (or marked failed, then cleared) the task instance since: the
app is not adopted but cancelled, and a fresh one launched. Where nothing was recorded (an
app launched by an older version, a crash between the launch and the record, Airflow < 3.3),
the rule stays the cancel request alone.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LAUNCH_KEY", "ended_by_user", "generation", "record_launch"]

#: The ``task_state_store`` key holding the launched app and the generation it belongs to.
LAUNCH_KEY = "anylaunch_app_launch"


def generation(ti: Any) -> int | None:
    """The task instance's generation: its ``max_tries``, which only a clear changes (None where
    it has none, e.g. a bare test object).

    >>> from types import SimpleNamespace
    >>> generation(SimpleNamespace(max_tries=3)), generation(SimpleNamespace())
    (3, None)
    """
    value = getattr(ti, "max_tries", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def record_launch(context: Any, handle: str, log: Any) -> None:
    """Records that this try's task instance generation launched ``handle`` (best effort: a
    failed write leaves the later try with the cancel request alone to decide)."""
    store = context.get("task_state_store")
    current = generation(context.get("ti"))
    if store is None or current is None:
        return
    try:
        store.set(LAUNCH_KEY, {"app_handle": handle, "max_tries": current})
    except Exception as e:
        log.warning("could not record the launch of %s: %s", handle, type(e).__name__)


def ended_by_user(context: Any, handle: str) -> bool:
    """True if ``handle`` was launched by an earlier generation of this task instance: it was
    cleared since (its try ended by the user, not by a crash). False when unknown.

    >>> class Store(dict):
    ...     def get(self, key, default=None):
    ...         return super().get(key, default)
    >>> from types import SimpleNamespace
    >>> store = Store({LAUNCH_KEY: {"app_handle": "local_cwd://s/a", "max_tries": 1}})
    >>> def context(max_tries):
    ...     return {"task_state_store": store, "ti": SimpleNamespace(max_tries=max_tries)}
    >>> ended_by_user(context(1), "local_cwd://s/a")  # a retry after a crash
    False
    >>> ended_by_user(context(2), "local_cwd://s/a")  # cleared since the launch
    True
    >>> ended_by_user(context(2), "local_cwd://s/b")  # nothing recorded about this app
    False
    """
    store = context.get("task_state_store")
    current = generation(context.get("ti"))
    if store is None or current is None:
        return False
    try:
        launch = store.get(LAUNCH_KEY)
    except Exception:
        return False
    if not isinstance(launch, dict) or launch.get("app_handle") != handle:
        return False
    launched = launch.get("max_tries")
    return isinstance(launched, int) and not isinstance(launched, bool) and launched != current
