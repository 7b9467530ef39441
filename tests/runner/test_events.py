"""Runner events (issue 30) on real local_cwd apps, delivered to event-handler plugins found in
a real ``anylaunch_plugins`` namespace package: a schedule event per submission, a status
event per change of state only, cancel and retry events, each timed; a failing handler is said
once and never breaks the launch; no secret (env value, secret-named run option) reaches a
handler; an exception inside schedule is recorded with its type."""

from __future__ import annotations

import json
import logging
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anylaunch import plugins
from anylaunch.runner import Runner
from anylaunch.runner.events import AnylaunchEvent
from anylaunch.runner.events.runner_hooks import forget_states
from anylaunch.schedulers import get_scheduler_factories
from anylaunch.schedulers.local.scheduler import LocalScheduler
from anylaunch.specs import AppDef, AppState, Role, runopts
from anylaunch.specs.api import AppDryRunInfo
from tests.schedulers.arrays_kit import FAILING_INDEX, failing_array_app
from tests.schedulers.local_helpers import CFG, wait_until

#: The handler plugins: one writes each event to the JSON-lines file named by
#: EVTEST_EVENTS_FILE (its record's message and the event object's class), one raises when
#: EVTEST_BOOM is set.
HANDLERS = """\
import json
import logging
import os

from anylaunch.plugins import register


class JsonLines(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        path = os.environ.get("EVTEST_EVENTS_FILE")
        if path:
            line = {"message": record.getMessage(), "object": type(record.anylaunch_event).__name__}
            with open(path, "a") as out:
                out.write(json.dumps(line) + "\\n")


class Boom(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if os.environ.get("EVTEST_BOOM"):
            raise RuntimeError("the evtest_boom sink is down")


@register.event_handler()
def evtest_jsonl() -> logging.Handler:
    return JsonLines()


@register.event_handler()
def evtest_boom() -> logging.Handler:
    return Boom()
"""

ENV_SECRET = "env-s3cr3t-5678"
CFG_SECRET = "cfg-s3cr3t-9876"
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def handler_plugins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The handler plugins on sys.path, found by discovery as an installed package's are."""
    root = tmp_path_factory.mktemp("evplugins")
    group = root / "anylaunch_plugins" / "event_handlers"
    group.mkdir(parents=True)
    (group / "evtest_sinks.py").write_text(textwrap.dedent(HANDLERS))
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(root))
        plugins.registry().clear()
        yield
    for name in [m for m in sys.modules if m.startswith("anylaunch_plugins.event_handlers")]:
        del sys.modules[name]
    plugins.registry().clear()
    forget_states()


class TokenLocal(LocalScheduler):
    """local_cwd with a secret-named run option (a cluster's API token), and a ``refuse``
    option (``submit`` or ``cancel``) that makes that call fail with a message quoting the
    request's env, as a careless backend error does."""

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__(session_name, **kwargs)
        self.refuse_cancel: dict[str, dict[str, str]] = {}  # app id -> its env

    def _run_opts(self) -> runopts:
        opts = super()._run_opts()
        opts.add("api_token", type_=str, help="the cluster's API token")
        opts.add("refuse", type_=str, default="", help="'submit' or 'cancel': refuse that call")
        return opts

    def _submit_dryrun(self, app: AppDef, cfg: Any) -> AppDryRunInfo[Any]:
        local = {k: v for k, v in cfg.items() if k not in ("api_token", "refuse")}
        return super()._submit_dryrun(app, local)

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        env = dict(dryrun_info._app.roles[0].env)
        if dryrun_info._cfg.get("refuse") == "submit":
            raise RuntimeError(f"backend refused the request with env {env}")
        app_id = super().schedule(dryrun_info)
        if dryrun_info._cfg.get("refuse") == "cancel":
            self.refuse_cancel[app_id] = env
        return app_id

    def cancel(self, app_id: str) -> None:
        if app_id in self.refuse_cancel:
            raise RuntimeError(
                f"backend cannot cancel an app with env {self.refuse_cancel[app_id]}"
            )
        super().cancel(app_id)


def _token_local(session_name: str, **kwargs: Any) -> LocalScheduler:
    return TokenLocal.from_kwargs(session_name, kwargs)


