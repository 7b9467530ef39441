"""``anylaunch list``: the apps a scheduler knows about."""

from __future__ import annotations

import argparse

from anylaunch.cli.argparse_util import ArgOnceAction, anylaunchconfig_list
from anylaunch.cli.cmd_base import SubCommand, add_json_argument, eprint
from anylaunch.cli.output import print_json
from anylaunch.cli.tables import format_table

__all__ = ["CmdList"]


class CmdList(SubCommand):
    help = "list the apps a scheduler knows about"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument(
            "-s",
            "--scheduler",
            type=str,
            default=None,
            action=anylaunchconfig_list,
            help="scheduler (default: [cli:list] scheduler, else the default scheduler)",
        )
        subparser.add_argument(
            "-cfg",
            "--scheduler_args",
            type=str,
            default="",
            action=ArgOnceAction,
            help="run options the scheduler needs to list apps (K=V,K2=V2)",
        )
        add_json_argument(subparser, "print a JSON array")

    def run(self, args: argparse.Namespace) -> int:
        from anylaunch.runner import get_runner
        from anylaunch.schedulers import get_default_scheduler_name

        scheduler = args.scheduler or get_default_scheduler_name()
        with get_runner() as runner:
            cfg = runner.cfg_from_str(scheduler, args.scheduler_args)
            apps = runner.list(scheduler, cfg or None)
        if args.json:
            data = [
                {
                    "app_handle": a.app_handle,
                    "app_id": a.app_id,
                    "state": a.state.name,
                    "name": a.name,
                }
                for a in apps
            ]
            print_json(data)
        elif apps:
            rows = [["APP HANDLE", "STATE", "NAME"]]
            rows += [[a.app_handle, a.state.name, a.name] for a in apps]
            print(format_table(rows))
        else:
            eprint(f"no apps on the {scheduler} scheduler")
        return 0
