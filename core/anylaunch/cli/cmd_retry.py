"""``anylaunch retry-failed``: relaunch only the failed indices of an ended array app.

A command of its own, like ``cancel``: it acts on an app that exists (by its handle), while
``run`` builds a new app from a component and its arguments. It calls
:meth:`anylaunch.runner.api.Runner.retry_failed` (one new array of the same definition that
runs only the indices that FAILED or were CANCELLED, natively where the backend can, e.g.
``sbatch --array=3,17``; each index keeps its ``ANYLAUNCH_ARRAY_INDEX`` and parameters) and
prints the new app's handle alone on stdout, as ``run`` does, so
``H=$(anylaunch retry-failed $H)`` works. ``--wait``/``--log`` then wait for it as ``run``
does.
"""

from __future__ import annotations

import argparse

from anylaunch.cli.cmd_base import (
    AppSubCommand,
    add_secret_env_argument,
    describe_redactor,
    eprint,
    known_status,
    secret_env_names,
)
from anylaunch.cli.output import print_json


class CmdRetryFailed(AppSubCommand):
    help = "relaunch only the failed indices of an ended array app; prints the new handle"
    json_help = (
        'print {"app_handle": NEW, "retried_from": HANDLE, "indices": "3,17"} instead of the '
        "bare handle (with --wait: once the new app ended, with its state)"
    )

    def add_options(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument(
            "--wait",
            action="store_true",
            help="wait for the new app to end; exit 0 only if it SUCCEEDED",
        )
        subparser.add_argument(
            "--log", action="store_true", help="stream the new app's logs; implies --wait"
        )
        add_secret_env_argument(subparser)

    def run_on(self, app_handle: str, args: argparse.Namespace) -> int:
        from anylaunch.cli.cmd_run import wait_and_report
        from anylaunch.runner import get_runner
        from anylaunch.specs.array_status import index_ranges

        with get_runner() as runner:
            status = known_status(runner, app_handle)
            # what retry_failed reruns (it checks the app again: this only names them)
            failed = index_ranges(status.array.failed()) if status.array is not None else ""
            new_handle = runner.retry_failed(app_handle)
            if not args.json:
                print(new_handle, flush=True)
            eprint(f"anylaunch: relaunched indices {failed} of {app_handle} as {new_handle}")
            if not (args.wait or args.log):
                if args.json:
                    print_json(
                        {"app_handle": new_handle, "retried_from": app_handle, "indices": failed}
                    )
                return 0
            redact = describe_redactor(runner, new_handle, secret_env_names(args.secret_env))
            code = wait_and_report(runner, new_handle, log=args.log, redact=redact)
            if args.json:
                end = runner.status(new_handle)
                print_json(
                    {
                        "app_handle": new_handle,
                        "retried_from": app_handle,
                        "indices": failed,
                        "state": end.state.name if end is not None else None,
                    }
                )
            return code
