"""``anylaunch describe``: the AppDef of a submitted app, as the scheduler reports it."""

from __future__ import annotations

import argparse

from anylaunch.cli.cmd_base import AppSubCommand, add_secret_env_argument, secret_env_names


class CmdDescribe(AppSubCommand):
    help = "show the definition (AppDef) of a submitted app"
    json_help = "print JSON instead of YAML"

    def add_options(self, subparser: argparse.ArgumentParser) -> None:
        add_secret_env_argument(subparser)

    def run_on(self, app_handle: str, args: argparse.Namespace) -> int:
        from anylaunch.runner import get_runner
        from anylaunch.specs.errors import UnknownAppException
        from anylaunch.specs.handles import is_placed
        from anylaunch.specs.serialize import appdef_to_dict

        with get_runner() as runner:
            app = runner.describe(app_handle)
            # a placed app: every target it was tried on and why it moved
            status = runner.status(app_handle) if is_placed(app_handle) else None
        if app is None:
            raise UnknownAppException(app_handle)
        # secret env values are masked: describe output ends up in terminals and tickets
        masked = appdef_to_dict(
            app, mask_secrets=True, secret_env=secret_env_names(args.secret_env)
        )
        data: dict[str, object] = {"app_handle": app_handle, "AppDef": masked}
        if status is not None and status.placement is not None:
            data["placement"] = status.placement.to_dict()
        if args.json:
            from anylaunch.cli.output import print_json

            print_json(data)
        else:
            import yaml

            print(yaml.safe_dump(data, sort_keys=False), end="")
        return 0
