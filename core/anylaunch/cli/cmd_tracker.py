"""``anylaunch tracker list jobs|metadata|artifacts``: what jobs tracked, read back.

Reads the first tracker configured (``[anylaunch:tracker]`` of ``.anylaunchconfig``, or
``ANYLAUNCH_TRACKERS``), as TorchX's ``torchx tracker`` does::

    anylaunch tracker list jobs [--parent-run-id ID]
    anylaunch tracker list metadata RUN_ID
    anylaunch tracker list artifacts [--artifact NAME] RUN_ID

A run id is the job's handle (what ``anylaunch run`` printed).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from anylaunch.cli.cmd_base import SubCommand, add_json_argument, eprint
from anylaunch.cli.output import print_json
from anylaunch.cli.tables import format_table

if TYPE_CHECKING:
    from anylaunch.tracker.api import TrackerBase

__all__ = ["CmdTracker"]


def _tracker() -> TrackerBase:
    """The first configured tracker (NoTrackerError when there is none)."""
    from anylaunch.runner.config import load_sections
    from anylaunch.tracker.api import build_trackers
    from anylaunch.tracker.config import configured_trackers
    from anylaunch.tracker.errors import NoTrackerError

    configured = configured_trackers(load_sections)
    if not configured:
        raise NoTrackerError()
    first = next(iter(configured))
    return build_trackers({first: configured[first]})[0]


def _known_run(tracker: TrackerBase, run_id: str) -> str:
    from anylaunch.tracker.checks import check_run_id
    from anylaunch.tracker.errors import UnknownRunError

    check_run_id("RUN_ID", run_id)
    if not tracker.has_run(run_id):
        raise UnknownRunError(run_id)
    return run_id


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


class CmdTracker(SubCommand):
    help = "list the runs, metadata and artifacts that jobs tracked"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        actions = subparser.add_subparsers(dest="tracker_action", metavar="ACTION", required=True)
        lister = actions.add_parser("list", help="list what the tracker holds")
        what = lister.add_subparsers(dest="tracker_list", metavar="WHAT", required=True)
        jobs = what.add_parser("jobs", help="the runs recorded")
        jobs.add_argument(
            "--parent-run-id", default=None, help="only the runs that have this run as a source"
        )
        add_json_argument(jobs, "print a JSON array of {run_id}")
        metadata = what.add_parser("metadata", help="a run's metadata")
        metadata.add_argument("run_id", metavar="RUN_ID", help="the job's handle")
        add_json_argument(metadata, "print the metadata as a JSON object")
        artifacts = what.add_parser("artifacts", help="a run's artifacts")
        artifacts.add_argument("--artifact", default=None, help="only the artifact of this name")
        artifacts.add_argument("run_id", metavar="RUN_ID", help="the job's handle")
        add_json_argument(artifacts, "print a JSON array of {name, path, metadata}")

    def run(self, args: argparse.Namespace) -> int:
        tracker = _tracker()
        if args.tracker_list == "jobs":
            return self._jobs(tracker, args)
        run_id = _known_run(tracker, args.run_id)
        if args.tracker_list == "metadata":
            return self._metadata(tracker, run_id, args)
        return self._artifacts(tracker, run_id, args)

    def _jobs(self, tracker: TrackerBase, args: argparse.Namespace) -> int:
        from anylaunch.tracker.checks import check_run_id

        filters = {}
        if args.parent_run_id is not None:
            filters["parent_run_id"] = check_run_id("--parent-run-id", args.parent_run_id)
        run_ids = list(tracker.run_ids(**filters))
        if args.json:
            print_json([{"run_id": r} for r in run_ids])
        elif run_ids:
            print(format_table([["RUN ID"], *([r] for r in run_ids)]))
        else:
            eprint("no runs recorded" + (" with that parent" if filters else ""))
        return 0

    def _metadata(self, tracker: TrackerBase, run_id: str, args: argparse.Namespace) -> int:
        metadata = dict(tracker.metadata(run_id))
        if args.json:
            print_json(metadata)
        elif metadata:
            print(format_table([["KEY", "VALUE"], *([k, _text(v)] for k, v in metadata.items())]))
        else:
            eprint(f"no metadata for {run_id}")
        return 0

    def _artifacts(self, tracker: TrackerBase, run_id: str, args: argparse.Namespace) -> int:
        from anylaunch.specs.errors import InvalidSpecError, did_you_mean
        from anylaunch.tracker.checks import check_name

        artifacts = dict(tracker.artifacts(run_id))
        if args.artifact is not None:
            name = check_name("--artifact", args.artifact)
            if name not in artifacts:
                raise InvalidSpecError(
                    "--artifact",
                    name,
                    f"run {run_id} has no artifact of that name.{did_you_mean(name, artifacts)}",
                    f"use one of: {', '.join(artifacts) or '(none recorded)'}",
                )
            artifacts = {name: artifacts[name]}
        if args.json:
            print_json(
                [
                    {"name": a.name, "path": a.path, "metadata": dict(a.metadata or {})}
                    for a in artifacts.values()
                ]
            )
        elif artifacts:
            table = [["NAME", "PATH", "METADATA"]]
            table += [
                [a.name, a.path, _text(dict(a.metadata)) if a.metadata else ""]
                for a in artifacts.values()
            ]
            print(format_table(table))
        else:
            eprint(f"no artifacts for {run_id}")
        return 0
