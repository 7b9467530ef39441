"""What ``anylaunch run --wait`` shows while it waits: one line per role (its state, how many
of its replicas run, finished and failed, and the time waited). An array app gets one line
for its indices: ``succeeded/failed/running of N`` (its state by the array rule).

On a terminal (stderr is a TTY, ``TERM`` is not ``dumb`` and ``NO_COLOR`` is unset) the lines
are redrawn in place with ANSI cursor-up and clear-line sequences; log lines of ``--log``
are written above them (the block is erased, the line written, the block redrawn). Elsewhere
(a pipe, a file, CI) a plain line is written only when a role changes. Everything goes to
stderr: stdout stays for the results scripts read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from anylaunch.cli.colors import ANSI_GREEN, ANSI_RED, ANSI_RESET, colors_enabled
from anylaunch.cli.tables import format_table

if TYPE_CHECKING:
    from anylaunch.runner.api import Runner
    from anylaunch.specs.api import AppState, AppStatus

__all__ = [
    "CLEAR_LINE",
    "CURSOR_UP",
    "LiveView",
    "PlainView",
    "RoleProgress",
    "StatusView",
    "choose_view",
    "format_elapsed",
    "logs_through",
    "role_progress",
    "terminal_width",
    "wants_live_view",
    "watch",
]

#: Moves the cursor one line up.
CURSOR_UP = "\x1b[1A"
#: Clears the line the cursor is on.
CLEAR_LINE = "\x1b[2K"
#: How often the live view redraws the time waited while nothing else happens.
TICK_S = 1.0


@dataclass(frozen=True)
class RoleProgress:
    """Where one role stands: its state and how many of its ``total`` replicas are running,
    finished (SUCCEEDED) and failed (ended otherwise: FAILED, CANCELLED)."""

    role: str
    state: AppState
    running: int
    finished: int
    failed: int
    total: int
    #: counts of an array's indices (not of replicas)
    array: bool = False

    def cells(self) -> list[str]:
        """The role's cells of the progress table (without the time).

        >>> from anylaunch.specs.api import AppState
        >>> RoleProgress("echo", AppState.RUNNING, 1, 0, 0, 2).cells()
        ['echo', 'RUNNING', '1/2 running', '0/2 finished', '0/2 failed']
        >>> RoleProgress("echo", AppState.RUNNING, 4, 12, 1, 20, array=True).cells()
        ['echo', 'RUNNING', 'array 12 succeeded / 1 failed / 4 running of 20']
        """
        n = self.total
        if self.array:
            return [
                self.role,
                self.state.name,
                f"array {self.finished} succeeded / {self.failed} failed / "
                f"{self.running} running of {n}",
            ]
        return [
            self.role,
            self.state.name,
            f"{self.running}/{n} running",
            f"{self.finished}/{n} finished",
            f"{self.failed}/{n} failed",
        ]


def _role_state(app_state: AppState, replica_states: list[AppState]) -> AppState:
    from anylaunch.specs.api import AppState

    if not replica_states:
        return app_state
    if AppState.RUNNING in replica_states:
        return AppState.RUNNING
    if all(s.is_terminal() for s in replica_states):
        for worst in (AppState.FAILED, AppState.CANCELLED):
            if worst in replica_states:
                return worst
        return AppState.SUCCEEDED
    return max(s for s in replica_states if not s.is_terminal())


def role_progress(status: AppStatus) -> list[RoleProgress]:
    """One :class:`RoleProgress` per role of ``status`` (one named ``app`` for a scheduler
    that reports no roles). A role is RUNNING while any replica runs, FAILED (CANCELLED)
    once all ended and one failed (was cancelled), else SUCCEEDED once all ended.

    >>> from anylaunch.specs.api import AppState, AppStatus, ReplicaStatus, RoleStatus
    >>> status = AppStatus(AppState.RUNNING, roles=[RoleStatus("w", [
    ...     ReplicaStatus(0, AppState.RUNNING, "w", "h"),
    ...     ReplicaStatus(1, AppState.FAILED, "w", "h")])])
    >>> [(p.role, p.state.name, p.running, p.failed, p.total) for p in role_progress(status)]
    [('w', 'RUNNING', 1, 1, 2)]
    >>> role_progress(AppStatus(AppState.PENDING))[0].state.name
    'PENDING'

    An array app has one line for its indices, in the app's state (the array rule):

    >>> from anylaunch.specs.array_status import ArrayStatus
    >>> array = ArrayStatus(20, {0: AppState.SUCCEEDED, 1: AppState.FAILED, 2: AppState.RUNNING})
    >>> role_progress(AppStatus(AppState.RUNNING, array=array))[0].cells()
    ['app', 'RUNNING', 'array 1 succeeded / 1 failed / 1 running of 20']
    """
    from anylaunch.specs.api import AppState

    if status.array is not None:
        array = status.array
        return [
            RoleProgress(
                status.roles[0].role if status.roles else "app",
                status.state,
                running=len(array.in_state(AppState.RUNNING)),
                finished=len(array.in_state(AppState.SUCCEEDED)),
                failed=len(array.failed()),
                total=len(array.indices()),
                array=True,
            )
        ]
    if not status.roles:
        return [RoleProgress("app", status.state, 0, 0, 0, 0)]
    progress = []
    for role in status.roles:
        states = [r.state for r in role.replicas]
        finished = sum(1 for s in states if s == AppState.SUCCEEDED)
        failed = sum(1 for s in states if s.is_terminal() and s != AppState.SUCCEEDED)
        running = sum(1 for s in states if s == AppState.RUNNING)
        state = _role_state(status.state, states)
        progress.append(RoleProgress(role.role, state, running, finished, failed, len(states)))
    return progress


def format_elapsed(seconds: float) -> str:
    """A duration as ``12s``, ``3m05s`` or ``2h03m05s``.

    >>> format_elapsed(12.7), format_elapsed(185), format_elapsed(7385)
    ('12s', '3m05s', '2h03m05s')
    """
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


class StatusView(Protocol):
    """What the waiting loop tells a view: each status seen, the passing time, log lines."""

    #: the last status seen (None: none yet)
    last: AppStatus | None

    def update(self, status: AppStatus | None) -> None:
        """A status was observed (None: the scheduler no longer knows the app)."""

    def tick(self) -> None:
        """Time passed (the live view redraws the time waited)."""

    def line(self, text: str) -> None:
        """Writes one line of text (a log line) without garbling the view."""

    def close(self) -> None:
        """The wait is over: leaves the last state on screen."""


class _Progress:
    """The roles' latest progress and the time each one has been waited for."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.began = clock()
        self.roles: list[RoleProgress] = []
        self.ended_at: dict[str, float] = {}

    def update(self, status: AppStatus) -> None:
        self.roles = role_progress(status)
        now = self.clock()
        for p in self.roles:
            if p.state.is_terminal():
                self.ended_at.setdefault(p.role, now)
            else:
                self.ended_at.pop(p.role, None)

    def elapsed(self, role: str) -> str:
        return format_elapsed(self.ended_at.get(role, self.clock()) - self.began)

    def rows(self) -> list[list[str]]:
        return [[*p.cells(), self.elapsed(p.role)] for p in self.roles]


