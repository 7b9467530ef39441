"""``anylaunch status``: the current state of an app (exit code 3 if the app is unknown).

People get a summary and an aligned table with one row per replica (then each failed
replica's error); ``--json`` prints the whole status as one JSON document for scripts.

For an array app (one index per replica of its one role) the summary adds the array's line
(``19/20 succeeded (20 required); failed indices: 7 (exit 1)``) and a table of index ranges
by state; the per-index table then lists only the indices that say something (failed first,
then running ones; at most :data:`~anylaunch.cli.arrays.ARRAY_TABLE_ROWS`), so a 1000-index
array stays a screenful. ``--indices 0-999`` (range form) lists exactly the indices named;
with ``--json`` it narrows the replicas listed, and the ``array`` key always holds the compact
form (counts, index ranges by state, exit codes).
"""

from __future__ import annotations

import argparse
import logging

from anylaunch.cli.arrays import ARRAY_TABLE_ROWS, check_indices, parse_index_flag
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
        subparser.add_argument(
            "--indices",
            metavar="RANGES",
            default=None,
            help="array apps: list exactly these indices, e.g. 7 or 0-999 or 3,17 (default: "
            "the failed and running ones, at most "
            f"{ARRAY_TABLE_ROWS}; the ranges table counts the rest)",
        )
        add_secret_env_argument(subparser)

    def run_on(self, app_handle: str, args: argparse.Namespace) -> int:
        from anylaunch.runner import get_runner
        from anylaunch.specs.errors import InvalidSpecError, UnknownAppException, did_you_mean

        roles = split_csv(args.roles)
        indices = parse_index_flag("--indices", args.indices) if args.indices else None
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
        if indices is not None:
            if status.array is None:
                raise InvalidSpecError(
                    "--indices", args.indices, f"{app_handle} is not an array app", "drop it"
                )
            check_indices("--indices", indices, status.array, app_handle)
        if args.json:
            data = {"app_handle": app_handle, **status.to_dict()}
            if roles:
                data["roles"] = [r for r in data["roles"] if r["role"] in roles]
            if indices is not None:
                picked = set(indices)
                for role in data["roles"]:
                    role["replicas"] = [r for r in role["replicas"] if r["id"] in picked]
            print_json(data, redact=redact)
        else:
            text = format_status(
                status, app_handle, filter_roles=roles or None, redact=redact, indices=indices
            )
            print(text)
        return 0
