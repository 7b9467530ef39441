"""Airflow deployed as operators run it (scheduler with the LocalExecutor, triggerer,
dag-processor, api-server, PostgreSQL), with faults injected while a 15-60 s app runs.

Each scenario triggers a DAG run through the REST API, injects one fault, then checks what a
user would: the task's outcome, how many apps were launched, the app's final state, the task
log, and that no app process is left.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deployments.airflow_deployment import AirflowDeployment
from tests.deployments.conftest import app_ids
from tests.deployments.postgres import Postgres
from tests.deployments.processes import cmdline, wait_until
from tests.schedulers.kubernetes.kube_cluster import kube_client, kube_namespace, kubelet

__all__ = ["kube_client", "kube_namespace", "kubelet"]  # fixtures, asked for by name

pytestmark = pytest.mark.slow

SYNC, DEFERRED = "anylaunch_deploy_sync", "anylaunch_deploy_deferred"
TERMINAL = ("success", "failed", "upstream_failed")


@pytest.fixture(scope="module")
def airflow(
    postgres: Postgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AirflowDeployment]:
    deployment = AirflowDeployment(tmp_path_factory.mktemp("airflow"), postgres)
    try:
        deployment.start()
        yield deployment
    finally:
        deployment.stop()


def _app_state(airflow: AirflowDeployment, app_id: str) -> str:
    import json

    state = airflow.state_dir / app_id / "state.json"
    return str(json.loads(state.read_text())["state"]) if state.exists() else "SUBMITTED"


def _ticker_processes() -> list[int]:
    """Live app processes of these DAGs (found by the ticker script on their command line)."""
    return [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and "os.environ['DURATION']" in cmdline(int(entry.name))
    ]


def _wait_running_app(
    airflow: AirflowDeployment, dag_id: str, run_id: str, before: list[str], name: str = "ticker"
) -> str:
    """Waits until the task runs and its app (called ``name``) has printed a few lines;
    returns the app id."""

    def new_app_ticking() -> str | None:
        for app_id in app_ids(airflow.state_dir, name):
            log = airflow.state_dir / app_id / "logs" / "ticker" / "0" / "stdout.log"
            if app_id not in before and log.exists() and log.read_text().count("tick") >= 3:
                return app_id
        return None

    return str(wait_until(new_app_ticking, 180, f"an app of {dag_id}/{run_id} printing lines"))


def _wait_task(airflow: AirflowDeployment, dag_id: str, run_id: str) -> dict:
    return dict(
        wait_until(
            lambda: (ti := airflow.task_instance(dag_id, run_id))["state"] in TERMINAL and ti,
            300,
            f"task of {dag_id}/{run_id} to end",
            interval=1,
        )
    )


def _no_app_left(airflow: AirflowDeployment) -> None:
    """No orphan: no app process is alive, and the scheduler lists every app as ended."""
    wait_until(lambda: not _ticker_processes(), 60, "every app process to end")
    for app_id in app_ids(airflow.state_dir, "ticker"):
        assert _app_state(airflow, app_id) in ("SUCCEEDED", "FAILED", "CANCELLED"), app_id


def test_sigkill_of_the_task_runner_reattaches_to_the_same_app(airflow: AirflowDeployment) -> None:
    before = app_ids(airflow.state_dir, "ticker")
    run_id = airflow.trigger(SYNC, {"duration": 15})
    app_id = _wait_running_app(airflow, SYNC, run_id, before)
    runners = airflow.task_runners()
    assert runners, "no task runner process found"
    for pid in runners:
        os.kill(pid, signal.SIGKILL)

    ti = _wait_task(airflow, SYNC, run_id)
    assert ti["state"] == "success"
    assert ti["try_number"] == 2  # the kill failed try 1; try 2 reattached
    assert [a for a in app_ids(airflow.state_dir, "ticker") if a not in before] == [app_id]
    assert _app_state(airflow, app_id) == "SUCCEEDED"
    second = airflow.task_log(SYNC, run_id, 2)
    assert "Reconnecting to existing job" in second
    assert "tick 14" in second  # the reattached try streamed the app to its end
    _no_app_left(airflow)


def test_sigkill_of_the_triggerer_cancels_nothing_and_repeats_no_line(
    airflow: AirflowDeployment,
) -> None:
    before = app_ids(airflow.state_dir, "ticker")
    run_id = airflow.trigger(DEFERRED, {"duration": 20})
    app_id = _wait_running_app(airflow, DEFERRED, run_id, before)
    wait_until(
        lambda: airflow.task_instance(DEFERRED, run_id)["state"] == "deferred",
        120,
        "the task to defer",
    )
    triggerer = airflow.daemons["triggerer"]
    os.killpg(triggerer.pid, signal.SIGKILL)
    triggerer.process.wait(30)
    airflow.restart("triggerer")

    ti = _wait_task(airflow, DEFERRED, run_id)
    assert ti["state"] == "success"
    assert [a for a in app_ids(airflow.state_dir, "ticker") if a not in before] == [app_id]
    assert _app_state(airflow, app_id) == "SUCCEEDED"
    log = airflow.task_log(DEFERRED, run_id, ti["try_number"])
    ticks = [line.split("ticker/0 ", 1)[1] for line in log.splitlines() if "ticker/0 tick" in line]
    assert ticks, log[-2000:]
    assert len(ticks) == len(set(ticks)), f"lines repeated after the triggerer restart: {ticks}"
    assert "tick 19" in ticks
    _no_app_left(airflow)


def _launched(airflow: AirflowDeployment, dag_id: str, run_id: str, tries: int) -> list[str]:
    """The handles the task's tries launched, from their logs."""
    import re

    handles: list[str] = []
    for number in range(1, tries + 1):
        log = airflow.task_log(dag_id, run_id, number)
        handles += [h for h in re.findall(r"launched anylaunch app (\S+)", log) if h not in handles]
    return handles