class _ProgressView:
    """What both views share: the roles' progress, the last status seen and the lock that
    keeps the log threads' writes whole."""

    def __init__(self, stream: TextIO, clock: Callable[[], float]) -> None:
        self._out = stream
        self._progress = _Progress(clock)
        self._lock = threading.Lock()
        self.last: AppStatus | None = None

    def update(self, status: AppStatus | None) -> None:
        if status is None:
            return
        with self._lock:
            self.last = status
            self._progress.update(status)
            self._show()

    def _show(self) -> None:
        """Shows the progress :meth:`update` just took in (the lock is held)."""
        raise NotImplementedError


class PlainView(_ProgressView):
    """For a stream that is not a terminal: one plain line per role whenever the role
    changes (state or replica counts), ``anylaunch: ROLE STATE ...``.

    >>> import io
    >>> from anylaunch.specs.api import AppState, AppStatus
    >>> out = io.StringIO()
    >>> view = PlainView(out, clock=lambda: 0.0)
    >>> for state in (AppState.PENDING, AppState.PENDING, AppState.SUCCEEDED):
    ...     view.update(AppStatus(state))
    >>> print(out.getvalue(), end="")
    anylaunch: app  PENDING  0/0 running  0/0 finished  0/0 failed  0s
    anylaunch: app  SUCCEEDED  0/0 running  0/0 finished  0/0 failed  0s
    """

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(stream, clock)
        self._shown: dict[str, RoleProgress] = {}

    def _show(self) -> None:
        for p in self._progress.roles:
            if self._shown.get(p.role) != p:
                self._shown[p.role] = p
                cells = [*p.cells(), self._progress.elapsed(p.role)]
                self._out.write("anylaunch: " + "  ".join(cells) + "\n")
        self._out.flush()

    def tick(self) -> None:
        pass

    def line(self, text: str) -> None:
        with self._lock:
            self._out.write(text + "\n")
            self._out.flush()

    def close(self) -> None:
        pass


