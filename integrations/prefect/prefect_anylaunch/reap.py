"""Reaping apps whose Prefect flow run ended without cancelling them.

:class:`PrefectOwnerChecker` tells :func:`anylaunch.runner.reap.reap` whether the flow runs
that launched apps are still running: a flow run in a final state (completed, failed,
crashed, cancelled), or one whose ancestor is, has ended (a parent killed with its subflow in
the same process leaves the subflow "Running" forever); a deleted one is gone. The
``reap_orphans`` flow runs a pass: deploy it on a schedule to reap periodically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from prefect import flow, get_run_logger

from anylaunch.runner.reap import OwnerState, reap

__all__ = ["PrefectOwnerChecker", "owner_checker", "reap_orphans"]

_MAX_ANCESTORS = 32


class PrefectOwnerChecker:
    """Asks the Prefect API (``PREFECT_API_URL``) about ``prefect:{flow_run_id}`` owners."""

    engine = "prefect"

    def check(self, owners: Sequence[str]) -> Mapping[str, OwnerState]:
        from prefect.client.orchestration import get_client
        from prefect.exceptions import ObjectNotFound

        states: dict[str, OwnerState] = {}
        with get_client(sync_client=True) as client:
            for owner in owners:
                try:
                    run_id = UUID(owner.partition(":")[2])
                except ValueError:
                    states[owner] = OwnerState.UNKNOWN
                    continue
                try:
                    states[owner] = self._chain_state(client, run_id)
                except ObjectNotFound:
                    states[owner] = OwnerState.GONE
        return states

    @staticmethod
    def _chain_state(client: Any, run_id: UUID) -> OwnerState:
        flow_run = client.read_flow_run(run_id)
        for _ in range(_MAX_ANCESTORS):
            if flow_run.state is not None and flow_run.state.is_final():
                return OwnerState.ENDED
            if flow_run.parent_task_run_id is None:
                return OwnerState.ALIVE
            parent = client.read_task_run(flow_run.parent_task_run_id).flow_run_id
            if parent is None:
                return OwnerState.ALIVE
            flow_run = client.read_flow_run(parent)
        return OwnerState.ALIVE


def owner_checker(**options: str | None) -> PrefectOwnerChecker:
    """The ``prefect`` owner-checker plugin (``anylaunch reap --engine prefect``); it takes no
    options: the Prefect API is the one of ``PREFECT_API_URL``."""
    return PrefectOwnerChecker()


@flow(name="anylaunch-reap-orphans")
def reap_orphans(schedulers: list[str], dry_run: bool = False) -> dict[str, Any]:
    """Cancels the live apps of ``schedulers`` whose Prefect flow run ended (or, with
    ``dry_run``, only reports them). Returns the report as a dict."""
    from anylaunch.runner import get_runner

    with get_runner() as runner:
        report = reap(runner, schedulers, [PrefectOwnerChecker()], dry_run=dry_run)
    get_run_logger().info("%s", report.summary())
    return {
        "orphans": [a.handle for a in report.actions if a.action == "cancel"],
        "cancelled": report.cancelled,
        "errors": report.errors,
        "dry_run": dry_run,
    }
