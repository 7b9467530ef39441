"""``anylaunch builtins``: list the components, or print one's source to copy and adapt."""

from __future__ import annotations

import argparse

from anylaunch.cli.cmd_base import SubCommand, add_json_argument
from anylaunch.cli.output import print_json


class CmdBuiltins(SubCommand):
    help = "list the available components, or print the source of one"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument(
            "--print", metavar="NAME", type=str, help="print the source of component NAME"
        )
        add_json_argument(
            subparser,
            'print JSON: [{"name", "description", "valid"}], or with --print '
            '{"name", "path", "source"}',
        )

    def run(self, args: argparse.Namespace) -> int:
        from anylaunch.components import get_component, get_components

        if args.print:
            import inspect

            component = get_component(args.print)
            path = inspect.getsourcefile(component.fn) or "<unknown file>"
            if args.json:
                source = inspect.getsource(component.fn)
                print_json({"name": component.name, "path": path, "source": source})
                return 0
            print(f"# {component.name} (from {path})")
            print(inspect.getsource(component.fn), end="")
            return 0
        components = get_components()
        if args.json:
            print_json(
                [
                    {
                        "name": name,
                        "description": component.description,
                        "valid": not component.validation_errors,
                    }
                    for name, component in sorted(components.items())
                ]
            )
            return 0
        print(f"Found {len(components)} components:")
        width = max((len(name) for name in components), default=0)
        for i, (name, component) in enumerate(sorted(components.items()), start=1):
            print(f" {i:2d}. {name.ljust(width)}  {component.description}".rstrip())
        return 0
