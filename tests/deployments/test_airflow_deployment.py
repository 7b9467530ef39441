"""Airflow deployed as operators run it, distributed (scheduler with the CeleryExecutor on a
Redis broker, two Celery workers, two triggerers, dag-processor, api-server, PostgreSQL), with
faults injected while a 15-60 s app runs: a task process killed, a whole worker host lost
(its retry runs on the other worker), a triggerer lost (the other takes its triggers over).

Each scenario triggers a DAG run through the REST API, injects one fault, then checks what a
user would: the task's outcome, which worker ran it, how many apps were launched, the app's
final state, the task log, and that no app process is left.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deployments.airflow_deployment import TRIGGERERS, WORKERS, AirflowDeployment
from tests.deployments.conftest import app_ids
from tests.deployments.postgres import Postgres
from tests.deployments.processes import cmdline, wait_until
from tests.schedulers.kubernetes.kube_cluster import kube_client, kube_namespace, kubelet

__all__ = ["kube_client", "kube_namespace", "kubelet"]  # fixtures, asked for by name

pytestmark = pytest.mark.slow

SYNC, DEFERRED = "anylaunch_deploy_sync", "anylaunch_deploy_deferred"
TERMINAL = ("success", "failed", "upstream_failed")


@pytest.fixture(scope="module")
def deployment(
    postgres: Postgres, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AirflowDeployment]:
    deployment = AirflowDeployment(tmp_path_factory.mktemp("airflow"), postgres, redis_url)
    try:
        deployment.start()
        yield deployment
    finally:
        deployment.stop()


@pytest.fixture
def airflow(deployment: AirflowDeployment) -> Iterator[AirflowDeployment]:
    """The module's deployment; every daemon a test's fault left dead is started again after it."""
    yield deployment
    deployment.ensure_running()


def _tries(airflow: AirflowDeployment, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    """Every try of the task ``app`` (its ``hostname`` names the worker that ran it)."""
    found = airflow.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/app/tries")
    return sorted(found["task_instances"], key=lambda t: int(t["try_number"]))


def _ticks(log: str) -> list[str]:
    """The ticker's lines in a task log (``tick N``), in order."""
    return [line.split("ticker/0 ", 1)[1] for line in log.splitlines() if "ticker/0 tick" in line]


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
    ticks = _ticks(second)
    assert len(ticks) == len(set(ticks)), f"lines repeated in the reattached try: {ticks}"
    # each try ran on one of the Celery workers (the pool restarts its killed process)
    assert {t["hostname"] for t in _tries(airflow, SYNC, run_id)} <= set(WORKERS.values())
    _no_app_left(airflow)


def test_sigkill_of_one_triggerer_hands_its_triggers_to_the_other(
    airflow: AirflowDeployment,
) -> None:
    """Two triggerers (HA): the one running the task's trigger is SIGKILLed with its whole
    process tree. Once its heartbeat is older than the health threshold the other triggerer
    takes the trigger over (rebuilt from its kwargs, its log position from the cursor). Then
    the killed one is back and the holder is paused (SIGSTOP) until the first takes the
    trigger back; resumed, the paused one finds its trigger moved and cancels it, which
    calls the trigger's ``on_kill`` (Airflow 3.3): the app must not be cancelled there. The
    app ends SUCCEEDED, and no line shows twice."""
    before = app_ids(airflow.state_dir, "ticker")
    run_id = airflow.trigger(DEFERRED, {"duration": 50})
    app_id = _wait_running_app(airflow, DEFERRED, run_id, before)

    def held_by(host: str | None = None) -> str | None:
        holder = airflow.trigger_host(DEFERRED, run_id)
        return holder if holder and host in (None, holder) else None

    first = str(wait_until(held_by, 120, "a triggerer to run the task's trigger"))
    assert first in TRIGGERERS.values(), first
    (other,) = (h for h in TRIGGERERS.values() if h != first)
    airflow.kill_host(airflow.triggerer(first))
    wait_until(lambda: held_by(other), 90, f"triggerer {other} to take the trigger over", 1)

    airflow.restart(airflow.triggerer(first))
    paused = airflow.daemons[airflow.triggerer(other)]
    os.killpg(paused.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: held_by(first), 120, f"triggerer {first} to take it back", 1)
    finally:
        os.killpg(paused.pid, signal.SIGCONT)
    # the resumed triggerer cancels its copy of the moved trigger: Airflow calls on_kill
    folder = airflow.home / "logs" / f"dag_id={DEFERRED}" / f"run_id={run_id}" / "task_id=app"
    let_go = str(
        wait_until(
            lambda: next(
                (
                    text
                    for p in folder.glob("attempt=1.log.trigger.*")
                    if "Trigger cancelled by user action" in (text := p.read_text())
                    and "trigger completed" in text.split("Trigger cancelled by user action")[1]
                ),
                None,
            ),
            60,
            f"triggerer {other}, resumed, to cancel its moved trigger",
            interval=1,
        )
    )
    # on_kill left the app to the new holder (unless that one had already seen it end: a
    # triggerer slow to start a trigger can take the app's whole run)
    assert _app_state(airflow, app_id) != "CANCELLED", let_go[-2000:]
    if "is SUCCEEDED" not in "".join(p.read_text() for p in folder.glob("*.log.trigger.*")):
        assert "another triggerer took this trigger over" in let_go, let_go[-2000:]

    ti = _wait_task(airflow, DEFERRED, run_id)
    assert (ti["state"], ti["try_number"]) == ("success", 1)
    assert [a for a in app_ids(airflow.state_dir, "ticker") if a not in before] == [app_id]
    assert _app_state(airflow, app_id) == "SUCCEEDED"
    log = airflow.task_log(DEFERRED, run_id, ti["try_number"])
    ticks = _ticks(log)
    assert ticks, log[-2000:]
    assert len(ticks) == len(set(ticks)), f"lines repeated after the takeovers: {ticks}"
    assert "tick 49" in ticks
    _no_app_left(airflow)


