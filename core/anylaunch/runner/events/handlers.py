"""Where events go: the event-handler plugins, each a :class:`logging.Handler`.

An event-handler plugin is a factory ``() -> logging.Handler`` registered with
``@register.event_handler()`` in the ``anylaunch_plugins.event_handlers`` namespace package (or
the ``anylaunch.event_handlers`` entry-point group), named after the destination it serves.
Each is made once per process, on the first event; ``plugins.registry().clear()`` makes them
again. A handler gets one :class:`logging.LogRecord` per event: its message is the event as
JSON (:meth:`AnylaunchEvent.serialize`) and ``record.anylaunch_event`` the event itself.

A handler that fails (its factory or its ``handle`` raises) never breaks the action: the first
failure of each handler is logged at WARNING, the later ones at DEBUG.

>>> get_logging_handler("null")
<NullHandler (NOTSET)>
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from anylaunch.specs.errors import InvalidSpecError, did_you_mean

if TYPE_CHECKING:
    from anylaunch.runner.events.api import AnylaunchEvent

__all__ = ["BUILTIN_DESTINATIONS", "deliver", "get_logging_handler", "registered_handlers"]

logger: logging.Logger = logging.getLogger("anylaunch.runner.events")

#: Destinations that need no plugin: ``console`` (stderr) and ``null`` (nowhere), as in TorchX.
BUILTIN_DESTINATIONS = ("console", "null")
#: The name of the records handlers get.
RECORD_NAME = "anylaunch.events"

_lock = threading.Lock()
# None: not looked up yet in this process (or since the registry was cleared)
_registered: dict[str, logging.Handler] | None = None
_builtins: dict[str, logging.Handler] = {}
_told: set[str] = set()  # the handlers whose failure was said at WARNING


def _reset() -> None:
    global _registered
    with _lock:
        _registered = None
        _told.clear()


def _failed(name: str, what: str, error: BaseException) -> None:
    level = logging.DEBUG if name in _told else logging.WARNING
    _told.add(name)
    more = "" if level == logging.DEBUG else "; its later failures are logged at DEBUG"
    logger.log(
        level,
        "event handler %r failed %s (the action goes on): %s: %s%s",
        name,
        what,
        type(error).__name__,
        error,
        more,
    )


def _load() -> dict[str, logging.Handler]:
    """Makes one handler per registered plugin; a plugin that cannot make one is skipped."""
    from anylaunch.plugins.plugin_registry import on_clear, registry
    from anylaunch.plugins.types import PluginType

    on_clear(_reset)
    try:
        factories = registry().get(PluginType.EVENT_HANDLER)
    except Exception as e:  # e.g. a bad ANYLAUNCH_PLUGINS_SOURCE: no handler, said once
        _failed("<discovery>", "to be discovered", e)
        return {}
    made: dict[str, logging.Handler] = {}
    for name, factory in sorted(factories.items()):
        try:
            handler = factory()
        except Exception as e:
            _failed(name, "to start", e)
            continue
        if not isinstance(handler, logging.Handler):
            problem = TypeError(f"its factory returned {type(handler).__name__}, not a Handler")
            _failed(name, "to start", problem)
            continue
        made[name] = handler
    return made


def registered_handlers() -> Mapping[str, logging.Handler]:
    """The handler of every event-handler plugin, by name (made on the first call).

    >>> isinstance(registered_handlers(), Mapping)
    True
    """
    global _registered
    found = _registered
    if found is None:
        with _lock:
            if _registered is None:
                _registered = _load()
            found = _registered
    return found


def any_registered() -> bool:
    """Whether any handler would see an event: the one check on the runner's hot paths."""
    found = _registered
    return bool(found if found is not None else registered_handlers())


def get_logging_handler(destination: str = "null") -> logging.Handler:
    """The handler that records events for ``destination``: the event-handler plugin of
    that name, else the built-in ``console`` or ``null``.

    Raises:
        InvalidSpecError: no plugin and no built-in has that name
    """
    if not isinstance(destination, str):
        raise InvalidSpecError(
            "destination", destination, "must be a str", "e.g. destination='console'"
        )
    plugins = registered_handlers()
    if destination in plugins:
        return plugins[destination]
    if destination in BUILTIN_DESTINATIONS:
        with _lock:
            if destination not in _builtins:
                _builtins[destination] = (
                    logging.StreamHandler(sys.stderr)
                    if destination == "console"
                    else logging.NullHandler()
                )
            return _builtins[destination]
    known = sorted({*plugins, *BUILTIN_DESTINATIONS})
    raise InvalidSpecError(
        "destination",
        destination,
        f"names no event handler.{did_you_mean(destination, known)}",
        f"use one of: {', '.join(known)}, or register an event-handler plugin of that name",
    )


def deliver(event: AnylaunchEvent, text: str, destination: str | None = None) -> None:
    """Hands ``event`` (already masked; ``text`` is its JSON) to the handler of
    ``destination``, or to every registered handler; a failing handler is skipped."""
    targets = (
        registered_handlers()
        if destination is None
        else {destination: get_logging_handler(destination)}
    )
    if not targets:
        return
    record = logging.LogRecord(RECORD_NAME, logging.INFO, __file__, 0, text, None, None)
    record.anylaunch_event = event
    for name, handler in targets.items():
        if record.levelno < handler.level:
            continue
        try:
            handler.handle(record)
        except Exception as e:  # a handler never breaks the action it reports on
            _failed(name, f"on a {event.api!r} event", e)
