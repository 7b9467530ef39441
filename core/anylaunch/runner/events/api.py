"""The event a runner action produces (TorchX's ``TorchxEvent``, named ``AnylaunchEvent``).

>>> event = AnylaunchEvent(session="s", scheduler="local_cwd", api="schedule", app_id="a-1")
>>> again = AnylaunchEvent.deserialize(event.serialize())
>>> again == event, again.source
(True, <SourceType.UNKNOWN: '<unknown>'>)
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any

from anylaunch.specs.errors import InvalidSpecError

__all__ = ["AnylaunchEvent", "SourceType"]


class SourceType(str, enum.Enum):
    """Where the action that produced an event came from (as TorchX's ``SourceType``)."""

    UNKNOWN = "<unknown>"
    INTERNAL = "INTERNAL"
    EXTERNAL = "EXTERNAL"


@dataclasses.dataclass
class AnylaunchEvent:
    """One runner action: what it acted on, how long it took, and how it failed if it did.

    A handler sees it with ``runcfg`` and ``app_metadata`` masked by the secret policy
    (:mod:`anylaunch.specs.secrets`) and its free text redacted of the app's secret values.

    Args:
        session: the session (runner name) of the app's handle
        scheduler: the scheduler the action went to
        api: the action: ``schedule``, ``status``, ``cancel``, ``retry``, ``archive``, ...
        app_id: the id the scheduler gave the app
        app_image: the image of the app's first role
        app_metadata: the app's metadata (values as text)
        runcfg: the run options, as a JSON object
        raw_exception: the traceback of the action's exception
        source: where the action came from
        cpu_time_usec: CPU time the action took, in microseconds
        wall_time_usec: wall time the action took, in microseconds
        start_epoch_time_usec: when the action started, in microseconds since the epoch
        workspace: the workspace built into the first role
        exception_type: the name of the exception's class
        exception_message: the exception's message
        exception_source_location: where it was raised, as JSON ``{filename, lineno, name}``
        error_code: a scheduler-classified error code, if the scheduler gave one
        app_handle: the app's handle (an anylaunch addition, as are the fields below)
        state: the app's state (``status`` events: the new state; ``archive``: the final one)
        new_app_handle: the app launched in place of ``app_handle`` (``retry``)
        detail: what else the action says (``archive``: where it wrote)
    """

    session: str
    scheduler: str
    api: str
    app_id: str | None = None
    app_image: str | None = None
    app_metadata: dict[str, str] | None = None
    runcfg: str | None = None
    raw_exception: str | None = None
    source: SourceType = SourceType.UNKNOWN
    cpu_time_usec: int | None = None
    wall_time_usec: int | None = None
    start_epoch_time_usec: int | None = None
    workspace: str | None = None
    exception_type: str | None = None
    exception_message: str | None = None
    exception_source_location: str | None = None
    error_code: int | None = None
    app_handle: str | None = None
    state: str | None = None
    new_app_handle: str | None = None
    detail: str | None = None

    def __str__(self) -> str:
        return self.serialize()

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-able data (``source`` as its value).

        >>> AnylaunchEvent("s", "k", "cancel").to_dict()["source"]
        '<unknown>'
        """
        data = dataclasses.asdict(self)
        data["source"] = self.source.value
        return data

    def serialize(self) -> str:
        """The event as one line of JSON (what a logging handler's record says)."""
        return json.dumps(self.to_dict(), default=str)

    @staticmethod
    def deserialize(data: str | AnylaunchEvent) -> AnylaunchEvent:
        """Reads back :meth:`serialize` output (an event is returned as is). Fields it does not
        know (from a newer anylaunch) are ignored; an unknown ``source`` reads as UNKNOWN.

        >>> AnylaunchEvent.deserialize('{"session": "s"}')
        Traceback (most recent call last):
        ...
        anylaunch.specs.errors.InvalidSpecError: event=... is invalid: lacks the field(s) api, scheduler. Fix: ...

        Raises:
            InvalidSpecError: ``data`` is not a JSON object of an event
        """
        if isinstance(data, AnylaunchEvent):
            return data
        fix = "pass the text AnylaunchEvent.serialize() made"
        try:
            raw = json.loads(data) if isinstance(data, str) else None
        except ValueError:
            raw = None
        if not isinstance(raw, dict):
            shown = data[:80] if isinstance(data, str) else type(data).__name__
            raise InvalidSpecError("event", shown, "is not a JSON object", fix)
        names = {f.name for f in dataclasses.fields(AnylaunchEvent)}
        known = {k: v for k, v in raw.items() if k in names}
        missing = sorted({"session", "scheduler", "api"} - known.keys())
        if missing:
            raise InvalidSpecError(
                "event", data[:80], f"lacks the field(s) {', '.join(missing)}", fix
            )
        try:
            known["source"] = SourceType(known.get("source", SourceType.UNKNOWN))
        except ValueError:
            known["source"] = SourceType.UNKNOWN
        return AnylaunchEvent(**known)