def test_sigkill_of_the_task_runner_reattaches_to_the_same_slurm_job(
    airflow: AirflowDeployment, slurm_cluster: object
) -> None:
    from anylaunch.runner import get_runner

    dag_id = "anylaunch_deploy_slurm"
    run_id = airflow.trigger(dag_id, {"duration": 20})

    def running_handle() -> str | None:
        ti = airflow.task_instance(dag_id, run_id)
        if ti["state"] != "running":
            return None
        handles = _launched(airflow, dag_id, run_id, 1)
        if not handles:
            return None
        with get_runner() as runner:
            lines = list(runner.log_lines(handles[0], "ticker", 0))
        return handles[0] if sum("tick" in line for line in lines) >= 3 else None

    handle = str(wait_until(running_handle, 240, "the Slurm job ticking"))
    for pid in airflow.task_runners():
        os.kill(pid, signal.SIGKILL)

    ti = _wait_task(airflow, dag_id, run_id)
    assert ti["state"] == "success" and ti["try_number"] == 2
    assert _launched(airflow, dag_id, run_id, 2) == [handle]  # the retry launched nothing
    assert "Reconnecting to existing job" in airflow.task_log(dag_id, run_id, 2)
    with get_runner() as runner:
        status = runner.status(handle)
    assert status is not None and status.state.name == "SUCCEEDED"


def _clear(airflow: AirflowDeployment, dag_id: str, run_id: str) -> None:
    airflow.request(
        "POST",
        f"/api/v2/dags/{dag_id}/clearTaskInstances",
        {"dag_run_id": run_id, "task_ids": ["app"], "dry_run": False, "only_failed": False},
    )


@pytest.mark.parametrize("dag_id", [SYNC, DEFERRED], ids=["sync", "deferred"])
@pytest.mark.parametrize("stop_delay", [0, 15], ids=["stops-at-once", "takes-15s-to-stop"])
def test_clearing_a_running_task_cancels_its_app_and_reruns_with_a_fresh_one(
    airflow: AirflowDeployment, dag_id: str, stop_delay: int
) -> None:
    before = app_ids(airflow.state_dir, "ticker")
    run_id = airflow.trigger(dag_id, {"duration": 12, "stop_delay": stop_delay})
    first = _wait_running_app(airflow, dag_id, run_id, before)
    _clear(airflow, dag_id, run_id)
    second = _wait_running_app(airflow, dag_id, run_id, [*before, first])
    # the rerun never adopts the app being cancelled: that one ends CANCELLED
    assert _app_state(airflow, first) == "CANCELLED"

    ti = _wait_task(airflow, dag_id, run_id)
    assert (ti["state"], ti["try_number"]) == ("success", 2)  # the cleared try, no retry spent
    assert _app_state(airflow, second) == "SUCCEEDED"
    assert [a for a in app_ids(airflow.state_dir, "ticker") if a not in before] == sorted(
        [first, second]
    )
    _no_app_left(airflow)


