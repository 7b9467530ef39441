"""Re-execution from failure reattaches to the app the failed attempt launched when it is
still running or succeeded (exactly one app is launched), and launches anew when it failed or
when the re-execution is not from failure. Real runs, a real persistent instance, real
local_cwd apps (counted with the scheduler's own list)."""

import os
import signal
import subprocess
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.reconstruct import ReconstructableJob

from anylaunch.runner import get_runner
from anylaunch.specs import AppDef, AppState, Role
from dagster_anylaunch import AnylaunchResource
from dagster_anylaunch._lifecycle import handle_from_run_tags, run_tag_key

HERE = Path(__file__).resolve().parent
JOBS_FILE = str(HERE / "dagster_jobs.py")
# what the UI's "Re-execute from failure" and the run retries daemon put on the new run
RESUME_RETRY = {"dagster/is_resume_retry": "true"}


# also run in each engine version's own environment (scripts/engine_envs.sh)
pytestmark = pytest.mark.engine_matrix


def recon_slow_job() -> ReconstructableJob:
    return ReconstructableJob.for_file(JOBS_FILE, "slow_job")


def reexecute_from_failure(instance: dg.DagsterInstance, run_id: str) -> "dg.JobExecutionResult":
    return dg.execute_job(
        recon_slow_job(),
        instance,
        reexecution_options=dg.ReexecutionOptions.from_failure(run_id, instance),
        tags=RESUME_RETRY,
    )


