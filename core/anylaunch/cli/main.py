"""The ``anylaunch`` command: parses the subcommand, configures logging, maps errors to exit codes.

Exit codes: 0 success; 1 error (also ``run --wait`` of an app that did not SUCCEED); 2 usage
error (including a component's bad arguments); 3 ``status`` of an unknown app; 4 the
scheduler's backend could not be reached (no cluster configured, controller down); 130 Ctrl-C.
Expected errors print one line ``anylaunch: error: <message>``; set ``ANYLAUNCH_DEBUG=1`` to
see the traceback as well.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

import anylaunch
from anylaunch.cli.cmd_base import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    SubCommand,
    eprint,
    one_line,
)
from anylaunch.cli.cmd_builtins import CmdBuiltins
from anylaunch.cli.cmd_cancel import CmdCancel
from anylaunch.cli.cmd_configure import CmdConfigure
from anylaunch.cli.cmd_delete import CmdDelete
from anylaunch.cli.cmd_describe import CmdDescribe
from anylaunch.cli.cmd_list import CmdList
from anylaunch.cli.cmd_log import CmdLog
from anylaunch.cli.cmd_reap import CmdReap
from anylaunch.cli.cmd_retry import CmdRetryFailed
from anylaunch.cli.cmd_run import CmdRun
from anylaunch.cli.cmd_runopts import CmdRunopts
from anylaunch.cli.cmd_status import CmdStatus
from anylaunch.cli.cmd_tracker import CmdTracker

#: Set to 1 to print tracebacks of expected errors too.
ENV_DEBUG = "ANYLAUNCH_DEBUG"

LOG_FORMAT = "anylaunch %(asctime)s %(levelname)-8s %(message)s"


LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def _default_log_level() -> str:
    # argparse does not check a default against choices: a bad $LOGLEVEL must not crash
    level = os.environ.get("LOGLEVEL", "").upper()
    return level if level in LOG_LEVELS else "INFO"


def get_default_sub_cmds() -> dict[str, SubCommand]:
    """Returns the built-in subcommands by name.

    >>> sorted(get_default_sub_cmds())[:3]
    ['builtins', 'cancel', 'configure']
    """
    return {
        "builtins": CmdBuiltins(),
        "cancel": CmdCancel(),
        "configure": CmdConfigure(),
        "delete": CmdDelete(),
        "describe": CmdDescribe(),
        "list": CmdList(),
        "log": CmdLog(),
        "reap": CmdReap(),
        "retry-failed": CmdRetryFailed(),
        "run": CmdRun(),
        "runopts": CmdRunopts(),
        "status": CmdStatus(),
        "tracker": CmdTracker(),
    }


def get_sub_cmds() -> dict[str, SubCommand]:
    """Returns the subcommands by name: the built-ins, then those of the ``anylaunch.cli.cmds``
    plugins (one named like a built-in replaces it; a broken one is skipped with a warning).

    >>> "run" in get_sub_cmds()
    True
    """
    from anylaunch.cli.plugin_cmds import with_plugin_cmds

    return with_plugin_cmds(get_default_sub_cmds())


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose error for an unknown subcommand says which one was meant."""

    def error(self, message: str) -> NoReturn:
        choice = re.match(r"argument COMMAND: invalid choice: '(.*?)'", message)
        if choice is not None:
            from anylaunch.specs.errors import did_you_mean

            message = f"{message}.{did_you_mean(choice.group(1), self._commands())}"
        super().error(message)

    def _commands(self) -> list[str]:
        return [
            name
            for action in self._actions
            if isinstance(action, argparse._SubParsersAction)
            for name in action.choices
        ]


#: The description of the subcommands in ``anylaunch --help`` (TorchX's
#: ``sub_parser_description``).
sub_parser_description = """Use the following commands to run operations, e.g.:
anylaunch run ${JOB_NAME}
"""