def test_clearing_a_deferred_task_reruns_it_with_a_fresh_app_before_its_trigger_is_cancelled(
    airflow: AirflowDeployment,
) -> None:
    """Issue 27 (part 7), the race made certain: the triggerer is paused (SIGSTOP) across the
    clear, so the cleared try looks at the app before the old trigger's ``on_kill`` cancels
    it (as a busy triggerer does). That try itself must launch a fresh app and succeed,
    without spending a retry; the old app ends CANCELLED."""
    before = app_ids(airflow.state_dir, "ticker")
    run_id = airflow.trigger(DEFERRED, {"duration": 12})
    first = _wait_running_app(airflow, DEFERRED, run_id, before)
    wait_until(
        lambda: airflow.task_instance(DEFERRED, run_id)["state"] == "deferred",
        120,
        "the task to defer",
    )
    triggerer = airflow.daemons["triggerer"]
    os.killpg(triggerer.pid, signal.SIGSTOP)
    try:
        _clear(airflow, DEFERRED, run_id)
        # the cleared try decides (and defers) while the old trigger still watches the app
        wait_until(
            lambda: (
                (ti := airflow.task_instance(DEFERRED, run_id))["try_number"] == 2
                and ti["state"] in ("deferred", *TERMINAL)
            ),
            180,
            "the cleared try to defer",
            interval=1,
        )
    finally:
        os.killpg(triggerer.pid, signal.SIGCONT)

    ti = _wait_task(airflow, DEFERRED, run_id)
    assert (ti["state"], ti["try_number"]) == ("success", 2)  # the cleared try itself
    first_handle, second_handle = _launched(airflow, DEFERRED, run_id, 2)
    assert first_handle.endswith(f"/{first}") and second_handle != first_handle
    assert "launched before this task instance was cleared" in airflow.task_log(DEFERRED, run_id, 2)
    (second,) = (a for a in app_ids(airflow.state_dir, "ticker") if a not in (*before, first))
    assert second_handle.endswith(f"/{second}")
    assert _app_state(airflow, first) == "CANCELLED"
    assert _app_state(airflow, second) == "SUCCEEDED"
    _no_app_left(airflow)


@pytest.mark.parametrize("dag_id", [SYNC, DEFERRED], ids=["sync", "deferred"])
def test_mark_failed_cancels_the_app_and_a_clear_then_reruns_it(
    airflow: AirflowDeployment, dag_id: str
) -> None:
    before = app_ids(airflow.state_dir, "ticker")
    run_id = airflow.trigger(dag_id, {"duration": 12, "stop_delay": 5})
    first = _wait_running_app(airflow, dag_id, run_id, before)
    airflow.request(
        "PATCH",
        f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/app",
        {"new_state": "failed"},
    )
    wait_until(lambda: _app_state(airflow, first) == "CANCELLED", 90, f"app {first} cancelled")
    assert airflow.task_instance(dag_id, run_id)["state"] == "failed"

    _clear(airflow, dag_id, run_id)
    ti = _wait_task(airflow, dag_id, run_id)
    assert ti["state"] == "success"
    launched = [a for a in app_ids(airflow.state_dir, "ticker") if a not in before]
    assert len(launched) == 2 and first in launched
    (second,) = (a for a in launched if a != first)
    assert _app_state(airflow, second) == "SUCCEEDED"
    _no_app_left(airflow)


def _anylaunch_reap(airflow: AirflowDeployment, *extra: str) -> dict:
    import json
    import subprocess
    import sys

    argv = ["reap", "-s", "local_cwd", "--engine", "airflow", "--airflow-url", airflow.url]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "anylaunch"), *argv, "--json", *extra],
        env={**airflow.env(), "ANYLAUNCH_AIRFLOW_TOKEN": airflow.token()},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


def test_anylaunch_reap_cancels_the_app_of_a_task_that_ended_with_the_whole_engine(
    airflow: AirflowDeployment,
) -> None:
    """Every Airflow process is SIGKILLed mid-run: no on_kill runs, the app keeps running.
    While Airflow still says the task runs, the reaper keeps the app; once the task is marked
    failed, ``anylaunch reap`` cancels it."""
    before = app_ids(airflow.state_dir, "ticker")
    run_id = airflow.trigger(SYNC, {"duration": 120})
    app_id = _wait_running_app(airflow, SYNC, run_id, before)
    for daemon in airflow.daemons.values():
        os.killpg(daemon.pid, signal.SIGKILL)
        daemon.process.wait(30)
    try:
        airflow.restart("api-server")
        wait_until(lambda: airflow.get(f"/api/v2/dags/{SYNC}"), 180, "the api-server back")
        assert _app_state(airflow, app_id) == "RUNNING"

        report = _anylaunch_reap(airflow)
        mine = [a for a in report["actions"] if app_id in a["handle"]]
        assert [a["action"] for a in mine] == ["keep"]  # the task is "running" to Airflow

        airflow.request(
            "PATCH",
            f"/api/v2/dags/{SYNC}/dagRuns/{run_id}/taskInstances/app",
            {"new_state": "failed"},
        )
        assert [h for h in _anylaunch_reap(airflow, "--dry-run")["cancelled"]] == []
        report = _anylaunch_reap(airflow)
        assert [h for h in report["cancelled"] if app_id in h] and not report["errors"]
        wait_until(lambda: _app_state(airflow, app_id) == "CANCELLED", 60, "the orphan cancelled")
        _no_app_left(airflow)
    finally:
        for name in ("scheduler", "dag-processor", "triggerer"):
            airflow.restart(name)