def _launched(airflow: AirflowDeployment, dag_id: str, run_id: str, tries: int) -> list[str]:
    """The handles the task's tries launched, from their logs."""
    import re

    handles: list[str] = []
    for number in range(1, tries + 1):
        log = airflow.task_log(dag_id, run_id, number)
        handles += [h for h in re.findall(r"launched anylaunch app (\S+)", log) if h not in handles]
    return handles


def _slurm_jobs(name: str, since: str) -> list[str]:
    """The ids of the Slurm jobs called ``name`` submitted since ``since`` (sacct's format)."""
    import subprocess

    done = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-S", since, "--name", name, "-o", "JobID"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [line for line in done.stdout.split() if line]


def test_losing_a_worker_host_retries_on_the_other_worker_on_the_same_slurm_job(
    airflow: AirflowDeployment, slurm_cluster: object
) -> None:
    """The Celery worker running a sync task is SIGKILLed with its whole process tree (the
    worker, its pool process and the task's supervisor and process: nothing reports). The
    scheduler notices the missing task heartbeat, the retry runs on the other worker and
    reattaches to the same Slurm job: one job submitted, its lines once each in the retry."""
    import time

    from anylaunch.runner import get_runner

    dag_id = "anylaunch_deploy_slurm"
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    run_id = airflow.trigger(dag_id, {"duration": 40})

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
    first = str(airflow.task_instance(dag_id, run_id)["hostname"])
    victim = airflow.worker(first)
    killed = airflow.kill_host(victim)
    assert len(killed) >= 3, killed  # the worker, its pool process, the task's processes
    wait_until(lambda: not [p for p in killed if cmdline(p)], 30, "the killed processes to end")

    ti = _wait_task(airflow, dag_id, run_id)  # the killed worker stays down meanwhile
    assert ti["state"] == "success" and ti["try_number"] == 2
    (other,) = (h for h in WORKERS.values() if h != first)
    assert [t["hostname"] for t in _tries(airflow, dag_id, run_id)] == [first, other]
    assert _launched(airflow, dag_id, run_id, 2) == [handle]  # the retry launched nothing
    assert len(_slurm_jobs("ticker:ticker", since)) == 1  # submitted once
    second = airflow.task_log(dag_id, run_id, 2)
    assert "Reconnecting to existing job" in second
    ticks = _ticks(second)
    assert "tick 39" in ticks, second[-2000:]  # the retry streamed the job to its end
    assert len(ticks) == len(set(ticks)), f"lines repeated in the retry: {ticks}"
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
    # the clear reached the app whichever worker ran it; the rerun ran on either worker
    hosts = [t["hostname"] for t in _tries(airflow, dag_id, run_id)]
    assert len(hosts) == 2 and set(hosts) <= set(WORKERS.values()), hosts
    _no_app_left(airflow)


def test_clearing_a_deferred_task_reruns_it_with_a_fresh_app_before_its_trigger_is_cancelled(
    airflow: AirflowDeployment,
) -> None:
    """Issue 27 (part 7), the race made certain: the triggerers are paused (SIGSTOP) across the
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
    triggerers = [airflow.daemons[name] for name in TRIGGERERS]
    for triggerer in triggerers:
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
        for triggerer in triggerers:
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
    ran_on = airflow.task_instance(dag_id, run_id)["hostname"]
    assert ran_on in WORKERS.values(), ran_on  # the mark-failed must reach that worker's app
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
        airflow.ensure_running()


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
    archive. Once the trigger has streamed the app's lines, both triggerers are SIGKILLed; the
    app exits 3, and the TTL controller deletes its Job while no process watches it. The
    restarted triggerers still get the end (the archive's hold kept the Job and pods), so the
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
    for name in TRIGGERERS:  # both: no triggerer watches while the app ends
        airflow.kill_host(name)
    # the app ends, and the TTL deletes its Job (the GC its pods) while nobody watches
    wait_until(
        lambda: (found := objects()) and all(o["metadata"].get("deletionTimestamp") for o in found),
        180,
        "the TTL controller to delete the ended app's Job",
    )
    assert airflow.task_instance(dag_id, run_id)["state"] == "deferred"
    for name in TRIGGERERS:
        airflow.restart(name)

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
