"""Reading the logs of an app's replicas: which replicas an app has, and a pump that follows
several of them at once (one thread per replica) into a text stream or a callback.

Used by ``anylaunch log`` / ``anylaunch run --log`` and by :mod:`anylaunch.runner.session`, which
drives every engine's wait; :class:`LogFollower` reads by position instead, for a driver that
keeps no threads.

>>> import io, tempfile
>>> from anylaunch.runner import get_runner
>>> from anylaunch.specs import AppDef, Role
>>> app = AppDef("hello", [Role("greeter", image=".", entrypoint="echo", args=["hi"])])
>>> with (
...     tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as state,
...     get_runner(state_dir=state) as runner,  # local_cwd keeps its records in state_dir
... ):
...     handle = runner.run(app, "local_cwd")
...     runner.wait(handle, wait_interval=0.2).state.name
...     out = io.StringIO()
...     LogPump(runner, handle, find_replicas(runner, handle), out).start().join(timeout=30)
'SUCCEEDED'
True
>>> out.getvalue()
'greeter/0 hi\\n'
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

from anylaunch.runner.api import Runner
from anylaunch.runner.lines import format_line
from anylaunch.schedulers.api import Stream
from anylaunch.specs.api import AppState, parse_app_handle
from anylaunch.specs.array_status import index_ranges
from anylaunch.specs.errors import InvalidSpecError, UnknownAppException, did_you_mean

if TYPE_CHECKING:
    from anylaunch.specs.api import AppStatus

__all__ = ["LineSink", "LogFollower", "LogPump", "find_replicas", "started_replicas"]

_NOT_STARTED = (AppState.UNSUBMITTED, AppState.SUBMITTED, AppState.PENDING)

#: A callback that receives each log line: ``(role, replica_id, line)``, the line without its
#: trailing newline.
LineSink = Callable[[str, int, str], None]


def _check_replica_id(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise InvalidSpecError("replica_id", k, "must be a replica index >= 0", "e.g. 0")
    return k


def started_replicas(status: AppStatus) -> list[tuple[str, int]]:
    """The ``(role, replica_id)`` pairs of the replicas that have started (running or
    ended): the ones with a log to read. An array's pending indices have none yet.

    >>> from anylaunch.specs import AppState, AppStatus, ReplicaStatus, RoleStatus
    >>> reps = [ReplicaStatus(0, AppState.SUCCEEDED, "w", ""), ReplicaStatus(1, AppState.PENDING, "w", "")]
    >>> started_replicas(AppStatus(AppState.RUNNING, roles=[RoleStatus("w", reps)]))
    [('w', 0)]
    """
    return [
        (role_status.role, replica.id)
        for role_status in status.roles
        for replica in role_status.replicas
        if replica.state not in _NOT_STARTED
    ]


def find_replicas(
    runner: Runner,
    app_handle: str,
    role: str | None = None,
    replica_ids: Sequence[int] | None = None,
) -> list[tuple[str, int]]:
    """The ``(role, replica_id)`` pairs of an app: all of them, one role's, or the given ids
    of one role.

    The roles come from :meth:`Runner.describe`; for a scheduler that describes no roles,
    from the replica statuses of :meth:`Runner.status`.

    Args:
        runner: the runner to ask
        app_handle: the app
        role: only this role
        replica_ids: only these replicas of ``role``

    Raises:
        UnknownAppException: the scheduler does not know the app
        InvalidSpecError: the role or a replica id does not exist (with a did-you-mean)
    """
    if role is not None and (not isinstance(role, str) or not role):
        raise InvalidSpecError("role", role, "must be a role name", "e.g. 'trainer'")
    if replica_ids is not None:
        if role is None:
            raise InvalidSpecError(
                "replica_ids", replica_ids, "needs a role", "pass role= with replica_ids"
            )
        if isinstance(replica_ids, (str, bytes)) or not isinstance(replica_ids, Sequence):
            raise InvalidSpecError("replica_ids", replica_ids, "must be a list", "e.g. [0, 1]")
        replica_ids = [_check_replica_id(k) for k in replica_ids]
    app = runner.describe(app_handle)
    if app is None:
        raise UnknownAppException(app_handle)
    ids: dict[str, list[int]] = {
        # an array's replicas are its indices (one replica per index)
        r.name: list(app.array.selected) if app.array is not None else list(range(r.num_replicas))
        for r in app.roles
    }
    if not ids:  # some schedulers describe no roles: fall back on the replica statuses
        status = runner.status(app_handle)
        for role_status in status.roles if status else []:
            ids[role_status.role] = [rep.id for rep in role_status.replicas]
    counts = {name: len(found) for name, found in ids.items()}
    if role is None:
        return [(name, k) for name, found in ids.items() for k in found]
    if role not in counts:
        hint = did_you_mean(role, counts).strip()
        raise InvalidSpecError(
            "role",
            role,
            f"app {app_handle} has no such role" + (f" ({hint})" if hint else ""),
            f"use one of: {', '.join(ids) or '(no roles)'}",
        )
    if replica_ids is None:
        return [(role, k) for k in ids[role]]
    found = ids[role]
    for k in replica_ids:
        if k not in found:
            plain = found == list(range(len(found)))
            raise InvalidSpecError(
                "replica_id",
                k,
                f"role {role!r} has {len(found)} replica(s)"
                if plain
                else f"role {role!r} has no array index {k}",
                f"use ids 0..{len(found) - 1}" if plain else f"use {index_ranges(found)}",
            )
    return [(role, k) for k in replica_ids]


class LogPump:
    """Copies the log lines of several replicas to ``out``, one reader thread per replica.

    ``out`` is a text stream (each line is written whole, prefixed ``role/replica ``, and
    flushed) or a :data:`LineSink` callback. Either is called under a lock, one line at a
    time, from the reader threads: keep it quick (e.g. put the line on a queue). Errors
    raised while reading (or by ``out``) end that replica's reader and are kept in
    :attr:`errors` rather than lost in a thread.

    The threads are daemons: a tail that never ends does not keep the process alive.

    Args:
        runner: the runner the readers share, or a callable that makes a runner for each
            reader (closed when the reader ends): for a caller that keeps using its own
            runner from another thread meanwhile, since schedulers need not be thread-safe
        app_handle: the app
        replicas: the ``(role, replica_id)`` pairs to read (see :func:`find_replicas`)
        out: a text stream, or a callback ``(role, replica_id, line)``
        regex: only lines matching it
        should_tail: follow the logs until the app ends
        streams: which output to read (default: the scheduler's choice)
    """

    def __init__(
        self,
        runner: Runner | Callable[[], Runner],
        app_handle: str,
        replicas: Sequence[tuple[str, int]],
        out: TextIO | LineSink,
        regex: str | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> None:
        if not isinstance(runner, Runner) and not callable(runner):
            raise InvalidSpecError(
                "runner",
                type(runner).__name__,
                "must be a Runner or a callable that returns one",
                "pass get_runner() (or e.g. functools.partial(get_runner, 'my-session'))",
            )
        parse_app_handle(app_handle)
        if regex is not None:
            try:
                re.compile(regex)
            except (re.error, TypeError) as e:
                raise InvalidSpecError(
                    "regex", regex, f"is not a regular expression ({e})", "fix the pattern"
                ) from None
        if streams is not None and not isinstance(streams, Stream):
            raise InvalidSpecError(
                "streams", streams, "must be a Stream or None", "e.g. Stream.COMBINED"
            )
        self._sink: LineSink | None = None
        self._stream: TextIO | None = None
        if callable(out):
            self._sink = out
        elif callable(getattr(out, "write", None)):
            self._stream = out
        else:
            raise InvalidSpecError(
                "out",
                type(out).__name__,
                "must be a text stream or a callable (role, replica_id, line)",
                "pass e.g. sys.stdout or a function",
            )
        self.errors: list[tuple[str, int, Exception]] = []
        self._runner = runner
        self._app_handle = app_handle
        self._regex = regex
        self._should_tail = should_tail
        self._streams = streams
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._pumped: set[tuple[str, int]] = set()
        self._started = False
        self.add(replicas)

    def start(self) -> LogPump:
        """Starts reading every replica; returns self."""
        self._started = True
        for thread in list(self._threads):
            if thread.ident is None:
                thread.start()
        return self

    def add(self, replicas: Iterable[tuple[str, int]]) -> int:
        """Reads these replicas too (those not read yet), at once if the pump has started:
        an array's indices join as they start, so that a 1,000-index array holds about as
        many reader threads as it runs indices at once. Returns how many were added."""
        pairs = _checked_pairs(replicas)
        added = 0
        for role, k in pairs:
            if (role, k) in self._pumped:
                continue
            self._pumped.add((role, k))
            thread = threading.Thread(
                target=self._pump, args=(role, k), daemon=True, name=f"{role}/{k}"
            )
            self._threads.append(thread)
            added += 1
            if self._started:
                thread.start()
        return added

    def join(self, timeout: float | None = None) -> bool:
        """Waits for all readers to finish (at most ``timeout`` seconds; 0 just checks);
        True if they did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in list(self._threads):
            # short joins keep the main thread responsive to Ctrl-C
            while thread.is_alive():
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                thread.join(0.2 if deadline is None else min(0.2, deadline - time.monotonic()))
        return True

    def _pump(self, role: str, k: int) -> None:
        try:
            if isinstance(self._runner, Runner):
                self._read(self._runner, role, k)
            else:
                with self._runner() as runner:
                    self._read(runner, role, k)
        except Exception as e:  # reported by the caller on its own thread
            with self._lock:
                self.errors.append((role, k, e))

    def _read(self, runner: Runner, role: str, k: int) -> None:
        prefix = f"{role}/{k} "
        for line in runner.log_lines(
            self._app_handle,
            role,
            k,
            regex=self._regex,
            should_tail=self._should_tail,
            streams=self._streams,
        ):
            text = line[:-1] if line.endswith("\n") else line
            with self._lock:
                if self._sink is not None:
                    self._sink(role, k, text)
                elif self._stream is not None:
                    self._stream.write(prefix + text + "\n")
                    self._stream.flush()


def _checked_pairs(replicas: object) -> list[tuple[str, int]]:
    """``replicas`` as a list of ``(role, replica_id)`` pairs, or the error naming them."""
    pairs = (
        list(replicas)
        if isinstance(replicas, Iterable) and not isinstance(replicas, (str, bytes))
        else None
    )
    if pairs is None or not all(
        isinstance(pair, tuple)
        and len(pair) == 2
        and isinstance(pair[0], str)
        and pair[0]
        and isinstance(pair[1], int)
        and not isinstance(pair[1], bool)
        and pair[1] >= 0
        for pair in pairs
    ):
        raise InvalidSpecError(
            "replicas",
            replicas,
            "must be a list of (role, replica_id) pairs",
            "pass find_replicas(runner, app_handle), e.g. [('trainer', 0)]",
        )
    return pairs


def _close(iterable: Iterable[str]) -> None:
    close = getattr(iterable, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):
            close()


class LogFollower:
    """Reads, on each :meth:`poll`, the lines an app's replicas wrote since the last one: the
    log reader of a driver that holds no reader threads (the Airflow trigger, whose position
    must survive a triggerer restart).

    The cursor (:attr:`positions`: lines already read per ``role/replica``) is JSON-friendly.
    Each poll re-reads the logs from the start through ``Runner.log_lines`` (portable across
    schedulers) and skips what was already read. A line still being written (no newline yet)
    is held back until the app ends.

    Args:
        positions: the cursor to start from (default: the beginning of every log)
        roles: only these roles (default: all)
        replicas: only these replica ids (default: all)
    """

    def __init__(
        self,
        positions: Mapping[str, int] | None = None,
        roles: Sequence[str] | None = None,
        replicas: Sequence[int] | None = None,
    ) -> None:
        self.positions: dict[str, int] = {str(k): int(v) for k, v in (positions or {}).items()}
        self.roles = None if roles is None else set(roles)
        self.replicas = None if replicas is None else set(replicas)
        self._broken: set[str] = set()
        self._warned: set[str] = set()
        self._described: list[tuple[str, int]] | None = None
        # an array's indices read once more after they ended: re-reading 1,000 finished logs
        # on every poll would cost more than the array's status
        self._ended: set[str] = set()
        self._read_out: set[str] = set()

    def _targets(self, runner: Runner, handle: str, status: AppStatus) -> list[tuple[str, int]]:
        if status.array is not None:  # an array: the indices that started and are not read out
            return [
                (role, k)
                for role, k in started_replicas(status)
                if f"{role}/{k}" not in self._read_out
                and (self.roles is None or role in self.roles)
                and (self.replicas is None or k in self.replicas)
            ]
        found = [(rs.role, rep.id) for rs in status.roles for rep in rs.replicas]
        if not found:  # the scheduler reports no replica statuses: use the app's roles
            if self._described is None:
                app = runner.describe(handle)
                self._described = [
                    (role.name, i)
                    for role in (app.roles if app else [])
                    for i in range(role.num_replicas)
                ]
            found = self._described
        return [
            (role, k)
            for role, k in found
            if (self.roles is None or role in self.roles)
            and (self.replicas is None or k in self.replicas)
        ]

    def poll(
        self, runner: Runner, handle: str, status: AppStatus, warn: Callable[[str], None]
    ) -> list[str]:
        """The new lines of the selected replicas, each ``role/replica text`` (unmasked).

        A scheduler that cannot iterate logs is reported once through ``warn`` and skipped
        from then on; other read errors are reported once and retried on the next poll.
        """
        final = status.is_terminal()
        try:
            targets = self._targets(runner, handle, status)
        except Exception as e:  # logs are a convenience: never fail the wait for them
            if "" not in self._warned:
                self._warned.add("")
                warn(f"cannot tell the replicas of {handle} yet: {e}")
            return []
        out: list[str] = []
        for role, k in targets:
            key = f"{role}/{k}"
            if key in self._broken:
                continue
            start = self.positions.get(key, 0)
            read = 0
            lines: Iterable[str] = ()
            try:
                lines = runner.log_lines(handle, role, k)
                for i, line in enumerate(lines):
                    if i < start:
                        continue
                    if not line.endswith("\n") and not final:
                        break  # still being written: read it whole next time
                    out.append(format_line(role, k, line))
                    read += 1
            except NotImplementedError as e:  # the scheduler cannot iterate logs at all
                self._broken.add(key)
                warn(f"not streaming the logs of {key} of {handle}: {e}")
            except Exception as e:  # logs are a convenience: never fail the wait for them
                if key not in self._warned:
                    self._warned.add(key)
                    warn(f"cannot read the logs of {key} of {handle} yet: {e}")
            finally:
                _close(lines)
                self.positions[key] = start + read
        if status.array is not None:
            ended = {
                f"{rs.role}/{rep.id}"
                for rs in status.roles
                for rep in rs.replicas
                if rep.state.is_terminal()
            }
            self._read_out |= ended & self._ended  # read at least once since it ended
            self._ended = ended
        return out