def test_a_deferred_sweep_is_one_task_with_each_index_its_lines_and_outcome(
    airflow: AirflowDeployment,
) -> None:
    """A 4-index sweep (2 at once, index 2 fails, 3 of 4 required) as one deferred task on
    the deployed triggerer: the task succeeds by the ratio, its log has every index's lines
    once each (``shard/index``), and XCom holds the per-index outcomes."""
    sweep = "anylaunch_deploy_sweep"
    before = app_ids(airflow.state_dir, "sweep")
    run_id = airflow.trigger(sweep, {})
    ti = _wait_task(airflow, sweep, run_id)
    assert ti["state"] == "success", ti
    assert len([a for a in app_ids(airflow.state_dir, "sweep") if a not in before]) == 1
    log = airflow.task_log(sweep, run_id, ti["try_number"])
    for index, name in enumerate("abcd"):
        for i in (1, 2, 3):
            line = f"shard/{index} shard {name} line {i}"
            assert log.count(line) == 1, (line, log[-3000:])
    assert "failed indices: 2 (exit 1)" in log, log[-3000:]
    xcom = airflow.get(f"/api/v2/dags/{sweep}/dagRuns/{run_id}/taskInstances/app/xcomEntries/array")
    outcomes = xcom["value"]
    if isinstance(outcomes, str):  # the REST API may hand back the stored JSON as text
        import json

        outcomes = json.loads(outcomes)
    assert outcomes["counts"] == {"SUCCEEDED": 3, "FAILED": 1}, outcomes
    assert outcomes["indices"]["FAILED"] == "2" and outcomes["exit_codes"]["2"] == 1


def _xcom(airflow: AirflowDeployment, dag_id: str, run_id: str, key: str) -> Any:
    """An XCom of the task ``app`` through the REST API (which may hand back JSON as text)."""
    import json

    value = airflow.get(
        f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/app/xcomEntries/{key}"
    )["value"]
    return json.loads(value) if isinstance(value, str) and value[:1] in "[{" else value


def test_sigkill_after_a_failover_reattaches_to_the_app_on_the_second_target(
    airflow: AirflowDeployment,
) -> None:
    """A task with two targets: ``fulllocal`` (a plugin scheduler on the deployment's
    PYTHONPATH whose capacity says no) is skipped and local_cwd runs the app. The task runner
    is SIGKILLed once the app ticks there: the retry reattaches to the same stable handle and
    the same app on local_cwd (one submission in all) and ends SUCCEEDED."""
    from anylaunch.runner.placement_store import PlacementStore
    from anylaunch.specs.handles import parse_app_handle

    dag_id = "anylaunch_deploy_placed"
    before = app_ids(airflow.state_dir, "placed")
    run_id = airflow.trigger(dag_id, {"duration": 15})
    app_id = _wait_running_app(airflow, dag_id, run_id, before, name="placed")
    stable = str(_xcom(airflow, dag_id, run_id, "app_handle"))
    assert stable.startswith("placement://"), stable
    placement = _xcom(airflow, dag_id, run_id, "placement")
    assert [(e["scheduler"], e["outcome"]) for e in placement["entries"]] == [
        ("fulllocal", "skipped"),
        ("local_cwd", "current"),
    ]
    assert placement["entries"][1]["handle"].endswith(f"/{app_id}")
    runners = airflow.task_runners()
    assert runners, "no task runner process found"
    for pid in runners:
        os.kill(pid, signal.SIGKILL)

    ti = _wait_task(airflow, dag_id, run_id)
    assert (ti["state"], ti["try_number"]) == ("success", 2)
    assert [a for a in app_ids(airflow.state_dir, "placed") if a not in before] == [app_id]
    assert _app_state(airflow, app_id) == "SUCCEEDED"
    # the record any process reads: one attempt, submitted once, to that app
    _, session, placed_id = parse_app_handle(stable)
    record = PlacementStore(str(airflow.placements)).read(session, placed_id)
    assert record is not None and len(record.attempts) == 1, record
    assert record.attempts[0].handle == f"local_cwd://{session}/{app_id}"
    assert [s for s, _ in record.attempts[0].skipped] == ["fulllocal"]
    second = airflow.task_log(dag_id, run_id, 2)
    assert "Reconnecting to existing job" in second
    assert f"this task drives placed anylaunch app {stable}" in second
    assert "tick 14" in second  # the reattached try streamed the app to its end
    assert _xcom(airflow, dag_id, run_id, "return_value")["app_handle"] == stable
    final = _xcom(airflow, dag_id, run_id, "placement")
    assert [(e["scheduler"], e["outcome"]) for e in final["entries"]] == [
        ("fulllocal", "skipped"),
        ("local_cwd", "ended"),
    ]
    _no_app_left(airflow)
    assert all(_app_state(airflow, a) == "SUCCEEDED" for a in app_ids(airflow.state_dir, "placed"))


