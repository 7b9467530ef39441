"""Prefect deployed as operators run it at scale (``prefect server`` on PostgreSQL, one process
work pool served by two workers, each running a flow run in its own process, and the zombie
automation), with faults injected while the app of a ``run_app`` subflow runs:

- the flow-run process is SIGKILLed: its worker reports the crash and runs the parent's
  hooks; the app ends CANCELLED within seconds;
- the run is cancelled from the engine: the app ends CANCELLED;
- the worker running a flow is lost with its whole process tree (the flow-run process too),
  so no hook runs anywhere: the Kubernetes app runs on (kept by the reaper while Prefect says
  the run runs) until the zombie automation crashes the flow run, and then ``anylaunch reap``
  cancels it; the other worker keeps serving the pool.

Each time exactly one app was launched and no app process is left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator

import pytest

from tests.deployments.conftest import app_ids, app_state, live_processes
from tests.deployments.postgres import Postgres
from tests.deployments.prefect_deployment import BIN, WORKERS, PrefectDeployment
from tests.deployments.processes import cmdline, kill_tree, wait_until

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


def _launched_handles(prefect: PrefectDeployment, run_id: str) -> list[str]:
    """The handles of the apps a flow run (or its subflow) launched, from its labels."""
    labels = prefect.flow_run(run_id)["labels"]
    return sorted(v for k, v in labels.items() if k.startswith("anylaunch.app."))


def _processes_of_flow_run(run_id: str) -> list[int]:
    """Every live process started for flow run ``run_id`` (it carries the id in its env)."""
    from pathlib import Path

    from tests.deployments.processes import environ

    pids = (int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit())
    return [pid for pid in pids if environ(pid).get("PREFECT__FLOW_RUN_ID") == run_id]


def _reap(prefect: PrefectDeployment, namespace: str, *extra: str) -> dict:
    """``anylaunch reap`` as an operator schedules it: the namespace to watch comes from its
    config file."""
    config = prefect.root / "reaper.anylaunchconfig"
    config.write_text(f"[kubernetes]\nnamespace = {namespace}\n")
    done = subprocess.run(
        [
            str(BIN / "anylaunch"),
            "reap",
            "-s",
            "kubernetes",
            "--engine",
            "prefect",
            "--json",
            *extra,
        ],
        env={**prefect.env(), "ANYLAUNCHCONFIG": str(config)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


def test_losing_the_worker_of_a_kubernetes_flow_crashes_the_run_and_the_reaper_cancels_its_app(
    prefect: PrefectDeployment, kubelet: str, kube_namespace: str, busybox_image: str
) -> None:
    from anylaunch.runner import get_runner
    from anylaunch.specs import AppState

    run_id = prefect.run_deployment(
        "kube-ticker-parent/kube-ticker",
        namespace=kube_namespace,
        image=busybox_image,
        duration=300,
    )

    def ticking_app() -> str | None:
        handles = _launched_handles(prefect, run_id)
        if not handles:
            return None
        with get_runner() as runner:
            lines = list(runner.log_lines(handles[0], "ticker", 0))
        return handles[0] if sum("tick" in line for line in lines) >= 3 else None

    handle = str(wait_until(ticking_app, 240, "the flow's pod printing lines"))
    worker = str(wait_until(lambda: prefect.worker_running(run_id), 30, "the flow run's worker"))
    (survivor,) = (name for name in WORKERS if name != worker)
    try:
        kill_tree(prefect.daemons[worker].pid)  # the host is lost: no hook runs anywhere
        # Prefect still says the flow runs (its heartbeats stopped < 15 s ago): the reaper
        # leaves its app alone
        kept = [
            a
            for a in _reap(prefect, kube_namespace, "--dry-run")["actions"]
            if a["handle"] == handle
        ]
        assert [a["action"] for a in kept] == ["keep"], kept
        assert prefect.daemons[worker].process.wait(30) != 0
        assert not _processes_of_flow_run(run_id)  # the flow-run process died with it
        with get_runner() as runner:
            assert runner.status(handle).state == AppState.RUNNING  # type: ignore[union-attr]

        # the zombie automation crashes the silent flow run; the reaper then cancels the app
        assert _ends(prefect, run_id, ("CRASHED", "FAILED", "COMPLETED")) == "CRASHED"
        assert handle in _reap(prefect, kube_namespace)["cancelled"]
        with get_runner() as runner:
            wait_until(
                lambda: runner.status(handle).state == AppState.CANCELLED,  # type: ignore[union-attr]
                90,
                f"the app {handle} cancelled",
            )
        assert _launched_handles(prefect, run_id) == [handle]  # one submission
        assert prefect.daemons[survivor].alive()
    finally:
        prefect.start_worker(worker)


def test_a_flow_run_that_ends_normally_leaves_nothing(prefect: PrefectDeployment) -> None:
    before = app_ids(prefect.state_dir, "pticker")
    run_id = prefect.run_deployment(duration=3)
    assert _ends(prefect, run_id, ("COMPLETED", "FAILED", "CRASHED")) == "COMPLETED"
    (app_id,) = [a for a in app_ids(prefect.state_dir, "pticker") if a not in before]
    assert app_state(prefect.state_dir, app_id) == "SUCCEEDED"
    # the faults before took no worker down (the one lost on purpose was restarted)
    assert all(prefect.daemons[name].alive() for name in WORKERS)
    assert not live_processes(MARKER)