def create_parser(subcmds: dict[str, SubCommand]) -> argparse.ArgumentParser:
    """Builds the top-level parser with one subparser per subcommand.

    >>> create_parser(get_sub_cmds()).parse_args(["status", "local_cwd://s/a"]).app_handle
    'local_cwd://s/a'
    """
    parser = _Parser(
        prog="anylaunch",
        description="Launch and manage apps on local processes, containers, clusters and clouds.",
        epilog="e.g. anylaunch run --wait --log utils.echo --msg hello",
    )
    parser.add_argument(
        "--log_level",
        type=str.upper,
        default=_default_log_level(),
        choices=LOG_LEVELS,
        help="level of anylaunch's own messages on stderr (default: $LOGLEVEL, else INFO)",
    )
    parser.add_argument("--version", action="version", version=f"anylaunch {anylaunch.__version__}")
    subparsers = parser.add_subparsers(
        title="subcommands", description=sub_parser_description, metavar="COMMAND"
    )
    for name, cmd in subcmds.items():
        sub = subparsers.add_parser(name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(sub)
        sub.set_defaults(func=cmd.run, command=name)
    return parser


def _report(error: BaseException) -> None:
    if os.environ.get(ENV_DEBUG, "") not in ("", "0"):
        import traceback

        traceback.print_exception(type(error), error, error.__traceback__)
    eprint(f"anylaunch: error: {one_line(str(error)) or type(error).__name__}")


def run_main(subcmds: dict[str, SubCommand], argv: Sequence[str]) -> int:
    """Parses ``argv``, runs the chosen subcommand and returns the exit code."""
    from anylaunch.specs.errors import AnylaunchError, BackendUnreachableError

    parser = create_parser(subcmds)
    args = parser.parse_args(list(argv))
    # the CLI (never the library) configures logging: anylaunch's messages go to stderr
    # --log_level is anylaunch's own; SDKs' INFO chatter (botocore's "Found credentials")
    # stays out unless DEBUG is asked for
    level: int = getattr(logging, args.log_level)
    others = level if level <= logging.DEBUG else max(level, logging.WARNING)
    logging.basicConfig(level=others, format=LOG_FORMAT, datefmt="%H:%M:%S")
    logging.getLogger("anylaunch").setLevel(level)
    if "func" not in args:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code: int = args.func(args)
        return code
    except KeyboardInterrupt:
        eprint("anylaunch: interrupted")
        return EXIT_INTERRUPTED
    except BackendUnreachableError as e:
        # distinct from "unknown app" (3): nothing is known about the app either way
        _report(e)
        return EXIT_UNREACHABLE
    except AnylaunchError as e:
        from anylaunch.specs.builders import ComponentArgsError

        if isinstance(e, ComponentArgsError):
            # the component's own argparse message and usage, with argparse's exit code;
            # name the component as the user typed it (the error knows the function name)
            name = getattr(args, "component", None) or e.component
            usage = e.usage.replace(f"> {e.component} ", f"> {name} ", 1)
            eprint(usage)
            eprint(f"anylaunch {args.command}: error: {name}: {one_line(e.message)}")
            return EXIT_USAGE
        _report(e)
        return EXIT_ERROR
    except (ValueError, TimeoutError, NotImplementedError) as e:
        # raised with readable messages on our code paths (bad values, wait timeouts, a
        # scheduler without log support); anything else is a bug and keeps its traceback
        _report(e)
        return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``anylaunch`` console script; exits with the command's exit code."""
    try:
        code = run_main(get_sub_cmds(), sys.argv[1:] if argv is None else argv)
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader went away (e.g. `anylaunch log ... | head`): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = EXIT_ERROR
    if code == EXIT_INTERRUPTED:
        _exit_interrupted()
    if code:
        sys.exit(code)


def _exit_interrupted() -> NoReturn:
    """Ends the process with 130 however the Ctrl-C reached us.

    CPython remembers a KeyboardInterrupt that escaped code run by ``exec`` of a string
    (which dataclasses and lazy imports do) even after we caught it, and then ends the
    process *by* SIGINT at exit instead of with our code. So the exit status would depend
    on where the Ctrl-C landed; exiting here, after flushing, keeps it 130 every time.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken pipe
            stream.flush()
    os._exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
