"""``anylaunch describe``: the AppDef of a submitted app, as the scheduler reports it."""

from __future__ import annotations

import argparse
import dataclasses
import enum
from typing import Any

from anylaunch.cli.cmd_base import SubCommand, check_handle


def to_plain(obj: Any) -> Any:
    """Converts dataclasses, enums and containers to plain data for YAML/JSON output.

    >>> from anylaunch.specs import AppDef, Role
    >>> to_plain(AppDef("a", [Role("r", image="/tmp", entrypoint="echo")]))["roles"][0]["name"]
    'r'
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, dict):
        return {str(k): to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_plain(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


class CmdDescribe(SubCommand):
    help = "show the definition (AppDef) of a submitted app"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument("app_handle", help="the handle `anylaunch run` printed")
        subparser.add_argument("--json", action="store_true", help="print JSON instead of YAML")

    def run(self, args: argparse.Namespace) -> int:
        from anylaunch.runner import get_runner
        from anylaunch.specs.errors import UnknownAppException

        app_handle = check_handle(args.app_handle)
        with get_runner() as runner:
            app = runner.describe(app_handle)
        if app is None:
            raise UnknownAppException(app_handle)
        data = {"app_handle": app_handle, "AppDef": to_plain(app)}
        if args.json:
            import json

            print(json.dumps(data, indent=2))
        else:
            import yaml

            print(yaml.safe_dump(data, sort_keys=False), end="")
        return 0
