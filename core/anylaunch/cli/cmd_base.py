"""What every subcommand shares: the SubCommand interface, exit codes and small helpers."""

from __future__ import annotations

import abc
import argparse
import logging
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from anylaunch.runner.api import Runner
    from anylaunch.specs.api import AppStatus
    from anylaunch.specs.secrets import Redactor

#: Exit codes of the ``anylaunch`` command.
EXIT_OK = 0
EXIT_ERROR = 1  # an error, or ``run --wait`` of an app that did not succeed
EXIT_USAGE = 2  # argparse's usage errors
EXIT_UNKNOWN_APP = 3  # ``status`` of an app the scheduler does not know
EXIT_UNREACHABLE = 4  # the scheduler's backend could not be asked (cluster down, no config)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it


class SubCommand(abc.ABC):
    """One ``anylaunch <name>`` subcommand."""

    #: one-line summary shown by ``anylaunch --help``
    help: str = ""

    @abc.abstractmethod
    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        """Adds this subcommand's arguments to its parser."""

    @abc.abstractmethod
    def run(self, args: argparse.Namespace) -> int:
        """Runs the subcommand and returns its exit code."""


class AppSubCommand(SubCommand):
    """A subcommand on one app: it takes the app's handle and ``--json``, then the arguments
    :meth:`add_options` adds, and runs on the handle once it is checked."""

    #: help of ``--json``: what the subcommand prints with it
    json_help: str = ""

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument("app_handle", help="the handle `anylaunch run` printed")
        add_json_argument(subparser, self.json_help)
        self.add_options(subparser)

    def add_options(self, subparser: argparse.ArgumentParser) -> None:
        """Adds the subcommand's own arguments (after the handle and ``--json``)."""

    def run(self, args: argparse.Namespace) -> int:
        return self.run_on(check_handle(args.app_handle), args)

    @abc.abstractmethod
    def run_on(self, app_handle: str, args: argparse.Namespace) -> int:
        """Runs the subcommand on the app (its handle is well-formed) and returns its exit
        code."""


def eprint(*values: Any, file: TextIO | None = None) -> None:
    """Prints a human-facing message to stderr (stdout is kept for results scripts read)."""
    print(*values, file=file or sys.stderr, flush=True)


def one_line(message: str) -> str:
    """Joins a possibly multi-line message into one line for an error report.

    >>> one_line("bad value\\n  Fix: use 1\\n")
    'bad value Fix: use 1'
    """
    return " ".join(part.strip() for part in message.splitlines() if part.strip())


def split_csv(value: str | None) -> list[str]:
    """Splits ``a,b, c`` into ``['a', 'b', 'c']`` (empty items dropped).

    >>> split_csv("a,b, c,")
    ['a', 'b', 'c']
    >>> split_csv(None)
    []
    """
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def check_handle(app_handle: str) -> str:
    """Validates an app handle up front, so a malformed one fails before any scheduler loads.

    >>> check_handle("local_cwd://default/echo-1")
    'local_cwd://default/echo-1'
    """
    from anylaunch.specs.api import parse_app_handle

    parse_app_handle(app_handle)
    return app_handle


def add_json_argument(parser: argparse.ArgumentParser, prints: str) -> None:
    """``--json``, for scripts: the subcommand prints ``prints`` (the flag's help) on stdout."""
    parser.add_argument("--json", action="store_true", help=prints)


def known_status(runner: Runner, app_handle: str) -> AppStatus:
    """The app's status, or UnknownAppException when its scheduler does not know the app:
    acting on an unknown app is a silent no-op for the runner, but at a terminal a typo in
    the handle deserves an error."""
    from anylaunch.specs.errors import UnknownAppException

    status = runner.status(app_handle)
    if status is None:
        raise UnknownAppException(app_handle)
    return status


def add_secret_env_argument(parser: argparse.ArgumentParser) -> None:
    """``--secret-env NAME[,NAME...]`` (repeatable): env names whose values are never shown."""
    parser.add_argument(
        "--secret-env",
        "--secret_env",
        dest="secret_env",
        action="append",
        default=None,
        metavar="NAMES",
        help="comma-separated env names whose values are secret (shown as ***), besides names "
        "containing TOKEN, SECRET, PASS, PWD, KEY, CREDENTIAL or AUTH",
    )


def secret_env_names(flags: list[str] | None, configured: str | None = None) -> list[str]:
    """The env names declared secret by ``--secret-env`` flags and the config's value.

    >>> secret_env_names(["DB_URL,CONN", "X"], "FROM_CONFIG")
    ['FROM_CONFIG', 'DB_URL', 'CONN', 'X']
    """
    names = split_csv(configured)
    for flag in flags or []:
        names += split_csv(flag)
    return names


def describe_redactor(runner: Runner, app_handle: str, declared: list[str]) -> Redactor:
    """A redactor for the secret env values of a submitted app (as the scheduler describes
    it) and the names ``declared`` secret. When the app cannot be described, it masks
    nothing (and says so at debug level): reading a status must not fail for it.
    """
    from anylaunch.specs.secrets import Redactor, app_redactor

    try:
        app = runner.describe(app_handle)
    except Exception as e:  # the status or log is still worth showing
        logging.getLogger(__name__).debug("cannot describe %s to mask secrets: %s", app_handle, e)
        return Redactor()
    return app_redactor(app, declared)
