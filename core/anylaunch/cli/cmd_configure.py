"""``anylaunch configure``: write (or print) a ``.anylaunchconfig`` template."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from anylaunch.cli.cmd_base import SubCommand, split_csv

logger: logging.Logger = logging.getLogger(__name__)


class CmdConfigure(SubCommand):
    help = "write a .anylaunchconfig template of the schedulers' run options"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument(
            "-s",
            "--schedulers",
            type=str,
            default="",
            help="comma-separated schedulers to include (default: all)",
        )
        subparser.add_argument(
            "-a",
            "--all",
            action="store_true",
            help="include optional options (default: required only)",
        )
        subparser.add_argument(
            "--print", action="store_true", help="print the template instead of writing the file"
        )
        subparser.add_argument(
            "-f", "--force", action="store_true", help="overwrite an existing .anylaunchconfig"
        )

    def run(self, args: argparse.Namespace) -> int:
        from anylaunch.runner.config import CONFIG_FILE, dump
        from anylaunch.schedulers import get_scheduler_factories
        from anylaunch.specs.errors import InvalidSpecError, UnknownSchedulerException

        known = get_scheduler_factories()
        schedulers = split_csv(args.schedulers) or list(known)
        for name in schedulers:
            if name not in known:
                raise UnknownSchedulerException(name, known)
        required_only = not args.all
        if args.print:
            dump(sys.stdout, schedulers=schedulers, required_only=required_only)
            return 0
        if os.path.exists(CONFIG_FILE) and not args.force:
            # never clobber a hand-edited config by accident
            raise InvalidSpecError(
                "configure",
                os.path.abspath(CONFIG_FILE),
                "the file already exists",
                "pass --force to overwrite it, or --print to see the template",
            )
        with open(CONFIG_FILE, "w", encoding="utf-8") as f:
            dump(f, schedulers=schedulers, required_only=required_only)
        logger.info("wrote %s", os.path.abspath(CONFIG_FILE))
        return 0
