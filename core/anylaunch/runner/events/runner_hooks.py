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


class _Recent:
    """A bounded map keyed by app handle: the least recently used apps are forgotten."""

    def __init__(self, size: int) -> None:
        self._items: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        with self._lock:
            return self._items.get(key)

    def put(self, key: str, value: Any) -> bool:
        """Stores ``value``; True if it differs from what was stored."""
        with self._lock:
            new = key not in self._items or self._items[key] != value
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
            return new

    def pop(self, key: str) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


# the last state (or ``!Error``) seen of each app, and the redactor of the apps this process
# launched (their env is not in a handle: later events of the app are masked with it)
_states = _Recent(SEEN_STATES_MAX)
_secrets = _Recent(SEEN_STATES_MAX)


def forget_states() -> None:
    """Forgets every state seen: the next status of each app is recorded as a change."""
    _states.clear()


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
        return {"app_handle": subject, "secrets": _secrets.get(subject)}
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
            if ctx.redactor:
                _secrets.put(result, ctx.redactor)
    return result


def _status_event(
    app_handle: str, state: str | None, clock: Stopwatch, failure: dict[str, Any]
) -> None:
    try:
        ctx = log_event(
            "status", app_handle=app_handle, state=state, secrets=_secrets.get(app_handle)
        )
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
        if isinstance(subject, str) and _states.put(subject, f"!{type(e).__name__}"):
            _status_event(subject, None, clock, exception_fields(e))
        raise
    clock.stop()
    found = result if isinstance(result, Mapping) else {subject: result}
    for handle, status in found.items():
        state = getattr(getattr(status, "state", None), "name", None)
        if not isinstance(handle, str):
            continue
        if state is None:  # gone: its next appearance is news
            _states.pop(handle)
        elif _states.put(handle, state):
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
