"""``anylaunch delete``: remove an app from the scheduler, cancelling it first if it runs."""

from __future__ import annotations

import argparse
import logging

from anylaunch.cli.cmd_base import AppSubCommand, known_status
from anylaunch.cli.output import print_json

logger: logging.Logger = logging.getLogger(__name__)


class CmdDelete(AppSubCommand):
    help = "delete an app from the scheduler (cancels it first if it is running)"
    json_help = 'print {"app_handle", "deleted": true} as JSON'

    def run_on(self, app_handle: str, args: argparse.Namespace) -> int:
        from anylaunch.runner import get_runner

        with get_runner() as runner:
            known_status(runner, app_handle)
            runner.delete(app_handle)
        logger.info("deleted %s", app_handle)
        if args.json:
            print_json({"app_handle": app_handle, "deleted": True})
        return 0
