"""``anylaunch reap``: cancel live apps whose engine run (their owner) ended.

The owner of an app launched from Airflow, Prefect or Dagster is in its
``ANYLAUNCH_PARENT_RUN_ID``; the engine is asked whether it still runs:

- ``--engine prefect``: the Prefect API of ``PREFECT_API_URL``;
- ``--engine dagster``: the Dagster instance of ``DAGSTER_HOME``;
- ``--engine airflow``: an api-server's REST API (``--airflow-url``, token in
  ``$ANYLAUNCH_AIRFLOW_TOKEN``).

``--dry-run`` reports the orphans without cancelling them. Apps whose owner cannot be checked
are always kept.
"""

from __future__ import annotations

import argparse
import json
import logging

from anylaunch.cli.cmd_base import SubCommand, add_json_argument
from anylaunch.runner.reap import ENGINES


class CmdReap(SubCommand):
    help = "cancel live apps whose engine run (their owner) ended"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument(
            "-s",
            "--scheduler",
            action="append",
            required=True,
            help="scheduler whose apps to check (repeat for several)",
        )
        subparser.add_argument("--engine", choices=ENGINES, required=True, help="owners' engine")
        subparser.add_argument("--airflow-url", default=None, help="Airflow api-server URL")
        subparser.add_argument("--dry-run", action="store_true", help="report, cancel nothing")
        add_json_argument(subparser, "print the report as JSON")

    def run(self, args: argparse.Namespace) -> int:
        from anylaunch.runner import get_runner
        from anylaunch.runner.reap import owner_checker, reap

        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        # the engine's integration is imported only now, through its owner-checker plugin
        checker = owner_checker(args.engine, airflow_url=args.airflow_url)
        # importing an engine may replace the root handlers (Airflow logs to stdout), and
        # stdout is for the report
        root.handlers[:] = handlers
        root.setLevel(level)
        with get_runner() as runner:
            report = reap(runner, args.scheduler, [checker], dry_run=args.dry_run)
        if args.json:
            print(
                json.dumps(
                    {
                        "actions": [vars(a) for a in report.actions],
                        "cancelled": report.cancelled,
                        "errors": report.errors,
                        "dry_run": report.dry_run,
                    },
                    indent=2,
                )
            )
        else:
            print(report.summary())
        return 1 if report.errors else 0
