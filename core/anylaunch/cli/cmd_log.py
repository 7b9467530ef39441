"""``anylaunch log``: print (or follow) the logs of an app's replicas.

Each line is prefixed ``role/replica `` so interleaved replicas stay readable, and the
app's secret env values (names that look secret, or named by ``--secret-env``) are masked;
``--json`` prints JSON lines ``{"role", "replica", "line"}`` instead (the line without its
newline). Every replica is read on its own thread
(:class:`anylaunch.runner.logs.LogPump`), so tailing many replicas shows lines as they are
written.

In an array app each index is a replica of its one role, so its lines are prefixed
``role/index``; ``--index 7`` (or ``3,17``, ``0-9``) reads those indices, as
``HANDLE/ROLE/7`` does.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from anylaunch.cli.arrays import array_replicas, parse_index_flag
from anylaunch.cli.cmd_base import (
    SubCommand,
    add_json_argument,
    add_secret_env_argument,
    describe_redactor,
    secret_env_names,
)
from anylaunch.cli.output import print_json_line

if TYPE_CHECKING:
    from anylaunch.runner.api import Runner
    from anylaunch.runner.logs import LineSink
    from anylaunch.specs.api import AppStatus

logger: logging.Logger = logging.getLogger(__name__)

ID_FORMAT = "SCHEDULER://SESSION/APP_ID[/ROLE[/REPLICA_ID,...]]"

_IDENTIFIER = re.compile(
    r"^(?P<handle>[A-Za-z0-9_.-]+://[^/\s]*/[^/\s]+)"
    r"(?:/(?P<role>[^/\s]+)(?:/(?P<replicas>\d+(?:,\d+)*),?)?)?/?$"
)

#: States in which a replica has no logs yet.


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
    """Polls until the app has started (a pending replica has no logs to read), by the core
    lifecycle policy's meaning of "started" (RUNNING or already ended).

    Raises:
        UnknownAppException: the scheduler does not know the app.
    """
    from anylaunch.runner.session import AppSession
    from anylaunch.runner.watch import Lost
    from anylaunch.specs.errors import UnknownAppException

    logger.debug("waiting for %s to start before reading its logs...", app_handle)
    session = AppSession(
        runner, app_handle, poll_interval=poll_interval, cancel_on_timeout=False, logs="off"
    )
    decision = session.watch(until_started=True)
    if isinstance(decision, Lost):
        if decision.reason == "vanished":
            raise UnknownAppException(app_handle)
        assert decision.error is not None
        raise decision.error
    assert session.status is not None
    return session.status


def log_sink(redact: Callable[[str], str], as_json: bool) -> LineSink:
    """Where ``anylaunch log`` writes each line: stdout, ``role/replica line`` (or a JSON line
    ``{"role", "replica", "line"}``), with secrets masked by ``redact``.

    >>> from anylaunch.specs.secrets import Redactor
    >>> log_sink(Redactor(["s3cr3t-1"]), as_json=True)("echo", 0, "token=s3cr3t-1\\n")
    {"role": "echo", "replica": 0, "line": "token=***"}
    >>> log_sink(Redactor(), as_json=False)("echo", 1, "hi\\n")
    echo/1 hi
    """
    from anylaunch.runner.lines import format_line

    def to_json(role: str, replica: int, line: str) -> None:
        text = redact(line.rstrip("\n").rstrip("\r"))
        print_json_line({"role": role, "replica": replica, "line": text})

    def to_text(role: str, replica: int, line: str) -> None:
        sys.stdout.write(redact(format_line(role, replica, line)) + "\n")
        sys.stdout.flush()

    return to_json if as_json else to_text


def _index_option(value: str | None, replica_ids: list[int] | None) -> list[int] | None:
    """The indices ``--index`` names (None without it); refused when the path already
    names other replicas.

    >>> _index_option("7", [7]), _index_option(None, [1])
    ([7], None)
    >>> _index_option("7", [3])
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: --index='7' is invalid: names other indices than the path's replica ids ([3]). Fix: give the indices once: HANDLE/ROLE --index 7 or HANDLE/ROLE/7
    """
    from anylaunch.specs.errors import InvalidSpecError

    if value is None:
        return None
    indices = parse_index_flag("--index", value)
    if replica_ids is not None and sorted(set(replica_ids)) != indices:
        raise InvalidSpecError(
            "--index",
            value,
            f"names other indices than the path's replica ids ({replica_ids})",
            f"give the indices once: HANDLE/ROLE --index {value} or HANDLE/ROLE/{value}",
        )
    return indices


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
        add_json_argument(
            subparser,
            'print one JSON object per line: {"role": ..., "replica": ..., "line": ...}',
        )
        subparser.add_argument(
            "--index",
            metavar="INDICES",
            default=None,
            help="array apps: read these indices (e.g. 7, 3,17 or 0-9), as HANDLE/ROLE/7 does",
        )
        add_secret_env_argument(subparser)
        subparser.add_argument(
            "identifier",
            metavar=ID_FORMAT,
            help="the app handle, optionally narrowed to a role and replica ids",
        )

    def run(self, args: argparse.Namespace) -> int:
        from anylaunch.runner import get_runner
        from anylaunch.runner.logs import LogPump, find_replicas
        from anylaunch.specs.errors import InvalidSpecError

        app_handle, role, replica_ids = parse_identifier(args.identifier)
        _check_regex(args.regex)
        indices = _index_option(args.index, replica_ids)
        with get_runner() as runner:
            if replica_ids is None and indices is None:
                wait_until_started(runner, app_handle)
            replicas = array_replicas(
                runner, app_handle, role, indices if indices is not None else replica_ids
            )
            if replicas is None:
                if indices is not None:
                    raise InvalidSpecError(
                        "--index",
                        args.index,
                        f"{app_handle} is not an array app",
                        f"name replicas in the path instead: {app_handle}/ROLE/0,1",
                    )
                replicas = find_replicas(runner, app_handle, role, replica_ids)
            # the app's lines may print its secret env values: masked as `run --log` does
            redact = describe_redactor(runner, app_handle, secret_env_names(args.secret_env))
            out = log_sink(redact, args.json)
            pump = LogPump(
                runner, app_handle, replicas, out, args.regex, args.tail, args.streams
            ).start()
            pump.join()
        for role_name, k, error in pump.errors[1:]:
            logger.error("reading the logs of %s/%d failed: %s", role_name, k, error)
        if pump.errors:
            raise pump.errors[0][2]
        return 0
