"""``anylaunch run``: launch a component on a scheduler, optionally wait for it and stream logs.

stdout carries only the app handle (one line), so ``H=$(anylaunch run ...)`` captures it
(with ``--json``: one object ``{"app_handle": ..., "state": ...}``, printed once the app
ended when waiting); progress, the final status and, with ``--log``, the app's log lines go
to stderr (as in TorchX). While ``--wait`` waits, one line per role shows its progress,
redrawn in place on a terminal (see :mod:`anylaunch.cli.live`). ``--dryrun`` prints the app
and the native request to stdout and submits nothing.

``--array SIZE[%PARALLELISM]`` or ``--sweep FILE`` runs the component's app as one job array
(see :mod:`anylaunch.cli.arrays` and the "Job arrays and sweeps" docs page); the dryrun then
ends with every index's resolved command.

Defaults come from the ``[cli:run]`` section of ``.anylaunchconfig`` (``component``,
``scheduler``, ``scheduler_args``, ``workspace``, ``parent_run_id``, ``secret_env``); flags win
over it. Every env value that is secret (its name matches the built-in patterns or is named by
``--secret-env``) is shown as ``***`` in all that is printed, the app's log lines included.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

from anylaunch.cli.argparse_util import cli_defaults
from anylaunch.cli.arrays import add_array_arguments, array_options
from anylaunch.cli.cmd_base import (
    EXIT_ERROR,
    SubCommand,
    add_json_argument,
    add_secret_env_argument,
    eprint,
    secret_env_names,
)

# TorchX defines CmdBuiltins next to CmdRun: importable from here too
from anylaunch.cli.cmd_builtins import CmdBuiltins as CmdBuiltins
from anylaunch.cli.colors import ANSI_GREEN, ANSI_RESET
from anylaunch.cli.output import print_json
from anylaunch.cli.placement import add_placement_arguments, placement_flags

if TYPE_CHECKING:
    from collections.abc import Callable

    from anylaunch.cli.live import StatusView
    from anylaunch.cli.run_args import AnylaunchRunArgs as RunArgs
    from anylaunch.runner.api import Runner
    from anylaunch.runner.logs import LogPump
    from anylaunch.specs.api import AppStatus, CfgVal
    from anylaunch.specs.secrets import Redactor

logger: logging.Logger = logging.getLogger(__name__)

#: Keys ``[cli:run]`` may set (the dest of the matching flag).
CLI_RUN_KEYS = (
    "component",
    "scheduler",
    "scheduler_args",
    "workspace",
    "parent_run_id",
    "secret_env",
)

#: Flags ``--stdin`` may be given with: they choose how results are shown, not what runs.
_STDIN_COMPATIBLE = ("help", "stdin", "json", "secret_env")

#: Longest pause between two status polls while waiting.
WAIT_INTERVAL_S = 5.0
#: Pause between status polls while waiting for the app to start (before reading its logs).
STARTUP_POLL_S = 1.0
#: How long to let log readers drain once the app has ended.
LOG_DRAIN_TIMEOUT_S = 30.0


def split_component_args(
    component_and_args: list[str], default_component: str | None
) -> tuple[str | None, list[str]]:
    """Splits the trailing arguments into the component name and the component's arguments.

    The first argument is the component unless it looks like an option, in which case the
    component comes from ``[cli:run] component``. A leading ``--`` is dropped.

    >>> split_component_args(["utils.echo", "--msg", "hi"], None)
    ('utils.echo', ['--msg', 'hi'])
    >>> split_component_args(["--", "--msg", "hi"], "utils.echo")
    ('utils.echo', ['--msg', 'hi'])
    """
    args = list(component_and_args)
    if args[:1] == ["--"]:
        args = args[1:]
    if args and not args[0].startswith("-"):
        return args[0], args[1:]
    return default_component, args


class CmdRun(SubCommand):
    help = "launch a component (`anylaunch builtins` lists them) on a scheduler"
    _parser: argparse.ArgumentParser

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        self._parser = subparser
        subparser.add_argument(
            "-s",
            "--scheduler",
            type=str,
            action="append",
            default=None,
            help="scheduler to run on (default: [cli:run] scheduler, else the default "
            "scheduler); repeat it to list placement targets in order",
        )
        subparser.add_argument(
            "-cfg",
            "--scheduler_args",
            type=str,
            action="append",
            default=None,
            help="scheduler run options as K=V,K2=V2 (`anylaunch runopts SCHEDULER` lists "
            "them); once per -s when -s is repeated",
        )
        subparser.add_argument(
            "--dryrun",
            action="store_true",
            help="print the app and the scheduler request without submitting",
        )
        subparser.add_argument(
            "--wait",
            action="store_true",
            help="wait for the app to end; exit 0 only if it SUCCEEDED. On a terminal, one "
            "line per role is redrawn in place (state, replicas running/finished/failed, time "
            "waited); elsewhere, or with NO_COLOR or TERM=dumb, a plain line per change",
        )
        subparser.add_argument(
            "--log",
            action="store_true",
            help="stream every replica's logs (to stderr, written above the live status lines "
            "on a terminal) while waiting; implies --wait",
        )
        subparser.add_argument(
            "--tee_logs",
            action="store_true",
            help="as --log (which it implies), each line prefixed by the replica that printed "
            "it (role/replica), colored on a terminal and kept after carriage returns",
        )
        subparser.add_argument(
            "--stdin",
            action="store_true",
            help="read the run's arguments as one JSON object from standard input instead of "
            'flags: {"component_name", "scheduler", "scheduler_args", and optionally '
            '"component_args", "component_args_str", "dryrun", "wait", "log", "tee_logs", '
            '"workspace", "parent_run_id"}; only --json and --secret-env may be given too',
        )
        add_json_argument(
            subparser,
            'print {"app_handle": ..., "state": ...} on stdout instead of the bare handle '
            "(with --wait: once the app ended, with its final state); with --dryrun, the app "
            "and the request as JSON",
        )
        subparser.add_argument(
            "--workspace",
            type=str,
            default=None,
            help="local project to build into the image (schedulers that support workspaces)",
        )
        subparser.add_argument(
            "--parent_run_id",
            type=str,
            default=None,
            help="id of the run this one belongs to (set as $ANYLAUNCH_PARENT_RUN_ID in the app)",
        )
        add_secret_env_argument(subparser)
        add_array_arguments(subparser)
        add_placement_arguments(subparser)
        subparser.add_argument(
            "component_and_args",
            nargs=argparse.REMAINDER,
            metavar="COMPONENT [ARGS...]",
            help="component name (or path/file.py:fn) followed by its arguments",
        )

    def _from_stdin(self, args: argparse.Namespace) -> RunArgs:
        """Reads the run's arguments from stdin and sets the matching flags in ``args``."""
        from anylaunch.cli.run_args import run_args_from_json

        given = [
            "/".join(action.option_strings) or "COMPONENT"
            for action in self._parser._actions
            if action.dest not in _STDIN_COMPATIBLE
            and getattr(args, action.dest, None) not in (action.default, [])
        ]
        if given:
            self._parser.error(
                f"--stdin takes the run's arguments from the JSON on standard input: drop "
                f"{', '.join(given)} (set them in the JSON instead)"
            )
        if sys.stdin.isatty():
            eprint("anylaunch: reading the run's arguments as JSON; end them with Ctrl-D")
        run_args = run_args_from_json(sys.stdin.read())
        args.scheduler = [run_args.scheduler]
        for flag in ("dryrun", "wait", "log", "tee_logs", "workspace", "parent_run_id"):
            setattr(args, flag, getattr(run_args, flag))
        return run_args

    def run(self, args: argparse.Namespace) -> int:
        import os

        from anylaunch.runner import get_runner
        from anylaunch.runner.placement import Placement, Target
        from anylaunch.schedulers import get_default_scheduler_name
        from anylaunch.specs.metadata_keys import ANYLAUNCH_CONTEXT_NAME
        from anylaunch.specs.secrets import app_redactor

        # the calling context every scheduler stamps into the job (app_metadata.CONTEXT)
        os.environ[ANYLAUNCH_CONTEXT_NAME] = os.environ.get(ANYLAUNCH_CONTEXT_NAME) or "cli_run"
        defaults = cli_defaults("run", CLI_RUN_KEYS)
        run_args = self._from_stdin(args) if args.stdin else None
        component: str | None
        component_args: list[str] | dict[str, object]
        if run_args is not None:
            # only the masking of [cli:run] applies: the JSON says what runs, and how
            defaults = {k: v for k, v in defaults.items() if k == "secret_env"}
            component, component_args = run_args.component_name, run_args.arguments()
        else:
            component, component_args = split_component_args(
                args.component_and_args, defaults.get("component")
            )
        if not component:
            self._parser.error(
                "missing COMPONENT: name one (`anylaunch builtins` lists them) or set "
                "`component` in the [cli:run] section of .anylaunchconfig"
            )
        args.component = component  # lets error reports name it as typed
        schedulers = args.scheduler or [defaults.get("scheduler") or get_default_scheduler_name()]
        cfg_strs = args.scheduler_args or [defaults.get("scheduler_args", "")]
        workspace = args.workspace if args.workspace is not None else defaults.get("workspace")
        parent_run_id = args.parent_run_id or defaults.get("parent_run_id")

        secret_env = secret_env_names(args.secret_env, defaults.get("secret_env"))
        # checked before any scheduler loads: a bad flag costs nothing
        array = array_options(args)
        placing = placement_flags(args, schedulers, cfg_strs)

        with get_runner() as runner:
            cfgs = (
                [_cfg_from_json(runner, schedulers[0], run_args.scheduler_args)]
                if run_args is not None
                else [
                    runner.cfg_from_str(sched, cfg_strs[i] if len(cfg_strs) > 1 else cfg_strs[0])
                    for i, sched in enumerate(schedulers)
                ]
            )
            app = runner.materialize_component(component, component_args)
            app = array.apply(app) if array is not None else app
            # a placed launch dry-runs each target itself when it tries it
            infos = [
                runner.dryrun(app, sched, cfg, workspace, parent_run_id)
                for sched, cfg in zip(schedulers, cfgs, strict=True)
                if args.dryrun or placing is None
            ]
            redact = app_redactor(getattr(infos[0], "_app", None) if infos else app, secret_env)
            if args.dryrun:
                for sched, info in zip(schedulers, infos, strict=True):
                    if len(infos) > 1 and not args.json:
                        print(f"=== TARGET {sched} ===")
                    self._print_dryrun(info, secret_env, redact, args.json)
                return 0
            if placing is None:
                app_handle = runner.schedule(infos[0])
            else:
                targets = [
                    Target(sched, cfg, placing.startup_timeout)
                    for sched, cfg in zip(schedulers, cfgs, strict=True)
                ]
                placement = Placement(targets, placing.max_infra_retries, placing.checkpoint_root)
                app_handle = runner.run(
                    app, workspace=workspace, parent_run_id=parent_run_id, placement=placement
                )
            try:
                if not args.json:
                    # the handle alone on stdout: scripts capture it with $(anylaunch run ...)
                    print(app_handle, flush=True)
                if not (args.wait or args.log or args.tee_logs):
                    if args.json:
                        print_json(
                            {"app_handle": app_handle, "state": _state_now(runner, app_handle)}
                        )
                    eprint(
                        f"anylaunch: launched {app_handle}; follow it with `anylaunch status "
                        f"{app_handle}` or `anylaunch log --tail {app_handle}`"
                    )
                    return 0
                return wait_and_report(
                    runner,
                    app_handle,
                    log=args.log or args.tee_logs,
                    redact=redact,
                    json_out=args.json,
                    tee=args.tee_logs,
                )
            except KeyboardInterrupt:
                # Ctrl-C stops the waiting, NOT the app: waiting is an observer's act, and a
                # launch that outlives its terminal is often intended. Say how to stop it.
                eprint(
                    f"\nanylaunch: stopped waiting; {app_handle} keeps running. "
                    f"Cancel it with: anylaunch cancel {app_handle}"
                )
                raise

    @staticmethod
    def _print_dryrun(
        info: object, secret_env: list[str], redact: Redactor, json_out: bool = False
    ) -> None:
        from anylaunch.specs.api import AppDef
        from anylaunch.specs.serialize import appdef_to_dict, appdef_to_yaml

        app = getattr(info, "_app", None)
        if json_out:
            app_dict = (
                appdef_to_dict(app, mask_secrets=True, secret_env=secret_env)
                if isinstance(app, AppDef)
                else None
            )
            print_json({"app": app_dict, "request": redact(str(info))})
            return
        print("=== APPLICATION ===")
        if isinstance(app, AppDef):
            print(appdef_to_yaml(app, mask_secrets=True, secret_env=secret_env), end="")
        print("=== SCHEDULER REQUEST ===")
        # the scheduler masks the names it knows; the redactor also catches declared ones
        print(redact(str(info)))