@pytest.fixture
def events_file(
    handler_plugins: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    path = tmp_path / "events.jsonl"
    monkeypatch.setenv("EVTEST_EVENTS_FILE", str(path))
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    plugins.registry().clear()  # each test starts with fresh handlers (and failures unsaid)
    forget_states()
    yield path


@pytest.fixture
def runner(events_file: Path) -> Iterator[Runner]:
    with Runner("evtest", {**get_scheduler_factories(), "token_local": _token_local}) as r:
        yield r


def events(path: Path, **match: Any) -> list[AnylaunchEvent]:
    """The events the JSON-lines handler got (as the event objects they were), in order."""
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert {line["object"] for line in lines} == {"AnylaunchEvent"}
    found = [AnylaunchEvent.deserialize(line["message"]) for line in lines]
    return [e for e in found if all(getattr(e, k) == v for k, v in match.items())]


def check_timed(event: AnylaunchEvent, since_usec: int) -> None:
    assert isinstance(event.cpu_time_usec, int) and event.cpu_time_usec >= 0, event
    assert isinstance(event.wall_time_usec, int) and event.wall_time_usec >= 0, event
    assert event.start_epoch_time_usec is not None, event
    assert since_usec <= event.start_epoch_time_usec <= time.time_ns() // 1000, event


def waiting_app(go: Path) -> AppDef:
    """Runs until the file ``go`` exists, so that the test sees it RUNNING for sure."""
    script = f'while [ ! -e "{go}" ]; do sleep 0.05; done; echo done'
    return AppDef("waits", [Role("w", image=".", entrypoint="sh", args=["-c", script])])


def test_schedule_and_each_status_change_are_recorded_once_and_timed(
    runner: Runner, events_file: Path, tmp_path: Path
) -> None:
    since = time.time_ns() // 1000
    handle = runner.run(waiting_app(tmp_path / "go"), "local_cwd", CFG)

    def running() -> bool:
        status = runner.status(handle)
        return status is not None and status.state == AppState.RUNNING

    wait_until(running, "the app to run", DEADLINE_S)
    calls_while_running = 5
    for _ in range(calls_while_running):  # asked again and again: no change, no event
        assert runner.status_many([handle])[handle] is not None
    (tmp_path / "go").touch()
    final = runner.wait(handle, wait_interval=0.05, timeout=DEADLINE_S)
    assert final is not None and final.state == AppState.SUCCEEDED

    [scheduled] = events(events_file, api="schedule")
    assert scheduled.app_handle == handle
    assert (scheduled.scheduler, scheduled.session) == ("local_cwd", "evtest")
    assert scheduled.app_id == handle.rpartition("/")[2]
    assert scheduled.app_image == "."
    assert json.loads(scheduled.runcfg or "{}")["cancel_grace_s"] == 0.5
    assert scheduled.exception_type is None
    check_timed(scheduled, since)
    assert scheduled.wall_time_usec and scheduled.wall_time_usec > 0  # a submission takes time

    changes = events(events_file, api="status", app_handle=handle)
    states = [e.state for e in changes]
    assert len(states) == len(set(states)), states  # each state once: only changes
    assert "RUNNING" in states and states[-1] == "SUCCEEDED", states
    assert set(states) <= {"SUBMITTED", "PENDING", "RUNNING", "SUCCEEDED"}, states
    for change in changes:
        assert (change.scheduler, change.session, change.app_id) == (
            "local_cwd",
            "evtest",
            scheduled.app_id,
        )
        check_timed(change, since)


def test_cancel_is_recorded_with_the_cancelled_state(
    runner: Runner, events_file: Path, tmp_path: Path
) -> None:
    since = time.time_ns() // 1000
    handle = runner.run(waiting_app(tmp_path / "never"), "local_cwd", CFG)
    wait_until(
        lambda: (s := runner.status(handle)) is not None and s.state == AppState.RUNNING,
        "the app to run",
        DEADLINE_S,
    )
    runner.cancel(handle)
    final = runner.wait(handle, wait_interval=0.05, timeout=DEADLINE_S)
    assert final is not None and final.state == AppState.CANCELLED

    [cancelled] = events(events_file, api="cancel")
    assert cancelled.app_handle == handle and cancelled.exception_type is None
    check_timed(cancelled, since)
    states = [e.state for e in events(events_file, api="status", app_handle=handle)]
    assert states[-1] == "CANCELLED" and states.count("CANCELLED") == 1, states


def test_retry_of_an_array_names_the_app_it_launched(runner: Runner, events_file: Path) -> None:
    since = time.time_ns() // 1000
    app = failing_array_app(".", size=FAILING_INDEX + 1, parallelism=4)
    handle = runner.run(app, "local_cwd", CFG)
    failed = runner.wait(handle, wait_interval=0.05, timeout=DEADLINE_S)
    assert failed is not None and failed.state == AppState.FAILED

    retried = runner.retry_failed(handle)
    again = runner.wait(retried, wait_interval=0.05, timeout=DEADLINE_S)
    assert again is not None and again.state == AppState.FAILED  # index 7 fails by design

    [retry] = events(events_file, api="retry")
    assert (retry.app_handle, retry.new_app_handle) == (handle, retried)
    assert retry.scheduler == "local_cwd" and retry.exception_type is None
    check_timed(retry, since)
    assert [e.state for e in events(events_file, api="status", app_handle=handle)][-1] == "FAILED"
    assert [e.state for e in events(events_file, api="status", app_handle=retried)][-1] == "FAILED"


def test_a_failing_handler_is_said_once_and_the_launch_goes_on(
    runner: Runner,
    events_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("EVTEST_BOOM", "1")
    caplog.set_level(logging.DEBUG, logger="anylaunch.runner.events")
    (tmp_path / "go").touch()
    handle = runner.run(waiting_app(tmp_path / "go"), "local_cwd", CFG)
    final = runner.wait(handle, wait_interval=0.05, timeout=DEADLINE_S)
    assert final is not None and final.state == AppState.SUCCEEDED

    got = events(events_file)  # the other handler got every event
    assert len(got) >= 2 and got[0].api == "schedule", got
    told = [r for r in caplog.records if "evtest_boom" in r.getMessage()]
    warnings = [r for r in told if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in told]
    assert "RuntimeError: the evtest_boom sink is down" in warnings[0].getMessage()
    assert len(told) == len(got), "each later failure is logged at DEBUG"


def test_no_secret_reaches_a_handler_and_a_failed_submission_is_recorded(
    runner: Runner, events_file: Path, tmp_path: Path
) -> None:
    role = Role(
        "w",
        image=".",
        entrypoint="echo",
        args=["hi"],
        env={"HF_TOKEN": ENV_SECRET, "LR": "0.1"},
    )
    app = AppDef("secretive", [role], metadata={"team": "ml", "db_password": "meta-pw-4321"})
    # a non-secret option whose value holds the secret env value is masked by value
    cfg = {**CFG, "api_token": CFG_SECRET, "log_dir": str(tmp_path / f"logs-{ENV_SECRET}")}
    handle = runner.run(app, "token_local", cfg)
    final = runner.wait(handle, wait_interval=0.05, timeout=DEADLINE_S)
    assert final is not None and final.state == AppState.SUCCEEDED
    with pytest.raises(RuntimeError, match="refused"):
        runner.run(app, "token_local", {**cfg, "refuse": "submit"})
    # a later action on the app (its handle holds no env) is masked with the app's secrets too
    stubborn = runner.run(app, "token_local", {**cfg, "refuse": "cancel"})
    with pytest.raises(RuntimeError, match="cannot cancel"):
        runner.cancel(stubborn)
    assert runner.wait(stubborn, wait_interval=0.05, timeout=DEADLINE_S) is not None

    text = events_file.read_text()
    for secret in (ENV_SECRET, CFG_SECRET, "meta-pw-4321"):
        assert secret not in text
    ok, refused, _ = events(events_file, api="schedule")
    assert ok.app_handle == handle and ok.app_metadata == {"team": "ml", "db_password": "***"}
    shown_cfg = json.loads(ok.runcfg or "{}")
    assert shown_cfg["api_token"] == "***"
    assert shown_cfg["log_dir"] == str(tmp_path / "logs-***")
    assert (refused.app_handle, refused.exception_type) == (None, "RuntimeError")
    assert refused.exception_message and "backend refused the request" in refused.exception_message
    assert "'HF_TOKEN': '***'" in refused.exception_message
    assert refused.raw_exception and "RuntimeError" in refused.raw_exception
    location = json.loads(refused.exception_source_location or "{}")
    assert location["name"] == "schedule" and location["filename"] == __file__
    [cancel] = events(events_file, api="cancel")
    assert (cancel.app_handle, cancel.exception_type) == (stubborn, "RuntimeError")
    assert "'HF_TOKEN': '***'" in (cancel.exception_message or "")


def test_writing_an_apps_archive_record_is_recorded_once(
    events_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANYLAUNCH_ARCHIVE_URL", str(tmp_path / "archive"))
    app = AppDef("archived", [Role("w", image=".", entrypoint="sh", args=["-c", "echo hi"])])
    since = time.time_ns() // 1000
    with Runner("evtest", get_scheduler_factories()) as runner:
        handle = runner.run(app, "local_cwd", CFG)
        runner.wait(handle, wait_interval=0.2, timeout=120)
        runner.status(handle)  # a second sight of the end writes nothing again

    archived = events(events_file, api="archive")
    assert len(archived) == 1, archived
    assert archived[0].app_handle == handle and archived[0].state == "SUCCEEDED"
    assert archived[0].detail and archived[0].detail.endswith(handle.split("/")[-1])
    start = archived[0].start_epoch_time_usec
    assert start is not None and since <= start <= time.time_ns() // 1000, archived[0]
    assert isinstance(archived[0].wall_time_usec, int) and archived[0].wall_time_usec >= 0
