"""Placement on real local_cwd apps: one stable handle across attempts, a relaunch after the
platform lost the app (its supervisor SIGKILLed), no relaunch of an application failure, a
target whose capacity says no skipped, one attempt per number however many drivers race, a
cancel that ends the placement, and bad input refused before anything is submitted.

The real-backend failovers (Kubernetes -> Slurm, a Slurm node set DOWN) are in
``test_placement_backends.py``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from anylaunch.runner import Runner
from anylaunch.runner.placed import NoTargetCanRunError
from anylaunch.runner.placement import Placement, Target
from anylaunch.runner.placement_store import PlacementStore
from anylaunch.schedulers import get_scheduler_factories
from anylaunch.schedulers.local.scheduler import LocalScheduler
from anylaunch.specs import AppDef, AppState, AppStatus, InvalidSpecError, Resource, Role
from anylaunch.specs.handles import parse_app_handle
from tests.integrations.placement_plugin import RESUMABLE, FullLocal
from tests.schedulers.aws.moto_env import (  # fixtures
    moto_aws as moto_aws,
)
from tests.schedulers.aws.moto_env import (
    moto_server as moto_server,
)
from tests.schedulers.aws.moto_env import (
    s3_prefix as s3_prefix,
)
from tests.schedulers.local_helpers import wait_until

DEADLINE_S = 120.0


def _full_local(session_name: str, **kwargs: Any) -> LocalScheduler:
    return FullLocal.from_kwargs(session_name, kwargs)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ANYLAUNCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ANYLAUNCH_CHECKPOINT_ROOT", str(tmp_path / "ckpt"))
    return tmp_path / "ckpt"


def _runner() -> Runner:
    return Runner("placed", {**get_scheduler_factories(), "full_local": _full_local})


@pytest.fixture
def runner(root: Path) -> Iterator[Runner]:
    with _runner() as runner:
        yield runner


def _app(name: str, code: str, cpu: int = 1) -> AppDef:
    role = Role("w", ".", entrypoint=sys.executable, args=["-c", code])
    role.resource = Resource(cpu=cpu, gpu=0, memMB=64)
    return AppDef(name, [role])


def _wait_for(what: str, check: Callable[[], Any]) -> Any:
    return wait_until(check, what, DEADLINE_S)


def _current(runner: Runner, handle: str) -> str:
    status = runner.status(handle)
    assert status is not None and status.placement is not None
    current = status.placement.current.handle
    assert current is not None
    return current


def _kill_supervisor(runner: Runner, concrete: str) -> None:
    """What losing the machine does to a local app: its supervisor dies with its replicas."""
    sched, app_id = runner._scheduler_app_id(concrete)
    desc = sched.describe(app_id)
    assert desc is not None
    os.kill(int(desc.metadata["supervisor_pid"]), signal.SIGKILL)


def test_an_infrastructure_loss_is_relaunched_and_resumes_from_the_same_checkpoint_url(
    runner: Runner, root: Path
) -> None:
    handle = runner.run(
        _app("resumable", RESUMABLE), placement=Placement(["local_cwd"], max_infra_retries=1)
    )
    assert parse_app_handle(handle).scheduler_backend == "placement"
    first = _current(runner, handle)
    _wait_for(
        "attempt 0's checkpoint",
        lambda: any(Path(root).glob("placed/resumable-*/checkpoint/step")),
    )
    _kill_supervisor(runner, first)

    status = runner.wait(handle, wait_interval=0.5, timeout=DEADLINE_S)

    assert status is not None and status.state == AppState.SUCCEEDED, status
    assert status.placement is not None
    entries = status.placement.entries
    assert [(e.attempt, e.outcome) for e in entries] == [(0, "relaunched"), (1, "ended")]
    assert "infrastructure" in entries[0].reason and "supervisor died" in entries[0].reason
    assert entries[0].handle == first and entries[1].handle != first
    lines = list(runner.log_lines(handle, "w", 0))  # the handle follows the current attempt
    assert lines == ["attempt 1 resumes from attempt 0\n"], lines
    assert status.placement.checkpoint_url == str(
        root / "placed" / parse_app_handle(handle).app_id / "checkpoint"
    )


def test_an_application_failure_is_never_relaunched(runner: Runner) -> None:
    code = "import os, sys; print('attempt', os.environ['ANYLAUNCH_ATTEMPT']); sys.exit(3)"
    handle = runner.run(
        _app("exits3", code), placement=Placement(["local_cwd", "local_cwd"], max_infra_retries=3)
    )

    status = runner.wait(handle, wait_interval=0.5, timeout=DEADLINE_S)

    assert status is not None and status.state == AppState.FAILED
    assert status.placement is not None
    assert [(e.attempt, e.outcome, e.scheduler) for e in status.placement.entries] == [
        (0, "ended", "local_cwd")
    ]
    assert list(runner.log_lines(handle, "w", 0)) == ["attempt 0\n"]


def test_a_target_whose_capacity_says_no_is_skipped_and_the_next_one_runs_it(
    runner: Runner,
) -> None:
    handle = runner.run(
        _app("skips", "print('ran here')"), placement=Placement(["full_local", "local_cwd"])
    )

    status = runner.wait(handle, wait_interval=0.5, timeout=DEADLINE_S)

    assert status is not None and status.state == AppState.SUCCEEDED
    assert status.placement is not None
    assert [(e.scheduler, e.outcome, e.handle is None) for e in status.placement.entries] == [
        ("full_local", "skipped", True),
        ("local_cwd", "ended", False),
    ]
    assert status.placement.entries[0].reason == "no: every slot is taken"
    assert status.placement.describe().splitlines()[0] == (
        "attempt 0 on full_local: skipped (no: every slot is taken)"
    )


def test_when_every_target_says_no_nothing_is_submitted(runner: Runner) -> None:
    with pytest.raises(NoTargetCanRunError, match="every slot is taken"):
        runner.run(_app("nowhere", "pass"), placement=Placement(["full_local"]))
    assert runner.list("local_cwd") == [] and runner.list("full_local") == []


def test_a_reader_without_the_app_waits_for_the_driver_and_drivers_never_double_submit(
    runner: Runner, root: Path
) -> None:
    """Another process reading the handle sees the loss as PENDING (its driver moves it);
    three drivers (the launcher and two that attached) racing on the loss start attempt 1
    once."""
    app = _app("raced", RESUMABLE)
    placement = Placement(["local_cwd"], max_infra_retries=1)
    handle = runner.run(app, placement=placement)
    first = _current(runner, handle)
    app_id = parse_app_handle(handle).app_id
    # attempt 0 has checkpointed (else attempt 1 would start over and run for 10 minutes)
    _wait_for("attempt 0's checkpoint", lambda: any(root.glob(f"placed/{app_id}/checkpoint/step")))
    with _runner() as reader, _runner() as second, _runner() as third:
        second.attach(handle, app, placement)
        third.attach(handle, app, placement)
        _kill_supervisor(runner, first)
        _wait_for(
            "the loss",
            lambda: (
                runner._scheduler_app_id(first)[0].describe(parse_app_handle(first).app_id).state
                == AppState.FAILED
            ),
        )

        seen = reader.status(handle)
        assert seen is not None and seen.state == AppState.PENDING, seen
        assert "waiting for its driver to start attempt 1" in seen.msg
        assert seen.placement is not None and "supervisor died" in seen.placement.next_move

        statuses: list[AppStatus | None] = []
        drivers = [
            threading.Thread(target=lambda r=r: statuses.append(r.status(handle)))
            for r in (runner, second, third)
        ]
        for thread in drivers:
            thread.start()
        for thread in drivers:
            thread.join(DEADLINE_S)

        assert len(statuses) == 3 and all(s is not None for s in statuses), statuses
        final = runner.wait(handle, wait_interval=0.5, timeout=DEADLINE_S)
    assert final is not None and final.state == AppState.SUCCEEDED
    assert final.placement is not None and final.placement.attempt == 1
    # one app per attempt on the backend: the race made no third copy
    assert len(runner.list("local_cwd")) == 2


def test_a_cancelled_placement_starts_no_further_attempt(runner: Runner) -> None:
    handle = runner.run(
        _app("stopped", "import time; time.sleep(600)"),
        placement=Placement(["local_cwd"], max_infra_retries=5),
    )
    first = _current(runner, handle)
    _wait_for("it to run", lambda: runner.status(handle).state == AppState.RUNNING)

    runner.cancel(handle)
    status = runner.wait(handle, wait_interval=0.5, timeout=DEADLINE_S)

    assert status is not None and status.state == AppState.CANCELLED
    assert runner.cancel_requested(handle)
    assert status.placement is not None and status.placement.attempt == 0
    assert _current(runner, handle) == first


def test_the_record_holds_no_run_option_value(runner: Runner, root: Path) -> None:
    placement = Placement([Target("local_cwd", {"log_dir": "/tmp/s3cr3t-dir"})])
    handle = runner.run(_app("quiet", "pass"), placement=placement)
    runner.wait(handle, wait_interval=0.5, timeout=DEADLINE_S)
    written = "".join(p.read_text() for p in root.rglob("*.json"))
    assert "s3cr3t" not in written and '"log_dir"' in written
    record = PlacementStore(str(root)).read("placed", parse_app_handle(handle).app_id)
    assert record is not None and json.dumps(record.spec)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Placement([]), "Placement.targets"),
        (lambda: Placement("slurm"), "Placement.targets"),  # type: ignore[arg-type]
        (lambda: Placement([3]), "Placement.targets[0]"),  # type: ignore[list-item]
        (lambda: Placement(["slurm"], max_infra_retries=-1), "Placement.max_infra_retries"),
        (lambda: Placement(["slurm"], max_infra_retries=True), "Placement.max_infra_retries"),
        (lambda: Placement(["slurm"], checkpoint_root=""), "Placement.checkpoint_root"),
        (lambda: Target("slurm; rm -rf /"), "Target.scheduler"),
        (lambda: Target("slurm", cfg=[("a", 1)]), "Target.cfg"),  # type: ignore[arg-type]
        (lambda: Target("slurm", startup_timeout=float("nan")), "Target.startup_timeout"),
    ],
)
def test_bad_placements_are_refused_naming_the_field(make: Callable[[], Any], field: str) -> None:
    with pytest.raises(InvalidSpecError) as error:
        make()
    assert error.value.field == field


def test_bad_input_to_a_placed_run_submits_nothing(runner: Runner) -> None:
    app = _app("refused", "pass")
    with pytest.raises(InvalidSpecError, match="scheduler"):
        runner.run(app, "local_cwd", placement=Placement(["local_cwd"]))
    with pytest.raises(InvalidSpecError, match="must be a Placement"):
        runner.run(app, placement=["local_cwd"])  # type: ignore[arg-type]
    bad_cfg = Placement(["local_cwd", Target("local_cwd", {"no_such_option": 1})])
    with pytest.raises(Exception, match="no_such_option"):
        runner.run(app, placement=bad_cfg)
    assert runner.list("local_cwd") == []
    with pytest.raises(InvalidSpecError, match="no placement record"):
        runner.attach("placement://placed/never-1a2b3c4d", app, Placement(["local_cwd"]))


def test_an_attempt_claimed_by_a_driver_that_died_before_submitting_is_placed_anew(
    runner: Runner, root: Path
) -> None:
    """A driver that claimed attempt 1 and died before submitting it leaves a record with no
    handle; after ``ABANDONED_CLAIM_S`` a live driver places the app as attempt 2."""
    from anylaunch.runner.placed import ABANDONED_CLAIM_S
    from anylaunch.runner.placement_store import AttemptRecord

    app = _app("orphaned", RESUMABLE)
    handle = runner.run(app, placement=Placement(["local_cwd"], max_infra_retries=2))
    _, session, app_id = parse_app_handle(handle)
    store = PlacementStore(str(root))
    first = _current(runner, handle)
    # attempt 0 has checkpointed (else attempt 2 would start over and run for 10 minutes)
    _wait_for("attempt 0's checkpoint", lambda: any(root.glob(f"placed/{app_id}/checkpoint/step")))
    _kill_supervisor(runner, first)
    _wait_for("the loss", lambda: runner.status(first).state == AppState.FAILED)
    # what the dead driver left: attempt 0 marked relaunched, attempt 1 claimed long ago
    record = store.read(session, app_id)
    assert record is not None
    record.attempts[0].outcome, record.attempts[0].reason = "relaunched", "infrastructure: lost"
    store.update(session, app_id, record.attempts[0])
    stale = AttemptRecord(1, 0, "local_cwd", relaunches=1)
    stale.claimed_at = time.time() - ABANDONED_CLAIM_S - 1
    assert store.claim(session, app_id, stale)

    status = runner.wait(handle, wait_interval=0.5, timeout=DEADLINE_S)

    assert status is not None and status.state == AppState.SUCCEEDED, status
    assert status.placement is not None
    assert [(e.attempt, e.outcome) for e in status.placement.entries] == [
        (0, "relaunched"),
        (1, "moved"),
        (2, "ended"),
    ]
    assert "driver died" in status.placement.entries[1].reason


def test_a_reader_sees_an_ended_placement_as_ended(runner: Runner) -> None:
    """A process that does not drive the app sees its end as ``ended`` (the driver never
    looked, so the record still says ``current``)."""
    done = runner.run(_app("quick", "print('hi')"), placement=Placement(["local_cwd"]))
    concrete = _current(runner, done)
    _wait_for("it to end", lambda: runner.status(concrete).state == AppState.SUCCEEDED)
    with _runner() as reader:
        seen = reader.status(done)
    assert seen is not None and seen.state == AppState.SUCCEEDED and seen.placement is not None
    assert seen.placement.entries[-1].outcome == "ended"


def test_the_record_on_a_shared_store_is_followed_by_another_process(
    s3_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An S3 checkpoint root (moto): the record and ANYLAUNCH_CHECKPOINT_URL live there, and a
    process on another worker, which only knows the root from its env (no local pointer),
    follows the placed app to its end and reads its logs."""
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ANYLAUNCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ANYLAUNCH_CHECKPOINT_ROOT", s3_prefix)
    code = "import os; print('checkpoint at', os.environ['ANYLAUNCH_CHECKPOINT_URL'])"
    with _runner() as launcher:
        handle = launcher.run(
            _app("shared", code), placement=Placement(["full_local", "local_cwd"])
        )
    monkeypatch.setenv("ANYLAUNCH_HOME", str(tmp_path / "another-worker"))
    with _runner() as other:
        status = other.wait(handle, wait_interval=0.5, timeout=DEADLINE_S)
        lines = list(other.log_lines(handle, "w", 0))
    assert status is not None and status.state == AppState.SUCCEEDED
    assert status.placement is not None
    assert [e.outcome for e in status.placement.entries] == ["skipped", "ended"]
    url = f"{s3_prefix}/placed/{parse_app_handle(handle).app_id}/checkpoint"
    assert status.placement.checkpoint_url == url
    assert lines == [f"checkpoint at {url}\n"]
