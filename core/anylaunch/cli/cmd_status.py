"""``anylaunch status``: the current state of an app (exit code 3 if the app is unknown).

People get a summary and an aligned table with one row per replica (then each failed
replica's error); ``--json`` prints the whole status as one JSON document for scripts.
"""

from __future__ import annotations

import argparse
import logging

from anylaunch.cli.cmd_base import (
    EXIT_UNKNOWN_APP,
    AppSubCommand,
    add_secret_env_argument,
    describe_redactor,
    eprint,
    secret_env_names,
    split_csv,
)
from anylaunch.cli.output import print_json
from anylaunch.cli.tables import format_status

logger: logging.Logger = logging.getLogger(__name__)


class CmdStatus(AppSubCommand):
    help = "show the status of an app (exit code 3 if the scheduler does not know it)"
    json_help = "print the status as JSON"

    def add_options(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument(
            "--roles", type=str, default="", help="comma-separated roles to show (default: all)"
        )
        add_secret_env_argument(subparser)

    def run_on(self, app_handle: str, args: argparse.Namespace) -> int:
        from anylaunch.runner import get_runner
        from anylaunch.specs.errors import UnknownAppException, did_you_mean

        roles = split_csv(args.roles)
        try:
            with get_runner() as runner:
                status = runner.status(app_handle)
                # messages and stderr tails may quote the app's secret env values
                redact = (
                    describe_redactor(runner, app_handle, secret_env_names(args.secret_env))
                    if status is not None
                    else None
                )
        except UnknownAppException as e:
            status, unknown = None, e
        else:
            unknown = UnknownAppException(app_handle)
        if status is None:
            # distinct exit code: scripts can tell "no such app" from "could not ask"
            eprint(f"anylaunch: error: {unknown}")
            return EXIT_UNKNOWN_APP

        known_roles = [r.role for r in status.roles]
        for role in roles:
            if known_roles and role not in known_roles:
                logger.warning(
                    "app %s has no role %r.%s Roles: %s",
                    app_handle,
                    role,
                    did_you_mean(role, known_roles),
                    ", ".join(known_roles),
                )
        if args.json:
            data = {"app_handle": app_handle, **status.to_dict()}
            if roles:
                data["roles"] = [r for r in data["roles"] if r["role"] in roles]
            print_json(data, redact=redact)
        else:
            print(format_status(status, app_handle, filter_roles=roles or None, redact=redact))
        return 0
