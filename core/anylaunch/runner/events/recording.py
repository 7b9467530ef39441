"""Recording events: :func:`record` one, :class:`log_event` around an action, or
:func:`record_action` for one done elsewhere."""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from anylaunch.runner.events.api import AnylaunchEvent, SourceType
from anylaunch.runner.events.handlers import any_registered, deliver, get_logging_handler
from anylaunch.runner.events.masking import mask_event, masked_metadata, masked_runcfg
from anylaunch.specs.errors import InvalidSpecError

if TYPE_CHECKING:
    from anylaunch.specs.api import AppDef
    from anylaunch.specs.secrets import Redactor

__all__ = ["Stopwatch", "exception_fields", "log_event", "record", "record_action"]

logger: logging.Logger = logging.getLogger("anylaunch.runner.events")

_broken_once: list[bool] = []  # an event that could not be made is said once per process


def _broken(what: str, error: BaseException) -> None:
    level = logging.DEBUG if _broken_once else logging.WARNING
    _broken_once.append(True)
    logger.log(
        level, "could not %s (the action goes on): %s: %s", what, type(error).__name__, error
    )


def record(event: AnylaunchEvent, destination: str | None = None) -> None:
    """Delivers ``event``, masked (:func:`~anylaunch.runner.events.masking.mask_event`), to
    every event-handler plugin, or only to the handler of ``destination`` (a plugin's name,
    ``console`` or ``null``). A failing handler is logged and skipped; nothing is done when no
    handler is registered.

    >>> record(AnylaunchEvent(session="s", scheduler="local_cwd", api="cancel"))

    Raises:
        InvalidSpecError: ``event`` is not an event, or ``destination`` names no handler
    """
    if not isinstance(event, AnylaunchEvent):
        raise InvalidSpecError(
            "event", type(event).__name__, "is not an AnylaunchEvent", "pass AnylaunchEvent(...)"
        )
    if destination is None and not any_registered():
        return
    if destination is not None:
        get_logging_handler(destination)  # a misspelt destination is the caller's error
    try:
        shown = mask_event(event)
        text = shown.serialize()
    except Exception as e:  # never break the action over its event
        _broken(f"record a {event.api!r} event", e)
        return
    deliver(shown, text, destination)


def _session_of(app_handle: str | None) -> tuple[str, str, str | None]:
    """``(scheduler, session, app_id)`` of a handle ('' and None when it does not parse)."""
    if not app_handle:
        return "", "", None
    from anylaunch.specs.api import parse_app_handle

    try:
        parsed = parse_app_handle(app_handle)
    except Exception:
        return "", "", None
    return parsed.scheduler_backend, parsed.session_name, parsed.app_id


def _state_name(state: object) -> str | None:
    if state is None:
        return None
    return str(getattr(state, "name", state))


def exception_fields(error: BaseException) -> dict[str, str | None]:
    """The exception fields of an event for ``error`` (unmasked: the event is masked later).

    >>> exception_fields(ValueError("bad"))["exception_type"]
    'ValueError'
    """
    frames = traceback.extract_tb(error.__traceback__)
    location = (
        json.dumps(
            {"filename": frames[-1].filename, "lineno": frames[-1].lineno, "name": frames[-1].name}
        )
        if frames
        else None
    )
    return {
        "exception_type": type(error).__name__,
        "exception_message": str(error),
        "raw_exception": "".join(traceback.format_exception(error)),
        "exception_source_location": location,
    }


class Stopwatch:
    """The timing fields of an event: started on creation, read by :meth:`fill`."""

    __slots__ = ("_cpu_ns", "_wall_ns", "cpu_usec", "start_epoch_usec", "wall_usec")

    def __init__(self) -> None:
        self.start_epoch_usec = time.time_ns() // 1000
        self._cpu_ns = time.process_time_ns()
        self._wall_ns = time.perf_counter_ns()
        self.cpu_usec: int | None = None
        self.wall_usec: int | None = None

    def stop(self) -> Stopwatch:
        """Reads the clocks (the action is over)."""
        self.cpu_usec = (time.process_time_ns() - self._cpu_ns) // 1000
        self.wall_usec = (time.perf_counter_ns() - self._wall_ns) // 1000
        return self

    def fill(self, event: AnylaunchEvent) -> None:
        """Sets the event's start time, CPU time and wall time."""
        event.start_epoch_time_usec = self.start_epoch_usec
        event.cpu_time_usec, event.wall_time_usec = self.cpu_usec, self.wall_usec


def _redactor(app: AppDef | None, secrets: Redactor | None) -> Redactor | None:
    """The redactor of ``app``'s secret env values and ``secrets`` (None: nothing to mask)."""
    if app is None:
        return secrets
    from anylaunch.specs.secrets import app_redactor

    redact = app_redactor(app)
    return redact | secrets if secrets is not None else redact


