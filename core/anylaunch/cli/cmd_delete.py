"""``anylaunch delete``: remove an app from the scheduler, cancelling it first if it runs."""

from __future__ import annotations

import argparse
import logging

from anylaunch.cli.cmd_base import SubCommand, check_handle
from anylaunch.cli.output import print_json

logger: logging.Logger = logging.getLogger(__name__)


class CmdDelete(SubCommand):
    help = "delete an app from the scheduler (cancels it first if it is running)"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument("app_handle", help="the handle `anylaunch run` printed")
        subparser.add_argument(
            "--json", action="store_true", help='print {"app_handle", "deleted": true} as JSON'
        )

    def run(self, args: argparse.Namespace) -> int:
        from anylaunch.runner import get_runner
        from anylaunch.specs.errors import UnknownAppException

        app_handle = check_handle(args.app_handle)
        with get_runner() as runner:
            if runner.status(app_handle) is None:
                raise UnknownAppException(app_handle)
            runner.delete(app_handle)
        logger.info("deleted %s", app_handle)
        if args.json:
            print_json({"app_handle": app_handle, "deleted": True})
        return 0
