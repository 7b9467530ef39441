"""Reaping apps whose Dagster run ended without cancelling them.

:class:`DagsterOwnerChecker` tells :func:`anylaunch.runner.reap.reap` whether the runs that
launched apps (``dagster:{run_id}``) are still going: a finished run (success, failure,
canceled) has ended, a deleted one is gone. :func:`build_anylaunch_reaper_sensor` runs a pass
on the sensor daemon's schedule.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from anylaunch.runner.reap import OwnerState, reap
from anylaunch.specs.errors import InvalidSpecError

__all__ = ["DagsterOwnerChecker", "build_anylaunch_reaper_sensor", "owner_checker"]


class DagsterOwnerChecker:
    """Asks a Dagster instance about ``dagster:{run_id}`` owners."""

    engine = "dagster"

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self.instance = instance

    def check(self, owners: Sequence[str]) -> Mapping[str, OwnerState]:
        states: dict[str, OwnerState] = {}
        for owner in owners:
            run = self.instance.get_run_by_id(owner.partition(":")[2])
            if run is None:
                states[owner] = OwnerState.GONE
            else:
                states[owner] = OwnerState.ENDED if run.is_finished else OwnerState.ALIVE
        return states


def owner_checker(**options: str | None) -> DagsterOwnerChecker:
    """The ``dagster`` owner-checker plugin (``anylaunch reap --engine dagster``); it takes no
    options: the instance is the one of ``DAGSTER_HOME``."""
    return DagsterOwnerChecker(dg.DagsterInstance.get())


def build_anylaunch_reaper_sensor(
    schedulers: Sequence[str],
    name: str = "anylaunch_reaper",
    minimum_interval_seconds: int = 300,
    dry_run: bool = False,
) -> dg.SensorDefinition:
    """A sensor that cancels the live apps of ``schedulers`` whose Dagster run ended (or only
    reports them, with ``dry_run``). It never requests a run: its skip reason is the report.

    Example:
        ```python
        defs = dg.Definitions(sensors=[build_anylaunch_reaper_sensor(["kubernetes"])])
        ```
    """
    from anylaunch.runner.engine_names import check_scheduler_name

    if isinstance(schedulers, str):
        raise InvalidSpecError(
            "schedulers", schedulers, "must be a list of scheduler names", "e.g. ['kubernetes']"
        )
    chosen = [check_scheduler_name(f"schedulers[{i}]", s) for i, s in enumerate(schedulers)]

    @dg.sensor(
        name=name,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def _reaper(context: dg.SensorEvaluationContext) -> Any:
        from anylaunch.runner import get_runner

        with get_runner() as runner:
            report = reap(runner, chosen, [DagsterOwnerChecker(context.instance)], dry_run=dry_run)
        context.log.info(report.summary())
        return dg.SkipReason(report.summary())

    return _reaper