class LiveView(_ProgressView):
    """For a terminal: the roles' lines redrawn in place (each write erases the lines drawn
    before with :data:`CURSOR_UP` + :data:`CLEAR_LINE`). Lines are cut to the terminal's
    width, so a wrapped line never throws the count off. Thread-safe: log readers call
    :meth:`line` from their threads.

    >>> import io
    >>> from anylaunch.specs.api import AppState, AppStatus
    >>> out = io.StringIO()
    >>> view = LiveView(out, clock=lambda: 0.0, width=lambda: 80, color=False)
    >>> view.update(AppStatus(AppState.PENDING))
    >>> view.line("echo/0 hi")
    >>> out.getvalue().split("\\n")
    ['app  PENDING  0/0 running  0/0 finished  0/0 failed  0s',
     '\\x1b[1A\\x1b[2Kecho/0 hi',
     'app  PENDING  0/0 running  0/0 finished  0/0 failed  0s',
     '']
    """

    def __init__(
        self,
        stream: TextIO,
        clock: Callable[[], float] = time.monotonic,
        width: Callable[[], int] | None = None,
        color: bool = True,
    ) -> None:
        super().__init__(stream, clock)
        self._width = width or (lambda: terminal_width(stream))
        self._color = color
        self._drawn = 0
        self._shown = ""
        self._closed = False

    def _block(self) -> str:
        rows = self._progress.rows()
        if not rows or self._closed:
            return ""
        width = max(self._width() - 1, 10)
        lines = []
        for p, text in zip(self._progress.roles, format_table(rows).splitlines(), strict=True):
            text = text[:width]
            if self._color and p.state.name == "SUCCEEDED":
                text = ANSI_GREEN + text + ANSI_RESET
            elif self._color and p.state.name in ("FAILED", "CANCELLED"):
                text = ANSI_RED + text + ANSI_RESET
            lines.append(text + "\n")
        return "".join(lines)

    def _redraw(self, above: str = "") -> None:
        """Erases the block, writes ``above`` (whole lines), draws the block again: in one
        write, so the terminal never shows a half-drawn block. An unchanged block with
        nothing above it is left alone."""
        block = self._block()
        if not above and self._drawn and block == self._shown:
            return
        self._out.write((CURSOR_UP + CLEAR_LINE) * self._drawn + above + block)
        self._out.flush()
        self._drawn, self._shown = block.count("\n"), block

    def _show(self) -> None:
        self._redraw()

    def tick(self) -> None:
        with self._lock:
            if self._drawn:
                self._redraw()

    def line(self, text: str) -> None:
        with self._lock:
            self._redraw(above=text + "\n")

    def close(self) -> None:
        with self._lock:
            self._drawn = 0  # what is on screen stays there; later lines go below it
            self._closed = True


class _LineWriter:
    """A text stream that hands each complete line to ``sink`` (for logging handlers)."""

    def __init__(self, sink: Callable[[str], None]) -> None:
        self._sink = sink
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._sink(line)
        return len(text)

    def flush(self) -> None:
        pass


