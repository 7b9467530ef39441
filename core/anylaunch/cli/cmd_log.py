"""``anylaunch log``: print (or follow) the logs of an app's replicas.

Each line is prefixed ``role/replica `` so interleaved replicas stay readable. Every replica is
read on its own thread, so tailing many replicas shows lines as they are written.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import threading
import time
from typing import TYPE_CHECKING, TextIO

from anylaunch.cli.cmd_base import SubCommand

if TYPE_CHECKING:
    from anylaunch.runner.api import Runner
    from anylaunch.schedulers.api import Stream
    from anylaunch.specs.api import AppStatus

logger: logging.Logger = logging.getLogger(__name__)

ID_FORMAT = "SCHEDULER://SESSION/APP_ID[/ROLE[/REPLICA_ID,...]]"

_IDENTIFIER = re.compile(
    r"^(?P<handle>[A-Za-z0-9_.-]+://[^/\s]*/[^/\s]+)"
    r"(?:/(?P<role>[^/\s]+)(?:/(?P<replicas>\d+(?:,\d+)*),?)?)?/?$"
)

#: States in which a replica has no logs yet.
_NOT_STARTED = frozenset({"UNSUBMITTED", "SUBMITTED", "PENDING"})


def parse_identifier(identifier: str) -> tuple[str, str | None, list[int] | None]:
    """Splits ``HANDLE[/ROLE[/REPLICA,...]]`` into the handle, the role and the replica ids.

    >>> parse_identifier("local_cwd://default/echo-1")
    ('local_cwd://default/echo-1', None, None)
    >>> parse_identifier("local_cwd://default/echo-1/echo/0,2")
    ('local_cwd://default/echo-1', 'echo', [0, 2])
    """
    from anylaunch.specs.errors import InvalidSpecError

    match = _IDENTIFIER.match(identifier)
    if match is None:
        raise InvalidSpecError(
            "identifier",
            identifier,
            f"not of the form {ID_FORMAT}",
            "pass the handle `anylaunch run` printed, optionally followed by /ROLE or "
            "/ROLE/0,1, e.g. local_cwd://default/echo-x1y2/echo/0",
        )
    replicas = match["replicas"]
    ids = [int(i) for i in replicas.split(",")] if replicas else None
    return match["handle"], match["role"], ids


def wait_until_started(runner: Runner, app_handle: str, poll_interval: float = 1.0) -> AppStatus:
    """Polls until the app has left the queue (a pending replica has no logs to read).

    Raises:
        UnknownAppException: the scheduler does not know the app.
    """
    from anylaunch.specs.errors import UnknownAppException

    announced = False
    delay = 0.1  # local apps start at once: do not make them wait a full interval
    while True:
        status = runner.status(app_handle)
        if status is None:
            raise UnknownAppException(app_handle)
        if status.state.name not in _NOT_STARTED:
            return status
        if not announced:
            logger.debug("waiting for %s to start before reading its logs...", app_handle)
            announced = True
        time.sleep(delay)
        delay = min(delay * 2, poll_interval)


def find_replicas(
    runner: Runner, app_handle: str, role: str | None = None, replica_ids: list[int] | None = None
) -> list[tuple[str, int]]:
    """Returns the ``(role, replica_id)`` pairs to read: all of them, one role's, or the given ids.

    Raises:
        UnknownAppException: the scheduler does not know the app.
        InvalidSpecError: the role or a replica id does not exist (with a did-you-mean).
    """
    from anylaunch.specs.errors import InvalidSpecError, UnknownAppException, did_you_mean

    app = runner.describe(app_handle)
    if app is None:
        raise UnknownAppException(app_handle)
    counts = {r.name: r.num_replicas for r in app.roles}
    if not counts:  # some schedulers describe no roles: fall back on the replica statuses
        status = runner.status(app_handle)
        for role_status in status.roles if status else []:
            counts[role_status.role] = len(role_status.replicas)
    if role is None:
        return [(name, k) for name, n in counts.items() for k in range(n)]
    if role not in counts:
        hint = did_you_mean(role, counts).strip()
        raise InvalidSpecError(
            "role",
            role,
            f"app {app_handle} has no such role" + (f" ({hint})" if hint else ""),
            f"use one of: {', '.join(counts) or '(no roles)'}",
        )
    if replica_ids is None:
        return [(role, k) for k in range(counts[role])]
    for k in replica_ids:
        if k >= counts[role]:
            raise InvalidSpecError(
                "replica_id",
                k,
                f"role {role!r} has {counts[role]} replica(s)",
                f"use ids 0..{counts[role] - 1}",
            )
    return [(role, k) for k in replica_ids]


class LogPump:
    """Copies the log lines of several replicas to ``out``, one thread per replica.

    Lines are written whole (under a lock) and prefixed ``role/replica ``. Errors raised while
    reading are kept in :attr:`errors` rather than lost in a thread.
    """

    def __init__(
        self,
        runner: Runner,
        app_handle: str,
        replicas: list[tuple[str, int]],
        out: TextIO,
        regex: str | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> None:
        self.errors: list[tuple[str, int, Exception]] = []
        self._runner = runner
        self._app_handle = app_handle
        self._out = out
        self._regex = regex
        self._should_tail = should_tail
        self._streams = streams
        self._lock = threading.Lock()
        # daemon threads: a tail that never ends must not keep the CLI alive after Ctrl-C
        self._threads = [
            threading.Thread(target=self._pump, args=(role, k), daemon=True, name=f"{role}/{k}")
            for role, k in replicas
        ]

    def start(self) -> LogPump:
        """Starts reading every replica."""
        for thread in self._threads:
            thread.start()
        return self

    def join(self, timeout: float | None = None) -> bool:
        """Waits for all readers to finish (at most ``timeout`` seconds); True if they did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            # short joins keep the main thread responsive to Ctrl-C
            while thread.is_alive():
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                thread.join(0.2)
        return True

    def _pump(self, role: str, k: int) -> None:
        prefix = f"{role}/{k} "
        try:
            for line in self._runner.log_lines(
                self._app_handle,
                role,
                k,
                regex=self._regex,
                should_tail=self._should_tail,
                streams=self._streams,
            ):
                text = prefix + (line if line.endswith("\n") else line + "\n")
                with self._lock:
                    self._out.write(text)
                    self._out.flush()
        except Exception as e:  # reported by the caller on the main thread
            with self._lock:
                self.errors.append((role, k, e))