def test_reexecution_after_a_worker_crash_reattaches_to_the_running_app(
    tmp_path: Path,
    instance_dir: Path,
    persistent_instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
    launched_apps,
    user_logs,
    wait_for,
) -> None:
    # the app runs until the re-execution has reattached to it (or 120 s at most)
    release = tmp_path / "release"
    monkeypatch.setenv("TEST_APP_SLEEP_S", "120")
    monkeypatch.setenv("TEST_APP_RELEASE_FILE", str(release))
    run_id = str(uuid.uuid4())
    worker = subprocess.Popen(
        [sys.executable, str(HERE / "run_worker.py"), str(instance_dir), "slow_job", run_id],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    try:
        wait_for(
            "the app's first line in the run's log",
            lambda: any("main/0 started" in m for m in user_logs(persistent_instance, run_id)),
        )
    finally:
        worker.send_signal(signal.SIGKILL)  # the run worker dies: nothing cancels the app
        worker.wait(timeout=30)
    (app,) = launched_apps()
    assert app.state == AppState.RUNNING
    # what run monitoring does when it finds the worker dead
    crashed = persistent_instance.get_run_by_id(run_id)
    assert crashed is not None
    persistent_instance.report_run_failed(crashed)

    def release_once_reattached() -> None:
        def reattached() -> bool:
            children = [r for r in persistent_instance.get_runs() if r.parent_run_id == run_id]
            return any(
                "reattaching to app" in m
                for c in children
                for m in user_logs(persistent_instance, c.run_id)
            )

        try:
            wait_for("the re-execution to reattach", reattached)
        finally:
            release.touch()

    releaser = threading.Thread(target=release_once_reattached, daemon=True)
    releaser.start()
    try:
        with reexecute_from_failure(persistent_instance, run_id) as result:
            assert result.success
            assert result.output_for_node("slow_step") == app.app_handle
            logs = user_logs(persistent_instance, result.run_id)
    finally:
        release.touch()
        releaser.join(timeout=60)

    assert [a.app_id for a in launched_apps()] == [app.app_id]  # exactly one app launched
    with get_runner() as runner:
        final = runner.status(app.app_handle)
    assert final is not None and final.state == AppState.SUCCEEDED
    assert any(f"reattaching to app {app.app_handle} (RUNNING)" in m for m in logs)
    assert any("main/0 finished" in m for m in logs)  # its logs stream into the new run
    # Dagster's launch-handle events and our run tags agree on the handle
    child = persistent_instance.get_run_by_id(result.run_id)
    assert child is not None and child.parent_run_id == run_id
    assert child.tags[run_tag_key("slow_step")] == app.app_handle
    assert handle_from_run_tags(persistent_instance, crashed, "slow_step") == app.app_handle


def test_reexecution_reattaches_to_an_app_that_succeeded(
    tmp_path: Path,
    persistent_instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
    launched_apps,
    user_logs,
) -> None:
    monkeypatch.setenv("TEST_APP_SLEEP_S", "0")
    monkeypatch.setenv("TEST_FAIL_ONCE_MARKER", str(tmp_path / "failed-once"))
    with dg.execute_job(recon_slow_job(), persistent_instance) as first:
        assert not first.success  # the app succeeded, then the step failed
    (app,) = launched_apps()
    assert app.state == AppState.SUCCEEDED

    with reexecute_from_failure(persistent_instance, first.run_id) as second:
        assert second.success
        assert second.output_for_node("slow_step") == app.app_handle
        logs = user_logs(persistent_instance, second.run_id)
    assert len(launched_apps()) == 1
    assert any(f"reattaching to app {app.app_handle} (SUCCEEDED)" in m for m in logs)
    # a run tag lookup (the fallback for a Dagster without launch handles, e.g. 1.13.0) follows
    # the same chain
    child = persistent_instance.get_run_by_id(second.run_id)
    assert child is not None
    assert handle_from_run_tags(persistent_instance, child, "slow_step") == app.app_handle


def test_reexecuting_all_steps_launches_a_new_app(
    tmp_path: Path,
    persistent_instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
    launched_apps,
) -> None:
    monkeypatch.setenv("TEST_APP_SLEEP_S", "0")
    monkeypatch.setenv("TEST_FAIL_ONCE_MARKER", str(tmp_path / "failed-once"))
    with dg.execute_job(recon_slow_job(), persistent_instance) as first:
        assert not first.success
    options = dg.ReexecutionOptions(parent_run_id=first.run_id)  # all steps, on purpose
    with dg.execute_job(
        recon_slow_job(), persistent_instance, reexecution_options=options
    ) as again:
        assert again.success
        second_handle = again.output_for_node("slow_step")
    apps = launched_apps()
    assert len(apps) == 2
    assert second_handle == apps[1].app_handle


FAIL_FIRST_TIME = """\
import os, sys
marker = os.environ["MARKER"]
if not os.path.exists(marker):
    open(marker, "w").close()
    print("first attempt fails", flush=True)
    sys.exit(3)
print("second attempt succeeds", flush=True)
"""


def test_a_step_retry_launches_anew_when_the_app_failed(
    tmp_path: Path, instance: dg.DagsterInstance, launched_apps, user_logs
) -> None:
    role = Role(
        "main",
        image=".",
        entrypoint=sys.executable,
        args=["-c", FAIL_FIRST_TIME],
        env={"MARKER": str(tmp_path / "marker")},
    )
    app = AppDef("flaky", [role])

    @dg.op(retry_policy=dg.RetryPolicy(max_retries=1))
    def flaky(context: dg.OpExecutionContext, anylaunch: AnylaunchResource) -> str:
        return anylaunch.run(context, app).handle

    @dg.job(resource_defs={"anylaunch": AnylaunchResource(poll_interval_s=0.2)})
    def flaky_job() -> None:
        flaky()

    result = flaky_job.execute_in_process(instance=instance)
    assert result.success
    first, second = launched_apps()
    assert (first.state, second.state) == (AppState.FAILED, AppState.SUCCEEDED)
    assert result.output_for_node("flaky") == second.app_handle
    logs = user_logs(instance, result.run_id)
    assert any(f"app {first.app_handle} of an earlier attempt ended FAILED" in m for m in logs)


def test_a_retry_of_a_step_that_launched_several_apps_reattaches_each_call_to_its_own(
    instance: dg.DagsterInstance, launched_apps, user_logs
) -> None:
    # the first attempt launches three apps (two of them the same request) and fails after
    # they ended; the retry makes the same calls, the last two from threads
    def app(name: str, text: str) -> AppDef:
        code = f"print({text!r}, flush=True)"
        return AppDef(name, [Role("main", image=".", entrypoint=sys.executable, args=["-c", code])])

    calls = [app("prep", "prep"), app("shard", "same"), app("shard", "same")]

    @dg.op(retry_policy=dg.RetryPolicy(max_retries=1))
    def fan_out(context: dg.OpExecutionContext, anylaunch: AnylaunchResource) -> list:
        first = anylaunch.run(context, calls[0])
        with ThreadPoolExecutor(max_workers=2) as pool:
            rest = list(pool.map(lambda a: anylaunch.run(context, a), calls[1:]))
        if context.retry_number == 0:
            raise RuntimeError("the step fails after its apps ended")
        return [(r.handle, r.reattached) for r in (first, *rest)]

    @dg.job(resource_defs={"anylaunch": AnylaunchResource(poll_interval_s=0.2)})
    def fan_out_job() -> None:
        fan_out()

    result = fan_out_job.execute_in_process(instance=instance)

    assert result.success
    apps = launched_apps()
    assert len(apps) == 3  # the retry launched nothing
    outcome = result.output_for_node("fan_out")
    assert [reattached for _, reattached in outcome] == [True, True, True]
    by_handle = {a.app_handle: a for a in apps}
    handles = [handle for handle, _ in outcome]
    assert sorted(handles) == sorted(by_handle)  # each app once: no call took another's
    assert by_handle[handles[0]].app_handle.split("/")[-1].startswith("prep-")
    run = instance.get_run_by_id(result.run_id)
    assert run is not None
    slots = {k: v for k, v in run.tags.items() if k.startswith(run_tag_key("fan_out") + "/")}
    assert sorted(slots.values()) == sorted(by_handle)


def test_the_run_tag_lookup_sees_tags_added_after_the_run_started(
    instance: dg.DagsterInstance,
) -> None:
    # a step's context holds the run as it started: a retry of the step (same run) must still
    # find the handle its earlier attempt tagged the run with since
    @dg.job
    def empty_job() -> None:
        pass

    started = instance.create_run_for_job(empty_job)
    assert handle_from_run_tags(instance, started, "train") is None
    instance.add_run_tags(started.run_id, {run_tag_key("train"): "local_cwd://s/train-1"})

    assert run_tag_key("train") not in started.tags  # the stale copy a step would hold
    assert handle_from_run_tags(instance, started, "train") == "local_cwd://s/train-1"
