"""Placed apps (``targets``) from Airflow, on real local apps under ``dag.test()``: a full
first target skipped (sync and deferred), an infrastructure loss relaunched (the local
supervisor SIGKILLed; sync, and deferred where the trigger hands the app back to the worker
for the move), a retry reattaching to the stable handle and driving it, no target able to
run it, and bad ``targets`` refused naming the field.

``fulllocal`` is a real plugin scheduler (``plugins/``: local_cwd whose capacity says no),
registered for these tests only.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.bad_input.conftest import Case, assert_rejected
from tests.integrations.airflow.conftest import local_apps, wait_for

PLUGINS = Path(__file__).resolve().parent / "plugins"


@pytest.fixture
def fulllocal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Registers the ``fulllocal`` plugin scheduler and gives the placement records (and the
    checkpoint URLs) a root of this test's own, which it returns."""
    from anylaunch.plugins.plugin_registry import registry

    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv("ANYLAUNCH_HOME", str(tmp_path / "anylaunch-home"))
    root = tmp_path / "placements"
    monkeypatch.setenv("ANYLAUNCH_CHECKPOINT_ROOT", str(root))
    registry.cache_clear()
    yield root
    monkeypatch.undo()  # the plugin off sys.path before the registry is read again
    # an imported namespace package keeps a path it no longer finds on sys.path: forget it,
    # so later discovery (the docs' scheduler pages) sees no fulllocal
    for name in [m for m in sys.modules if m.split(".")[0] == "anylaunch_plugins"]:
        del sys.modules[name]
    registry.cache_clear()


def _op(**kwargs: Any) -> Any:
    from airflow_anylaunch.operators import AnylaunchOperator
    from anylaunch.specs import AppDef, Role

    kwargs.setdefault("task_id", "t")
    kwargs.setdefault("app", AppDef("a", [Role("w", ".", entrypoint=sys.executable)]))
    return AnylaunchOperator(anylaunch_conn_id=None, **kwargs)


def _last_outcome(mode: str) -> str:
    """The last entry's outcome once the app ended: ``ended`` in both modes (a driver, the
    sync task, records it; a reader, the trigger, is shown it)."""
    return "ended"


def _placement(airflow: Any, dagrun: Any) -> dict[str, Any]:
    xcoms = airflow.xcoms(dagrun, "job")
    assert xcoms["app_handle"].startswith("placement://"), xcoms
    assert xcoms["return_value"]["app_handle"] == xcoms["app_handle"]
    assert xcoms["return_value"]["placement"] == xcoms["placement"]
    return dict(xcoms["placement"])


@pytest.mark.parametrize("mode", ["sync", "deferred"])
def test_a_full_first_target_is_skipped_and_the_app_runs_on_the_second(
    airflow: Any, fulllocal: Path, capfd: pytest.CaptureFixture[str], mode: str
) -> None:
    dagrun = airflow.run(
        airflow.test_dag("placement_dags.py", f"al_place_skips_a_full_target_{mode}")
    )
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"job": "success"}, out[-3000:]
    (ran,) = local_apps()  # submitted once, to the second target
    assert ran.state.name == "SUCCEEDED"
    placement = _placement(airflow, dagrun)
    assert (placement["attempt"], placement["attempts"]) == (0, 1)
    assert [(e["scheduler"], e["outcome"], e["handle"]) for e in placement["entries"]] == [
        ("fulllocal", "skipped", None),
        ("local_cwd", _last_outcome(mode), ran.app_handle),
    ]
    assert placement["entries"][0]["reason"] == "no: every slot is taken"
    # each target's request, then the history and the app's line in the task log
    assert "anylaunch request for target 1 of 2 (scheduler fulllocal)" in out
    assert "anylaunch request for target 2 of 2 (scheduler local_cwd)" in out
    assert "attempt 0 on fulllocal: skipped (no: every slot is taken)" in out
    assert "job/0 ran on the second target" in out