@contextlib.contextmanager
def logs_through(view: StatusView, stream: TextIO | None = None) -> Iterator[None]:
    """While inside, the root logger's handlers that write to ``stream`` (default: stderr)
    write through ``view.line`` when ``view`` is a :class:`LiveView`, so a warning logged
    while it waits lands above the redrawn lines instead of inside them.

    >>> import io, logging
    >>> out = io.StringIO()
    >>> view = LiveView(out, width=lambda: 80, color=False)
    >>> handler = logging.StreamHandler(out)
    >>> logging.getLogger().addHandler(handler)
    >>> with logs_through(view, out):
    ...     logging.getLogger("demo").warning("careful")
    >>> logging.getLogger().removeHandler(handler)
    >>> handler.stream is out, out.getvalue()
    (True, 'careful\\n')
    """
    if not isinstance(view, LiveView):
        yield
        return
    target = stream if stream is not None else sys.stderr
    writer = _LineWriter(view.line)
    swapped: list[tuple[logging.StreamHandler[Any], Any]] = []
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is target:
            swapped.append((handler, handler.setStream(writer)))
    try:
        yield
    finally:
        for handler, old in swapped:
            handler.setStream(old)


def terminal_width(stream: TextIO) -> int:
    """The width of the terminal ``stream`` writes to (80 when it cannot tell).

    >>> import io
    >>> terminal_width(io.StringIO()) > 0
    True
    """
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = shutil.get_terminal_size().columns
    return columns if columns > 0 else 80


def wants_live_view(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """True if ``stream`` is a terminal that may be redrawn: the rule of
    :func:`anylaunch.cli.colors.colors_enabled` (a TTY, not ``TERM=dumb``, no ``NO_COLOR``).

    >>> import io
    >>> wants_live_view(io.StringIO())
    False
    """
    return colors_enabled(stream, environ)


def choose_view(stream: TextIO, environ: Mapping[str, str] | None = None) -> StatusView:
    """The live view on a terminal that may be redrawn (see :func:`wants_live_view`), else
    the plain one.

    >>> import io
    >>> type(choose_view(io.StringIO())).__name__
    'PlainView'
    """
    if wants_live_view(stream, environ):
        return LiveView(stream)
    return PlainView(stream)


def watch(
    runner: Runner,
    app_handle: str,
    view: StatusView,
    wait_interval: float,
    *,
    until_started: bool = False,
    on_status: Callable[[AppStatus | None], None] | None = None,
) -> AppStatus | None:
    """Polls the app until it ends (or, with ``until_started``, has started), showing each
    status in ``view`` (and handing it to ``on_status``) and ticking it while waiting between
    polls; returns the last status (None if the scheduler no longer knows the app). The app
    is never cancelled.

    Raises:
        Exception: the backend's own error once the status calls kept failing
    """
    from anylaunch.runner.session import AppSession
    from anylaunch.runner.session_options import OptionNames
    from anylaunch.runner.watch import Done, Lost, Poll

    session = AppSession(
        runner,
        app_handle,
        poll_interval=wait_interval,
        names=OptionNames(interval="wait_interval"),
        cancel_on_timeout=False,
        cancel_on_failure=False,
        logs="off",
        on_status=view.update if on_status is None else _both(view.update, on_status),
        on_tick=_at_most_every(TICK_S, view.tick),
    )
    decision = session.watch(until_started=until_started)
    if isinstance(decision, Done):
        return decision.status
    if isinstance(decision, Poll):  # until_started, and it has
        return session.status
    if isinstance(decision, Lost) and decision.reason == "vanished":
        return None
    assert isinstance(decision, Lost) and decision.error is not None
    raise decision.error


def _both(
    first: Callable[[AppStatus | None], None], second: Callable[[AppStatus | None], None]
) -> Callable[[AppStatus | None], None]:
    def call(status: AppStatus | None) -> None:
        first(status)
        second(status)

    return call


def _at_most_every(seconds: float, fn: Callable[[], None]) -> Callable[[], None]:
    """``fn``, called at most once every ``seconds`` however often the wrapper is (the
    session ticks every 50 ms; a live view redraws once a second)."""
    last = -float("inf")

    def call() -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= seconds:
            last = now
            fn()

    return call
