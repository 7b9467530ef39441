"""``anylaunch cancel``: request cancellation of an app (returns without waiting)."""

from __future__ import annotations

import argparse
import logging

from anylaunch.cli.cmd_base import AppSubCommand, known_status
from anylaunch.cli.output import print_json

logger: logging.Logger = logging.getLogger(__name__)


class CmdCancel(AppSubCommand):
    help = "cancel an app (a finished app is left as it is)"
    json_help = (
        'print {"app_handle", "cancelled", "state"} as JSON (cancelled: false when the '
        "app had already ended)"
    )

    def run_on(self, app_handle: str, args: argparse.Namespace) -> int:
        from anylaunch.runner import get_runner

        with get_runner() as runner:
            status = known_status(runner, app_handle)
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
