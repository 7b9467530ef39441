"""How the Runner's actions become events: one decorator per recorded method.

``@recorded("schedule")`` (and ``cancel``, ``retry``) times every call and records its event;
``@recorded("status")`` on ``status`` and ``status_many`` records an app's status only when it
CHANGED since this process last saw it (or the call's failure, once per streak), so that
status loops stay quiet. With no event handler registered, a recorded method costs one
check (see the overhead measured in ``docs/events.md``).
"""

from __future__ import annotations

import collections
import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

from anylaunch.runner.events.handlers import any_registered
from anylaunch.runner.events.recording import Stopwatch, _broken, exception_fields, log_event

__all__ = ["SEEN_STATES_MAX", "forget_states", "recorded"]

P = ParamSpec("P")
R = TypeVar("R")

#: How many apps' last seen states a process keeps (the least recently seen are forgotten).
SEEN_STATES_MAX = 4096

_seen: collections.OrderedDict[str, str] = collections.OrderedDict()
_seen_lock = threading.Lock()


def _changed(app_handle: str, key: str) -> bool:
    """Remembers ``key`` (a state name, or ``!Error``) for the app; True if it is new."""
    with _seen_lock:
        if _seen.get(app_handle) == key:
            _seen.move_to_end(app_handle)
            return False
        _seen[app_handle] = key
        _seen.move_to_end(app_handle)
        while len(_seen) > SEEN_STATES_MAX:
            _seen.popitem(last=False)
        return True


def forget_states() -> None:
    """Forgets every state seen: the next status of each app is recorded as a change."""
    with _seen_lock:
        _seen.clear()


def _about(runner: Any, subject: Any) -> dict[str, Any]:
    """The fields an action's subject gives: a request (``schedule``) or a handle."""
    app = getattr(subject, "_app", None)
    if app is not None:  # a request made by Runner.dryrun
        return {
            "scheduler": getattr(subject, "_scheduler", None),
            "session": getattr(runner, "session_name", None),
            "runcfg": getattr(subject, "_cfg", None),
            "app": app,
        }
    if isinstance(subject, str):
        return {"app_handle": subject}
    return {"session": getattr(runner, "session_name", None)}


def _timed(api: str, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    subject = args[1] if len(args) > 1 else next(iter(kwargs.values()), None)
    try:
        ctx = log_event(api, **_about(args[0], subject))
    except Exception as e:  # an event that cannot be made never stops the action
        _broken(f"make a {api!r} event", e)
        return fn(*args, **kwargs)
    with ctx:
        result = fn(*args, **kwargs)
        if isinstance(result, str):
            if api == "schedule":
                ctx.event.app_handle = result
                ctx.event.app_id = result.rpartition("/")[2]
            else:  # retry: the app launched in place of the subject
                ctx.event.new_app_handle = result
    return result


def _status_event(
    app_handle: str, state: str | None, clock: Stopwatch, failure: dict[str, Any]
) -> None:
    try:
        ctx = log_event("status", app_handle=app_handle, state=state)
        clock.fill(ctx.event)
        for name, value in failure.items():
            setattr(ctx.event, name, value)
    except Exception as e:
        _broken("make a 'status' event", e)
        return
    ctx.record()


def _status(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    subject = args[1] if len(args) > 1 else next(iter(kwargs.values()), None)
    clock = Stopwatch()
    try:
        result = fn(*args, **kwargs)
    except Exception as e:  # a failing call is news once per streak of the same failure
        clock.stop()
        if isinstance(subject, str) and _changed(subject, f"!{type(e).__name__}"):
            _status_event(subject, None, clock, exception_fields(e))
        raise
    clock.stop()
    found = result if isinstance(result, Mapping) else {subject: result}
    for handle, status in found.items():
        state = getattr(getattr(status, "state", None), "name", None)
        if not isinstance(handle, str):
            continue
        if state is None:  # gone: its next appearance is news
            with _seen_lock:
                _seen.pop(handle, None)
        elif _changed(handle, state):
            _status_event(handle, state, clock, {})
    return result


def recorded(api: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Makes a Runner method record its ``api`` event (``status``: on a change only).

    The method's first argument after ``self`` is its subject: a request made by
    ``Runner.dryrun`` (``schedule``) or an app handle; a returned handle is the new app's.
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def action(*args: P.args, **kwargs: P.kwargs) -> R:
            if not any_registered():  # the hot path: nobody listens
                return fn(*args, **kwargs)
            if api == "status":
                return _status(fn, *args, **kwargs)
            return _timed(api, fn, *args, **kwargs)

        return action

    return decorate