class log_event:
    """Times the action in its ``with`` block and records its event at the end, with the
    exception's type, message, traceback and location if one leaves the block (the exception
    is never swallowed). Free text is redacted of the secret env values of ``app`` (and of
    ``secrets``); ``runcfg`` and ``app_metadata`` are masked by key.

    With no handler registered it does nothing (no clock is read).

    >>> with log_event("archive", app_handle="local_cwd://s/app-1", state="SUCCEEDED") as ctx:
    ...     ctx.event.detail = "file:///tmp/archive"
    >>> ctx.event.app_id, ctx.event.session, ctx.event.api
    ('app-1', 's', 'archive')

    Args:
        api: the action (``schedule``, ``archive``, ...)
        scheduler: the scheduler (default: the handle's)
        app_id: the app's id (default: the handle's)
        app_image: the image of the app's first role (default: ``app``'s)
        app_metadata: the app's metadata (default: ``app``'s)
        runcfg: the run options, a mapping or a JSON object's text
        workspace: the workspace built into the first role
        app_handle: the app's handle
        session: the session (default: the handle's)
        state: the app's state (an ``AppState`` or its name)
        app: the app: its secret env values are masked in the event's text
        secrets: more secret values to mask
        source: where the action came from
    """

    def __init__(
        self,
        api: str,
        scheduler: str | None = None,
        app_id: str | None = None,
        app_image: str | None = None,
        app_metadata: Mapping[str, Any] | None = None,
        runcfg: Mapping[str, Any] | str | None = None,
        workspace: str | None = None,
        *,
        app_handle: str | None = None,
        session: str | None = None,
        state: object = None,
        app: AppDef | None = None,
        secrets: Redactor | None = None,
        source: SourceType = SourceType.UNKNOWN,
    ) -> None:
        backend, handle_session, handle_app_id = _session_of(app_handle)
        roles = getattr(app, "roles", None) or []
        if app_image is None and roles:
            app_image = roles[0].image
        if app_metadata is None and app is not None:
            app_metadata = app.metadata or None
        if workspace is None and roles and roles[0].workspace:
            workspace = str(roles[0].workspace)
        self._redact = _redactor(app, secrets)
        self._anylaunch_event = AnylaunchEvent(
            session=session if session is not None else handle_session,
            scheduler=scheduler or backend,
            api=api,
            app_id=app_id if app_id is not None else handle_app_id,
            app_image=app_image,
            app_metadata=masked_metadata(app_metadata, self._redact),
            runcfg=masked_runcfg(runcfg, self._redact),
            source=source,
            workspace=workspace,
            app_handle=app_handle,
            state=_state_name(state),
        )
        self._clock: Stopwatch | None = None

    @property
    def event(self) -> AnylaunchEvent:
        """The event being made (fill its fields inside the block); as TorchX's
        ``ctx._torchx_event``, also reachable as ``ctx._anylaunch_event``."""
        return self._anylaunch_event

    @property
    def redactor(self) -> Redactor | None:
        """What masks the secret values of ``app`` and ``secrets`` (None: none known)."""
        return self._redact

    def __enter__(self) -> log_event:
        if any_registered():
            self._clock = Stopwatch()
            self._anylaunch_event.start_epoch_time_usec = self._clock.start_epoch_usec
        return self

    def set_scheduler_error_code(self, error_code: int | None) -> None:
        """Records the scheduler-classified error code of the action on its event."""
        self._anylaunch_event.error_code = error_code

    def failed(self, error: BaseException) -> None:
        """Records ``error`` on the event: for an action whose failure the caller handles
        itself inside the block (an archive write that must not fail the run)."""
        for name, value in exception_fields(error).items():
            setattr(self._anylaunch_event, name, value)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._clock is None:
            return
        self._clock.stop().fill(self._anylaunch_event)
        if exc_value is not None:
            self.failed(exc_value)
        self.record()

    def record(self) -> None:
        """Records the event now (``__exit__`` does it; for callers that split the event)."""
        try:
            shown = mask_event(self._anylaunch_event, self._redact)
        except Exception as e:
            _broken(f"record a {self._anylaunch_event.api!r} event", e)
            return
        record(shown)


def record_action(
    api: str,
    *,
    app_handle: str | None = None,
    state: object = None,
    app: AppDef | None = None,
    cfg: Mapping[str, Any] | None = None,
    error: BaseException | None = None,
    detail: str | None = None,
    started_at: float | None = None,
    secrets: Redactor | None = None,
) -> None:
    """Records the event of an action done elsewhere (the archive writer's ``archive``),
    untimed unless ``started_at`` is given. Never raises over the event.

    >>> import time
    >>> t0 = time.time()
    >>> record_action("archive", app_handle="local_cwd://s/app-1", state="SUCCEEDED",
    ...               detail="file:///tmp/archive/local_cwd/s/app-1", started_at=t0)

    Args:
        api: the action (``archive``)
        app_handle: the app it acted on
        state: the app's state (an ``AppState`` or its name)
        app: the app (its image, metadata, and the secret env values masked in the text)
        cfg: the run options
        error: the exception the action failed with, if it failed
        detail: what else to say (masked: e.g. where the archive was written)
        started_at: when the action started (``time.time()``): fills the wall time
        secrets: more secret values to mask
    """
    if not any_registered():
        return
    try:
        ctx = log_event(
            api, runcfg=cfg, app_handle=app_handle, state=state, app=app, secrets=secrets
        )
        event = ctx.event
        event.detail = detail
        if started_at is not None:
            event.start_epoch_time_usec = int(started_at * 1_000_000)
            event.wall_time_usec = max(0, int((time.time() - started_at) * 1_000_000))
        if error is not None:
            ctx.failed(error)
    except Exception as e:
        _broken(f"record a {api!r} event", e)
        return
    ctx.record()