def test_when_no_target_can_run_it_the_task_fails_and_nothing_is_submitted(
    airflow: Any, fulllocal: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    dagrun = airflow.run(airflow.test_dag("placement_dags.py", "al_place_nowhere"))
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"job": "failed"}
    assert "no target can run app 'nowhere' now" in out and "every slot is taken" in out
    assert local_apps() == []


def _kill_the_first_attempt(root: Path, seen_running: bool) -> dict[str, Any]:
    """In a thread: once attempt 0 wrote its checkpoint (and, if ``seen_running``, its
    driver saw it run: the task then streams its lines), SIGKILLs its local supervisor (the
    platform lost the app). Returns what it saw (``killed``: the attempt's handle)."""
    seen: dict[str, Any] = {}

    def started() -> bool:
        records = [json.loads(p.read_text() or "{}") for p in root.glob("*/*/*/attempt-0.json")]
        return any(r.get("started") for r in records)

    def run() -> None:
        from anylaunch.runner import get_runner

        wait_for("attempt 0's checkpoint", lambda: any(root.glob("*/*/checkpoint/step")), 120)
        if seen_running:
            wait_for("the task to see attempt 0 run", started, 120)
        (first,) = wait_for("attempt 0 listed", local_apps, 60)
        with get_runner() as runner:
            scheduler, app_id = runner._scheduler_app_id(first.app_handle)
            described = scheduler.describe(app_id)
        assert described is not None
        os.kill(int(described.metadata["supervisor_pid"]), signal.SIGKILL)
        seen["killed"] = first.app_handle

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    seen["thread"] = thread
    return seen


@pytest.mark.parametrize("mode", ["sync", "deferred"])
def test_an_infrastructure_loss_is_relaunched_by_the_task(
    airflow: Any, fulllocal: Path, capfd: pytest.CaptureFixture[str], mode: str
) -> None:
    """Deferred: the trigger cannot move the app; it hands it back, the worker relaunches it
    and defers again on the same handle."""
    # sync: the task's own status calls record that attempt 0 started (the trigger only reads)
    seen = _kill_the_first_attempt(fulllocal, seen_running=mode == "sync")
    dagrun = airflow.run(airflow.test_dag("placement_dags.py", f"al_place_relaunch_{mode}"))
    seen["thread"].join(10)
    out = capfd.readouterr().out
    tis = airflow.tis(dagrun)
    assert (str(tis["job"].state), tis["job"].try_number) == ("success", 1), out[-3000:]
    first, second = local_apps()  # one app per attempt, no more
    assert first.app_handle == seen["killed"]
    assert (first.state.name, second.state.name) == ("FAILED", "SUCCEEDED")
    placement = _placement(airflow, dagrun)
    assert (placement["attempt"], placement["attempts"]) == (1, 2)
    entries = [(e["attempt"], e["outcome"], e["handle"]) for e in placement["entries"]]
    assert entries == [
        (0, "relaunched", first.app_handle),
        (1, _last_outcome(mode), second.app_handle),
    ]
    assert "supervisor died" in placement["entries"][0]["reason"]
    # the move is in the task log, and the new attempt's lines follow the first one's
    assert f"attempt 0 on local_cwd ({first.app_handle}): relaunched" in out
    assert "job/0 attempt 0 wrote its checkpoint" in out
    assert "job/0 attempt 1 resumes from attempt 0" in out
    handed_back = "handing it back to the task to move it" in out
    assert handed_back == (mode == "deferred")
    if mode == "deferred":
        assert "this task drives placed anylaunch app" in out
        assert f"attempt 1 on local_cwd ({second.app_handle}) is" in out  # the worker moved it
        assert out.count("deferring: the triggerer waits for anylaunch app placement://") == 2


HANGS = "import time; print('attempt 0 runs', flush=True); time.sleep(300)"