def _cfg_from_json(runner: Runner, scheduler: str, options: dict[str, object]) -> dict[str, CfgVal]:
    """The run options of ``run --stdin``'s ``scheduler_args``, typed for ``scheduler``; names
    it does not know are kept, so that the dry run refuses them with a did-you-mean."""
    import json

    opts = runner.scheduler_run_opts(scheduler)
    cfg = opts.cfg_from_json_repr(json.dumps(options))
    for name, value in options.items():
        if opts.get(name) is None and name not in cfg:
            cfg[name] = value  # type: ignore[assignment]  # refused by the dry run
    return cfg


def tee_line(role: str, replica: int, line: str, color: bool = False) -> str:
    """One log line as ``--tee_logs`` shows it: prefixed by its replica, after every carriage
    return too (progress bars), the prefix green if ``color``.

    >>> tee_line("trainer", 1, "10%\\r20%\\n")
    'trainer/1 10%\\rtrainer/1 20%'
    >>> tee_line("trainer", 0, "done\\n", color=True)
    '\\x1b[32mtrainer/0\\x1b[0m done'
    """
    name = f"{role}/{replica}"
    prefix = f"{ANSI_GREEN}{name}{ANSI_RESET} " if color else f"{name} "
    body = line.rstrip("\n").rstrip("\r")
    return prefix + body.replace("\r", f"\r{prefix}")


