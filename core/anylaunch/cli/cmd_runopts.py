"""``anylaunch runopts``: the run options (``-cfg``) each scheduler accepts.

``--json`` prints one object keyed by scheduler: ``{"available": true, "error": null,
"options": {NAME: {"type", "default", "required", "help"}}}`` (an unavailable scheduler has
``"available": false`` and the reason in ``"error"``).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from anylaunch.cli.cmd_base import SubCommand, add_json_argument, eprint, one_line
from anylaunch.cli.output import print_json

if TYPE_CHECKING:
    from anylaunch.specs.runopts import runopts


def runopts_to_dict(opts: runopts) -> dict[str, dict[str, Any]]:
    """The options of a scheduler as JSON-friendly data, by name.

    >>> from anylaunch.specs.runopts import runopts
    >>> opts = runopts()
    >>> opts.add("image_repo", type_=str, help="where images go", required=True)
    >>> runopts_to_dict(opts)
    {'image_repo': {'type': 'str', 'default': None, 'required': True, 'help': 'where images go'}}
    """
    from anylaunch.specs.runopts import get_type_name

    return {
        name: {
            "type": get_type_name(opt.opt_type),
            "default": opt.default,
            "required": opt.is_required,
            "help": opt.help,
        }
        for name, opt in opts
    }


class CmdRunopts(SubCommand):
    help = "show the run options (-cfg) of one or all schedulers"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument(
            "scheduler", type=str, nargs="?", help="the scheduler (default: all of them)"
        )
        add_json_argument(subparser, "print the options as JSON, keyed by scheduler")

    def run(self, args: argparse.Namespace) -> int:
        from anylaunch.runner import get_runner
        from anylaunch.specs.errors import UnknownSchedulerException

        with get_runner() as runner:
            names = runner.scheduler_backends()
            if args.scheduler is not None:
                if args.scheduler not in names:
                    raise UnknownSchedulerException(args.scheduler, names)
                names = [args.scheduler]
            failed = False
            data: dict[str, dict[str, Any]] = {}
            for name in names:
                try:
                    opts = runner.scheduler_run_opts(name)
                except Exception as e:  # a missing SDK or broken plugin: say why, go on
                    failed = True
                    reason = one_line(str(e)) or type(e).__name__
                    data[name] = {"available": False, "error": reason, "options": {}}
                    if not args.json:
                        print(f"{name}: unavailable: {reason}\n")
                    continue
                data[name] = {"available": True, "error": None, "options": runopts_to_dict(opts)}
                if not args.json:
                    print(f"{name}:\n{opts!r}\n")
        if args.json:
            print_json(data)
        if failed and args.scheduler is not None:
            eprint(f"anylaunch: error: the {args.scheduler} scheduler is unavailable (see above)")
            return 1
        return 0