def test_the_trigger_hands_a_due_move_back_with_its_clock_and_moves_nothing(
    fulllocal: Path, state_dir: Path
) -> None:
    """The trigger is a reader: it cannot relaunch the lost app, so its one event is
    ``placement_move`` (why, the clock of its wait, the attempt's last lines); the app stays
    as it was until a driver (here the launching runner) makes the move."""
    import time

    from airflow_anylaunch.triggers import AnylaunchAppTrigger
    from anylaunch.runner import get_runner
    from anylaunch.runner.placement import Placement
    from anylaunch.specs import AppDef, AppState, Role
    from tests.integrations.airflow.test_trigger import first_event

    app = AppDef("lost", [Role("job", ".", entrypoint=sys.executable, args=["-c", HANGS])])
    with get_runner() as runner:
        handle = runner.run(app, placement=Placement(["local_cwd"], max_infra_retries=1))
        try:
            (first,) = wait_for(
                "attempt 0 running",
                lambda: [a for a in local_apps() if a.state == AppState.RUNNING],
            )
            wait_for(
                "its line",
                lambda: "attempt 0 runs" in "".join(runner.log_lines(first.app_handle, "job", 0)),
            )
            scheduler, app_id = runner._scheduler_app_id(first.app_handle)
            described = scheduler.describe(app_id)
            assert described is not None
            os.kill(int(described.metadata["supervisor_pid"]), signal.SIGKILL)
            deadline = time.time() + 600
            trigger = AnylaunchAppTrigger(
                handle, poll_interval=0.2, startup_deadline=deadline, run_timeout=60, attempt=0
            )
            event = first_event(trigger)

            assert event["status"] == "placement_move", event
            assert "supervisor died" in event["message"]
            assert event["app_status"]["placement"]["next_move"] == event["message"]
            assert event["log_tail"] == ["job/0 attempt 0 runs"]
            clock = event["clock"]
            assert clock["startup_deadline"] == deadline and clock["run_deadline"] is None
            assert [a.app_handle for a in local_apps()] == [first.app_handle]  # moved nothing
            moved = runner.status(handle)  # the driver makes the move
            assert moved is not None and moved.placement is not None
            assert moved.placement.attempt == 1 and len(local_apps()) == 2
        finally:
            runner.cancel(handle)


def test_a_retry_after_a_crash_reattaches_to_the_stable_handle_and_drives_it(
    airflow: Any, fulllocal: Path, capfd: pytest.CaptureFixture[str], afc: Any
) -> None:
    dagrun = airflow.run(airflow.test_dag("placement_dags.py", "al_place_retry_reattaches"))
    out = capfd.readouterr().out
    tis = airflow.tis(dagrun)
    assert (str(tis["job"].state), tis["job"].try_number) == ("success", 2), out[-3000:]
    assert "simulated worker crash while waiting for placement://" in out
    (ran,) = local_apps()  # the retry launched nothing
    assert ran.state.name == "SUCCEEDED"
    assert "Reconnecting to existing job" in out
    handle = airflow.xcoms(dagrun, "job")["app_handle"]
    assert f"this task drives placed anylaunch app {handle}" in out
    assert _placement(airflow, dagrun)["entries"][-1]["handle"] == ran.app_handle


