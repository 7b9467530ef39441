"""Prefect deployed as operators run it (``prefect server`` on PostgreSQL, a process work pool,
a worker running each flow run in its own process), with faults injected while the app of a
``run_app`` subflow runs: the process is SIGKILLed (the worker reports the crash and runs the
parent's hooks), or the run is cancelled from the engine. Either way the app ends CANCELLED
within seconds, exactly one app was launched, and no app process is left."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from tests.deployments.conftest import app_ids, app_state, live_processes
from tests.deployments.postgres import Postgres
from tests.deployments.prefect_deployment import BIN, PrefectDeployment
from tests.deployments.processes import cmdline, wait_until

pytestmark = pytest.mark.slow
MARKER = "print('tick', i, flush=True)"  # in the app's command line only


@pytest.fixture(scope="module")
def prefect(
    postgres: Postgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrefectDeployment]:
    deployment = PrefectDeployment(tmp_path_factory.mktemp("prefect"), postgres)
    try:
        deployment.start()
        yield deployment
    finally:
        deployment.stop()


def _running_app(prefect: PrefectDeployment, before: list[str]) -> str:
    def ticking() -> str | None:
        for app_id in app_ids(prefect.state_dir, "pticker"):
            log = prefect.state_dir / app_id / "logs" / "ticker" / "0" / "stdout.log"
            if app_id not in before and log.exists() and log.read_text().count("tick") >= 3:
                return app_id
        return None

    return str(wait_until(ticking, 240, "the flow's app printing lines"))


def _flow_run_process(prefect: PrefectDeployment) -> int:
    pids = [p for p in prefect.flow_run_processes() if "prefect.engine" in cmdline(p)]
    assert len(pids) == 1, pids
    return pids[0]


def _ends(prefect: PrefectDeployment, run_id: str, states: tuple[str, ...]) -> str:
    return str(
        wait_until(
            lambda: (s := prefect.flow_run(run_id)["state"]) in states and s,
            180,
            f"flow run {run_id} to end {states}",
            interval=1,
        )
    )


def test_sigkill_of_the_flow_run_process_cancels_the_subflows_app(
    prefect: PrefectDeployment,
) -> None:
    before = app_ids(prefect.state_dir, "pticker")
    run_id = prefect.run_deployment(duration=120)
    app_id = _running_app(prefect, before)
    os.kill(_flow_run_process(prefect), signal.SIGKILL)

    assert _ends(prefect, run_id, ("CRASHED", "FAILED")) == "CRASHED"
    wait_until(lambda: app_state(prefect.state_dir, app_id) == "CANCELLED", 90, "the app cancelled")
    assert [a for a in app_ids(prefect.state_dir, "pticker") if a not in before] == [app_id]
    wait_until(lambda: not live_processes(MARKER), 60, "no app process left")


def test_cancelling_the_flow_run_from_the_engine_cancels_the_app(
    prefect: PrefectDeployment,
) -> None:
    before = app_ids(prefect.state_dir, "pticker")
    run_id = prefect.run_deployment(duration=120)
    app_id = _running_app(prefect, before)
    prefect.run(str(BIN / "prefect"), "flow-run", "cancel", run_id)

    assert _ends(prefect, run_id, ("CANCELLED", "CRASHED", "FAILED")) == "CANCELLED"
    wait_until(lambda: app_state(prefect.state_dir, app_id) == "CANCELLED", 90, "the app cancelled")
    assert [a for a in app_ids(prefect.state_dir, "pticker") if a not in before] == [app_id]
    wait_until(lambda: not live_processes(MARKER), 60, "no app process left")


def test_a_flow_run_that_ends_normally_leaves_nothing(prefect: PrefectDeployment) -> None:
    before = app_ids(prefect.state_dir, "pticker")
    run_id = prefect.run_deployment(duration=3)
    assert _ends(prefect, run_id, ("COMPLETED", "FAILED", "CRASHED")) == "COMPLETED"
    (app_id,) = [a for a in app_ids(prefect.state_dir, "pticker") if a not in before]
    assert app_state(prefect.state_dir, app_id) == "SUCCEEDED"
    assert prefect.daemons["worker"].alive()  # the faults before did not take the worker down
    assert not live_processes(MARKER)
