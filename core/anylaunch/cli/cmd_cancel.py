"""``anylaunch cancel``: request cancellation of an app (returns without waiting)."""

from __future__ import annotations

import argparse
import logging

from anylaunch.cli.cmd_base import SubCommand, check_handle
from anylaunch.cli.output import print_json

logger: logging.Logger = logging.getLogger(__name__)


class CmdCancel(SubCommand):
    help = "cancel an app (a finished app is left as it is)"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument("app_handle", help="the handle `anylaunch run` printed")
        subparser.add_argument(
            "--json",
            action="store_true",
            help='print {"app_handle", "cancelled", "state"} as JSON (cancelled: false when the '
            "app had already ended)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from anylaunch.runner import get_runner
        from anylaunch.specs.errors import UnknownAppException

        app_handle = check_handle(args.app_handle)
        with get_runner() as runner:
            # Runner.cancel is a silent no-op for an unknown app; at a terminal a typo in the
            # handle deserves an error instead
            status = runner.status(app_handle)
            if status is None:
                raise UnknownAppException(app_handle)
            if status.is_terminal():
                logger.info("%s already ended %s: nothing to cancel", app_handle, status.state)
                if args.json:
                    print_json(
                        {"app_handle": app_handle, "cancelled": False, "state": status.state.name}
                    )
                return 0
            runner.cancel(app_handle)
        if args.json:
            # the state before the request: cancelling returns without waiting for the end
            print_json({"app_handle": app_handle, "cancelled": True, "state": status.state.name})
        logger.info(
            "cancellation of %s requested (`anylaunch status` shows when it ends)", app_handle
        )
        return 0
