"""``anylaunch runopts``: the run options (``-cfg``) each scheduler accepts."""

from __future__ import annotations

import argparse

from anylaunch.cli.cmd_base import SubCommand, eprint, one_line


class CmdRunopts(SubCommand):
    help = "show the run options (-cfg) of one or all schedulers"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument(
            "scheduler", type=str, nargs="?", help="the scheduler (default: all of them)"
        )

    def run(self, args: argparse.Namespace) -> int:
        from anylaunch.runner import get_runner
        from anylaunch.specs.errors import UnknownSchedulerException

        with get_runner() as runner:
            names = runner.scheduler_backends()
            if args.scheduler is not None:
                if args.scheduler not in names:
                    raise UnknownSchedulerException(args.scheduler, names)
                names = [args.scheduler]
            failed = False
            for name in names:
                try:
                    opts = runner.scheduler_run_opts(name)
                except Exception as e:  # a missing SDK or broken plugin: say why, go on
                    failed = True
                    print(f"{name}: unavailable: {one_line(str(e)) or type(e).__name__}\n")
                    continue
                print(f"{name}:\n{opts!r}\n")
        if failed and args.scheduler is not None:
            eprint(f"anylaunch: error: the {args.scheduler} scheduler is unavailable (see above)")
            return 1
        return 0
