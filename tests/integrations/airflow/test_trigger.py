"""AnylaunchAppTrigger in an event loop, driven the way Airflow's triggerer drives it."""

import asyncio
import contextlib
import sys
import time
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from anylaunch.runner import get_runner
from anylaunch.specs import AppDef, Role
from anylaunch.specs.errors import InvalidSpecError


def launch(script: str, replicas: int = 1, env: Optional[Dict[str, str]] = None) -> str:
    app = AppDef(
        name="trig",
        roles=[
            Role(
                name="job",
                image=".",
                entrypoint=sys.executable,
                args=["-c", script],
                num_replicas=replicas,
                env=dict(env or {}),
            )
        ],
    )
    with get_runner() as runner:
        return runner.run(app, "local_cwd")


def state(handle: str) -> str:
    with get_runner() as runner:
        status = runner.status(handle)
    return status.state.name if status else "GONE"


def first_event(trigger: Any, timeout: float = 60) -> Dict[str, Any]:
    async def main() -> Any:
        return await asyncio.wait_for(trigger.run().__anext__(), timeout)

    return asyncio.run(main()).payload


def records(text: str, caplog: pytest.LogCaptureFixture, out: str) -> int:
    """How many log records hold ``text``. A record reaches pytest's log capture, stdout or
    both: Airflow 3.0's logging config prints the root logger's records on stdout as well
    (and replaces pytest's handler if airflow is first imported during the test); 3.3's
    structlog loggers write to stdout only. Count it in each place, never in both added."""
    return max(caplog.text.count(text), out.count(text))