def test_dry_run_prints_each_targets_request_offline(
    fulllocal: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    op = _op(
        targets=["fulllocal", {"scheduler": "local_cwd", "cfg": {"cancel_grace_s": "7"}}],
        env={"API_TOKEN": "s3cr3t-token"},
    )
    op.dry_run()
    out = capsys.readouterr().out
    assert "# target 1 of 2 (scheduler fulllocal)" in out
    assert "# target 2 of 2 (scheduler local_cwd)" in out
    assert "s3cr3t-token" not in out
    assert local_apps() == []


def _target(scheduler: str) -> Any:
    from anylaunch.runner.placement import Target

    return Target(scheduler)


def _trigger(**kwargs: Any) -> Any:
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    return AnylaunchAppTrigger("placement://s/a-1", **kwargs)


def _rendered(targets: Any) -> Callable[[], Any]:
    """A task whose ``targets`` is a template at parse time and ``targets`` once rendered:
    its request is built (offline), the way a run checks it."""

    def call() -> Any:
        op = _op(targets="{{ params.targets }}")
        op.targets = targets
        return op.dryrun_request()

    return call


BAD: list[Case] = [
    Case("targets-bare-str", lambda: _op(targets="local_cwd"), "targets"),
    Case("targets-empty", lambda: _op(targets=[]), "targets"),
    Case("targets-dict", lambda: _op(targets={"scheduler": "local_cwd"}), "targets"),
    Case("targets-int-item", lambda: _op(targets=[3]), "targets[0]"),
    Case("targets-unknown-name", lambda: _op(targets=["local_cwd", "slurn"]), "targets[1]"),
    Case(
        "targets-unknown-target",
        lambda: _op(targets=[_target("x")]),
        "targets[0].scheduler",
    ),
    Case(
        "targets-unknown-key",
        lambda: _op(targets=[{"scheduler": "local_cwd", "q": 1}]),
        "targets[0]",
    ),
    Case("targets-no-scheduler", lambda: _op(targets=[{"cfg": {}}]), "targets[0].scheduler"),
    Case(
        "targets-cfg-list",
        lambda: _op(targets=[{"scheduler": "local_cwd", "cfg": ["a=b"]}]),
        "targets[0].cfg",
    ),
    Case(
        "targets-timeout-negative",
        lambda: _op(targets=[{"scheduler": "local_cwd", "startup_timeout": -1}]),
        "targets[0].startup_timeout",
    ),
    Case(
        "targets-timeout-word",
        lambda: _op(targets=[{"scheduler": "local_cwd", "startup_timeout": "soon"}]),
        "targets[0].startup_timeout",
    ),
    Case(
        "targets-with-scheduler",
        lambda: _op(targets=["local_cwd"], scheduler="local_cwd"),
        "scheduler/targets",
    ),
    Case("targets-with-cfg", lambda: _op(targets=["local_cwd"], cfg={"a": 1}), "cfg/targets"),
    Case(
        "targets-without-waiting",
        lambda: _op(targets=["local_cwd"], wait_for_completion=False),
        "wait_for_completion",
    ),
    Case(
        "retries-negative",
        lambda: _op(targets=["local_cwd"], max_infra_retries=-1),
        "max_infra_retries",
    ),
    Case(
        "retries-bool",
        lambda: _op(targets=["local_cwd"], max_infra_retries=True),
        "max_infra_retries",
    ),
    Case(
        "retries-str",
        lambda: _op(targets=["local_cwd"], max_infra_retries="2"),
        "max_infra_retries",
    ),
    Case(
        "retries-without-targets",
        lambda: _op(scheduler="local_cwd", max_infra_retries=1),
        "max_infra_retries",
    ),
    Case("root-empty", lambda: _op(targets=["local_cwd"], checkpoint_root=" "), "checkpoint_root"),
    Case("root-without-targets", lambda: _op(checkpoint_root="/tmp/x"), "checkpoint_root"),
    Case("rendered-not-json", _rendered("local_cwd"), "targets"),
    Case(
        "rendered-timeout-word",
        _rendered('[{"scheduler": "local_cwd", "startup_timeout": "soon"}]'),
        "targets[0].startup_timeout",
    ),
    Case(
        "rendered-cfg-uncastable",
        _rendered([{"scheduler": "local_cwd", "cfg": {"cancel_grace_s": "a while"}}]),
        "targets[0].cfg['cancel_grace_s']",
    ),
    Case(
        "trigger-attempt-negative",
        lambda: _trigger(attempt=-1),
        "attempt",
    ),
]


@pytest.mark.parametrize(("call", "field"), [c.param() for c in BAD])
def test_bad_placement_input_is_refused_naming_the_field(
    call: Callable[[], Any], field: str, state_dir: Path
) -> None:
    assert_rejected(call, field)
    assert local_apps() == []


def test_templated_targets_wait_for_the_run(fulllocal: Path) -> None:
    op = _op(
        targets=[
            "{{ params.first }}",
            {
                "scheduler": "{{ params.second }}",
                "cfg": "{{ params.cfg }}",
                "startup_timeout": "{{ params.t }}",
            },
        ],
        max_infra_retries=2,
        checkpoint_root="{{ var.value.ckpt }}",
    )
    assert "targets" in op.template_fields and "checkpoint_root" in op.template_fields
    assert op.max_infra_retries == 2