def _state_now(runner: Runner, app_handle: str) -> str | None:
    """The app's state by name, None when it cannot be told: the launch already happened,
    its handle must still reach stdout."""
    try:
        status = runner.status(app_handle)
    except Exception as e:
        logger.warning("launched %s but could not read its state: %s", app_handle, e)
        return None
    return status.state.name if status is not None else None


def wait_and_report(
    runner: Runner,
    app_handle: str,
    log: bool,
    redact: Redactor | None = None,
    view: StatusView | None = None,
    json_out: bool = False,
    tee: bool = False,
) -> int:
    """Waits for the app (streaming its logs to stderr if ``log``), showing its progress in
    ``view`` (default: live on a terminal, plain lines elsewhere), prints the final status
    to stderr (and ``{"app_handle", "state"}`` to stdout if ``json_out``), and returns 0 if
    it SUCCEEDED, else 1. Interrupting it leaves the app running. Everything printed goes
    through ``redact``. With ``tee``, log lines are shown as :func:`tee_line` makes them.
    """
    from anylaunch.cli.live import choose_view, logs_through, wants_live_view, watch
    from anylaunch.cli.tables import format_status
    from anylaunch.runner.lines import format_line
    from anylaunch.runner.logs import LogPump, find_replicas, started_replicas
    from anylaunch.specs.api import AppState
    from anylaunch.specs.errors import UnknownAppException
    from anylaunch.specs.secrets import Redactor

    mask = redact if redact is not None else Redactor()
    shown = view if view is not None else choose_view(sys.stderr)

    color = tee and wants_live_view(sys.stderr)

    def to_view(role: str, k: int, line: str) -> None:
        if tee:  # masked before the color codes go in
            shown.line(tee_line(role, k, mask(line), color))
        else:
            shown.line(mask(format_line(role, k, line)))

    pump: LogPump | None = None
    follow: Callable[[AppStatus | None], None] | None = None
    try:
        # anylaunch's own messages while waiting are written above a live view, not into it
        with logs_through(shown):
            if log:
                # a pending replica has no logs to read yet
                started = watch(runner, app_handle, shown, STARTUP_POLL_S, until_started=True)
                if started is None:
                    raise UnknownAppException(app_handle)
                if started.array is not None:
                    # an array's indices (its role's replicas) join the pump as they start
                    pump = LogPump(
                        runner, app_handle, started_replicas(started), to_view, should_tail=True
                    ).start()
                    follow = _adding_started(pump)
                else:
                    replicas = find_replicas(runner, app_handle)
                    pump = LogPump(runner, app_handle, replicas, to_view, should_tail=True).start()
            status = watch(runner, app_handle, shown, WAIT_INTERVAL_S, on_status=follow)
            if pump is not None and not pump.join(timeout=LOG_DRAIN_TIMEOUT_S):
                logger.warning("gave up waiting for the rest of the logs of %s", app_handle)
    except KeyboardInterrupt:
        shown.close()
        if json_out:  # what is known so far: scripts still get the handle
            last = shown.last
            print_json({"app_handle": app_handle, "state": last.state.name if last else None})
        raise
    shown.close()
    if pump is not None:
        for role, k, error in pump.errors:
            logger.warning("could not read the logs of %s/%d: %s", role, k, error)
    if status is None:
        raise UnknownAppException(app_handle)
    if json_out:
        print_json({"app_handle": app_handle, "state": status.state.name})
    eprint(f"anylaunch: {app_handle} ended {status.state.name}")
    if status.state != AppState.SUCCEEDED:
        eprint(format_status(status, redact=mask))
        return EXIT_ERROR
    return 0


def _adding_started(pump: LogPump) -> Callable[[AppStatus | None], None]:
    """A status callback that adds each array index's reader to ``pump`` once it starts."""
    from anylaunch.runner.logs import started_replicas

    def add(status: AppStatus | None) -> None:
        if status is not None:
            pump.add(started_replicas(status))

    return add