def test_a_deferred_task_whose_job_a_ttl_deleted_unseen_fails_as_its_app_did(
    airflow: AirflowDeployment, kube_client: Any, kube_namespace: str, kubelet: str, tmp_path: Path
) -> None:
    """A deferred task on Kubernetes whose Job has ``ttlSecondsAfterFinished: 0`` and an
    archive. Once the trigger has streamed the app's lines, the triggerer is SIGKILLed; the
    app exits 3, and the TTL controller deletes its Job while no process watches it. The
    restarted triggerer still gets the end (the archive's hold kept the Job and pods), so the
    task fails as the app did, naming its exit code, with every line in its log once; then
    the record is in the archive and the cluster has removed the Job and its pods. (A
    succeeding app takes the same path: tests/schedulers/kubernetes/test_kubernetes_archive_hold.py
    covers the hold itself.)"""
    from anylaunch.runner.archive import Archive
    from anylaunch.schedulers.kubernetes.names import LABEL_APP_ID

    dag_id = "anylaunch_deploy_k8s_ttl"
    archive = (tmp_path / "archive").as_uri()
    conf = {"exit_code": 3, "namespace": kube_namespace, "archive_url": archive}
    run_id = airflow.trigger(dag_id, conf)
    handle = str(
        wait_until(
            lambda: (
                airflow.task_instance(dag_id, run_id)["state"] == "deferred"
                and _xcom(airflow, dag_id, run_id, "app_handle")
            ),
            180,
            "the task to defer with its app's handle",
        )
    )
    name = handle.rsplit("/", 1)[1].split(":", 1)[1]
    selector = f"{LABEL_APP_ID}={name}"

    def objects() -> list[dict[str, Any]]:
        return [
            *kube_client.list("batch/v1", "Job", kube_namespace, selector),
            *kube_client.list("v1", "Pod", kube_namespace, selector),
        ]

    # the API shows a deferred task's trigger log only once the trigger ended: read its file
    folder = airflow.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / "task_id=app"
    wait_until(
        lambda: any("ticker/0 tick 8" in p.read_text() for p in folder.glob("*.log.trigger.*")),
        180,
        "the trigger to stream the app's last line",
        interval=1,
    )
    pods = [o for o in objects() if "hostIP" in o.get("status", {})]
    assert pods and all(p["status"]["phase"] == "Running" for p in pods), pods  # not ended yet
    triggerer = airflow.daemons["triggerer"]
    os.killpg(triggerer.pid, signal.SIGKILL)
    triggerer.process.wait(30)
    # the app ends, and the TTL deletes its Job (the GC its pods) while nobody watches
    wait_until(
        lambda: (found := objects()) and all(o["metadata"].get("deletionTimestamp") for o in found),
        180,
        "the TTL controller to delete the ended app's Job",
    )
    assert airflow.task_instance(dag_id, run_id)["state"] == "deferred"
    airflow.restart("triggerer")

    ti = _wait_task(airflow, dag_id, run_id)
    assert ti["state"] == "failed", ti
    log = airflow.task_log(dag_id, run_id, ti["try_number"])
    ticks = [line.split("ticker/0 ", 1)[1] for line in log.splitlines() if "ticker/0 tick" in line]
    assert ticks == [f"tick {i}" for i in range(1, 9)], log[-3000:]
    assert "exit code 3" in log, log[-3000:]
    assert "unable to retrieve container logs" not in log, log[-3000:]
    status = Archive(archive).status(handle)
    assert status is not None and status.state.name == "FAILED", status
    wait_until(lambda: not objects(), 120, "the released Job and pods to be deleted")