def _check_regex(regex: str | None) -> None:
    from anylaunch.specs.errors import InvalidSpecError

    if regex is None:
        return
    try:
        re.compile(regex)
    except re.error as e:
        raise InvalidSpecError(
            "--regex", regex, f"not a valid regular expression ({e})", "fix the pattern"
        ) from None


class CmdLog(SubCommand):
    help = "print or follow the logs of an app's replicas"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        from anylaunch.schedulers.api import Stream

        subparser.add_argument("--regex", type=str, help="print only lines matching this regex")
        subparser.add_argument(
            "-t", "--tail", action="store_true", help="follow the logs until the app ends"
        )
        subparser.add_argument(
            "--streams",
            type=Stream,
            choices=list(Stream),
            default=None,
            help="which output to read (default: the scheduler's choice)",
        )
        subparser.add_argument(
            "identifier",
            metavar=ID_FORMAT,
            help="the app handle, optionally narrowed to a role and replica ids",
        )

    def run(self, args: argparse.Namespace) -> int:
        from anylaunch.runner import get_runner

        app_handle, role, replica_ids = parse_identifier(args.identifier)
        _check_regex(args.regex)
        with get_runner() as runner:
            if replica_ids is None:
                wait_until_started(runner, app_handle)
            replicas = find_replicas(runner, app_handle, role, replica_ids)
            pump = LogPump(
                runner, app_handle, replicas, sys.stdout, args.regex, args.tail, args.streams
            ).start()
            pump.join()
        for role_name, k, error in pump.errors[1:]:
            logger.error("reading the logs of %s/%d failed: %s", role_name, k, error)
        if pump.errors:
            raise pump.errors[0][2]
        return 0