def test_serialize_round_trip_keeps_only_json_friendly_kwargs(state_dir: Any, afc: Any) -> None:
    import json

    serialize, deserialize, import_string = afc.serde()

    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    trigger = AnylaunchAppTrigger(
        "local_cwd://team/train-1a2b",
        poll_interval=2.5,
        log_roles=["trainer"],
        log_replicas=[0],
        log_positions={"trainer/0": 42},
        startup_deadline=1_900_000_000.0,
        run_deadline=1_900_003_600.0,
        cancel_on_kill=False,
        try_number=2,
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_anylaunch.triggers.AnylaunchAppTrigger"
    assert json.loads(json.dumps(kwargs)) == kwargs  # plain JSON, nothing Python-specific
    # the task runner serde-encodes the kwargs; the triggerer decodes them and rebuilds
    rebuilt = import_string(classpath)(**deserialize(serialize(kwargs)))
    assert rebuilt.serialize() == (classpath, kwargs)
    assert rebuilt.log_positions == {"trainer/0": 42} and rebuilt.cancel_on_kill is False
    assert rebuilt.try_number == 2


def test_trigger_rejects_bad_arguments_clearly() -> None:
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    with pytest.raises(InvalidSpecError, match=r"app_handle='nope' is invalid: not of the form"):
        AnylaunchAppTrigger("nope")
    with pytest.raises(InvalidSpecError, match=r"poll_interval=0 is invalid"):
        AnylaunchAppTrigger("local_cwd://s/a-1", poll_interval=0)


def test_trigger_fires_once_with_the_final_status_and_log_cursor(
    state_dir: Any, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    handle = launch(
        "import time\nfor i in range(3):\n    print('line', i, flush=True); time.sleep(0.2)"
    )
    # resume from a cursor that says line 0 was already shown: it is not repeated
    event = first_event(
        AnylaunchAppTrigger(handle, poll_interval=0.2, log_positions={"job/0": 1}, try_number=3)
    )
    assert event["status"] == "success"
    assert event["try_number"] == 3  # the try that deferred, told apart from a later one
    assert event["app_status"]["state"] == "SUCCEEDED"
    assert event["app_status"]["app_handle"] == handle
    assert event["log_positions"] == {"job/0": 3}
    assert event["log_tail"] == ["job/0 line 1", "job/0 line 2"]
    out = capfd.readouterr().out
    logged = caplog.text + out
    assert "job/0 line 1" in logged and "job/0 line 0" not in logged
    # one record per state change, however many polls saw it
    assert records(f"anylaunch app {handle} is RUNNING", caplog, out) <= 1
    assert records(f"anylaunch app {handle} is SUCCEEDED", caplog, out) == 1


def test_trigger_reports_a_failed_and_an_unknown_app(state_dir: Any) -> None:
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    handle = launch("import sys; print('oops', flush=True); sys.exit(2)")
    event = first_event(AnylaunchAppTrigger(handle, poll_interval=0.2))
    assert event["status"] == "failed"
    assert "try_number" not in event  # none given: the event is as before
    assert event["message"].startswith(f"anylaunch app {handle} ended FAILED")
    assert "job/0 oops" in event["message"]

    gone = first_event(AnylaunchAppTrigger("local_cwd://anylaunch/never-1234", poll_interval=0.2))
    assert gone["status"] == "error" and "no longer exists" in gone["message"]


SECRET_SCRIPT = """
import os, sys
print("token=" + os.environ["API_TOKEN"], "dsn=" + os.environ["DSN"], flush=True)
print("failing with", os.environ["API_TOKEN"], os.environ["DSN"], file=sys.stderr, flush=True)
sys.exit(5)
"""


def test_the_event_and_the_log_never_hold_a_secret(
    state_dir: Any,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    afc: Any,
) -> None:
    """The trigger reads the values from the app's own description (its kwargs, stored in the
    metadata DB, hold only the declared names); the event is stored in the DB too."""
    import json

    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    token, dsn = "tok-trig-6b1f0e", "dsn-trig-0c4d2a"  # secret by name / declared secret
    handle = launch(SECRET_SCRIPT, env={"API_TOKEN": token, "DSN": dsn})
    trigger = AnylaunchAppTrigger(handle, poll_interval=0.2, secret_env_names=["DSN"])
    assert token not in json.dumps(trigger.serialize()) and dsn not in json.dumps(
        trigger.serialize()
    )
    event = first_event(trigger)
    assert event["status"] == "failed"
    assert token not in json.dumps(event) and dsn not in json.dumps(event)
    assert "job/0 token=*** dsn=***" in event["log_tail"]
    assert "\nexit code: 5\nlast stderr:\n  failing with *** ***" in event["message"]
    stderr_tail = json.loads(event["app_status"]["structured_error_msg"])["stderr_tail"]
    assert stderr_tail == ["failing with *** ***"]
    logged = caplog.text + capfd.readouterr().out
    assert "job/0 token=*** dsn=***" in logged
    assert token not in logged and dsn not in logged
    # Airflow's own masker was told the values too
    assert afc.redact(f"{token} {dsn}") == "*** ***"


def test_run_deadline_cancels_the_app(state_dir: Any, waiter: Callable[..., Any]) -> None:
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    handle = launch("import time; time.sleep(120)")
    event = first_event(
        AnylaunchAppTrigger(handle, poll_interval=0.2, run_deadline=time.time() + 1.5)
    )
    assert event["status"] == "timeout"
    assert "did not finish by its deadline" in event["message"]
    assert "it is being cancelled" in event["message"]
    assert "execution_timeout" in event["message"]  # the fix names Airflow's own option
    waiter("the app to be cancelled", lambda: state(handle) == "CANCELLED", timeout=30)


def test_run_timeout_counts_from_the_start_the_trigger_sees(
    state_dir: Any, waiter: Callable[..., Any]
) -> None:
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    handle = launch("import time; time.sleep(120)")
    event = first_event(AnylaunchAppTrigger(handle, poll_interval=0.2, run_timeout=1.0))
    assert event["status"] == "timeout"
    assert event["message"].startswith(f"anylaunch app {handle} did not finish within 1s")
    assert event["app_status"]["state"] == "RUNNING"  # what it was when the deadline passed
    waiter("the app to be cancelled", lambda: state(handle) == "CANCELLED", timeout=30)


def run_in_triggerer(
    trigger: Any, stop: Callable[[Any, asyncio.Task], Any]
) -> Tuple[List[Any], BaseException]:
    """Runs ``trigger`` in Airflow's own TriggerRunner.run_trigger until the app RUNS, then
    stops it with ``stop(runner, task)``; returns the events and how the task ended."""
    from airflow.jobs.triggerer_job_runner import TriggerRunner

    from airflow_anylaunch._compat import AIRFLOW_V_3_0_PLUS

    # what the triggerer sets on a trigger it builds, and its run_trigger reads on cancel:
    # Airflow 2 the task instance's trigger_timeout; Airflow 3.0-3.2 ``timeout_after``
    # (TriggerRunner.create_triggers; 3.3 passes it to run_trigger instead, default None)
    if not AIRFLOW_V_3_0_PLUS and trigger.task_instance is None:
        trigger.task_instance = SimpleNamespace(trigger_timeout=None)
    if AIRFLOW_V_3_0_PLUS and not hasattr(trigger, "timeout_after"):
        trigger.timeout_after = None

    async def main() -> Tuple[List[Any], BaseException]:
        runner = TriggerRunner()
        task = asyncio.create_task(runner.run_trigger(1, trigger))
        runner.triggers[1] = {"task": task, "name": "anylaunch", "events": 0, "is_watcher": False}
        deadline = time.monotonic() + 30
        while state(trigger.app_handle) != "RUNNING" and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)  # the trigger is polling
        await stop(runner, task)
        ended: BaseException = RuntimeError("not ended")
        try:
            await asyncio.wait_for(task, 30)
        except BaseException as e:  # CancelledError is a BaseException
            ended = e
        return list(runner.events), ended

    return asyncio.run(main())


def test_user_kill_in_the_triggerer_cancels_the_app(
    state_dir: Any, waiter: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, afc: Any
) -> None:
    if afc.version < (3, 3):
        pytest.skip("a user kill reaches a trigger (BaseTrigger.on_kill) from Airflow 3.3 on")
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    monkeypatch.setenv("AIRFLOW_DISABLE_GREENBACK_PORTAL", "true")
    handle = launch("import time; time.sleep(120)")

    async def user_kill(runner: Any, task: Any) -> None:
        runner.to_cancel.append(1)  # what the triggerer does for mark-failed / clear
        await runner.cancel_triggers()

    events, ended = run_in_triggerer(AnylaunchAppTrigger(handle, poll_interval=0.2), user_kill)
    assert isinstance(ended, asyncio.CancelledError) and events == []
    waiter("the app to be cancelled", lambda: state(handle) == "CANCELLED", timeout=30)


def test_triggerer_restart_never_cancels_and_a_new_trigger_resumes(
    state_dir: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    monkeypatch.setenv("AIRFLOW_DISABLE_GREENBACK_PORTAL", "true")
    handle = launch("import time; time.sleep(3); print('survived the restart', flush=True)")
    trigger = AnylaunchAppTrigger(handle, poll_interval=0.2)

    async def shutdown(runner: Any, task: Any) -> None:
        task.cancel()  # a triggerer stopping cancels its tasks with no user-action message

    events, ended = run_in_triggerer(trigger, shutdown)
    assert isinstance(ended, asyncio.CancelledError) and events == []
    assert state(handle) == "RUNNING"
    # another triggerer rebuilds the trigger from its serialized kwargs and finishes the wait
    _, kwargs = trigger.serialize()
    event = first_event(AnylaunchAppTrigger(**kwargs))
    assert event["status"] == "success"
    assert "job/0 survived the restart" in event["log_tail"]


def test_cancel_on_kill_false_leaves_the_app_running(
    state_dir: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    monkeypatch.setenv("AIRFLOW_DISABLE_GREENBACK_PORTAL", "true")
    handle = launch("import time; time.sleep(120)")

    async def user_kill(runner: Any, task: Any) -> None:
        runner.to_cancel.append(1)
        await runner.cancel_triggers()

    run_in_triggerer(
        AnylaunchAppTrigger(handle, poll_interval=0.2, cancel_on_kill=False), user_kill
    )
    time.sleep(0.5)
    assert state(handle) == "RUNNING"
    with contextlib.suppress(Exception), get_runner() as runner:
        runner.cancel(handle)


def test_a_trigger_serialized_by_the_previous_version_resumes(state_dir: Any, afc: Any) -> None:
    """Kwargs exactly as the previous version stored them (before run_timeout,
    max_poll_errors and secret_env_names), through Airflow's own serde and classpath import:
    an already-deferred task keeps resuming after the upgrade, from its log cursor."""
    serialize, deserialize, import_string = afc.serde()

    handle = launch(
        "print('shown before the upgrade', flush=True); print('still here', flush=True)"
    )
    old_kwargs = {
        "app_handle": handle,
        "poll_interval": 0.2,
        "stream_logs": True,
        "log_roles": None,
        "log_replicas": None,
        "log_positions": {"job/0": 1},
        "startup_deadline": None,
        "run_deadline": time.time() + 120,
        "cancel_on_kill": True,
        "cancel_on_timeout": True,
    }
    stored = serialize(old_kwargs)  # what the metadata DB holds
    trigger = import_string("airflow_anylaunch.triggers.AnylaunchAppTrigger")(**deserialize(stored))
    _, kwargs = trigger.serialize()
    # every old kwarg keeps its value; the new ones take their defaults
    assert {k: kwargs[k] for k in old_kwargs} == old_kwargs
    assert (kwargs["run_timeout"], kwargs["max_poll_errors"], kwargs["secret_env_names"]) == (
        None,
        10,
        None,
    )
    assert kwargs["try_number"] is None  # its events name no try: any try resumes with them
    event = first_event(trigger)
    assert event["status"] == "success"
    assert event["log_tail"] == ["job/0 still here"]  # line 0 was shown before
    assert event["log_positions"] == {"job/0": 2}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"stream_logs": "false"}, "stream_logs"),
        ({"cancel_on_kill": "false"}, "cancel_on_kill"),
        ({"log_replicas": ["x"]}, "log_replicas"),
        ({"log_replicas": [-3]}, "log_replicas"),
        ({"max_poll_errors": 0}, "max_poll_errors"),
        ({"run_timeout": float("inf")}, "run_timeout"),
        ({"secret_env_names": "DB_URL"}, "secret_env_names"),  # a str is not a list of names
        ({"secret_env_names": [""]}, "secret_env_names"),
        ({"log_roles": "trainer"}, "log_roles"),
        ({"try_number": -1}, "try_number"),
        ({"try_number": True}, "try_number"),
    ],
)
def test_trigger_kwargs_are_checked(kwargs: Dict[str, Any], field: str) -> None:
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    with pytest.raises(InvalidSpecError) as err:
        AnylaunchAppTrigger("local_cwd://s/app-1", **kwargs)
    assert err.value.field == field
