"""local_cwd's capacity check on this real host: every replica runs here at once, so their
CPUs, memory and GPUs add up on the host's one room; a check starts nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from anylaunch.runner import get_runner
from anylaunch.schedulers.common.capacity import CanRun, Capacity
from anylaunch.schedulers.local import state as ls
from anylaunch.schedulers.local.capacity import host_cpus, mem_available_mb
from anylaunch.schedulers.local_scheduler import LocalScheduler
from anylaunch.specs import AppDef, Resource, Role
from anylaunch.specs.arrays import ArraySpec


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "state"
    monkeypatch.setenv(ls.STATE_DIR_ENV, str(root))
    return root


@pytest.fixture
def sched(state_dir: Path) -> LocalScheduler:
    return LocalScheduler("cap", state_dir=state_dir)


def app(cpu: int, mem_mb: int = 64, gpu: int = 0, replicas: int = 1, **kw: object) -> AppDef:
    role = Role(
        "w", "", entrypoint="true", num_replicas=replicas, resource=Resource(cpu, gpu, mem_mb)
    )
    return AppDef("cap", [role], **kw)  # type: ignore[arg-type]


def check(sched: LocalScheduler, a: AppDef) -> Capacity:
    return sched.check_capacity(a, sched.run_opts().resolve({}))


def test_an_app_that_fits_the_host_is_a_yes_and_starts_nothing(
    sched: LocalScheduler, state_dir: Path
) -> None:
    answer = check(sched, app(1, replicas=min(2, host_cpus())))
    assert answer.can_run == CanRun.YES, answer
    assert answer.calls == 1  # /proc/meminfo (no GPU asked: no nvidia-smi)
    assert not state_dir.exists() or not any(state_dir.iterdir())  # no app was made
    assert sched.list() == []


def test_one_replica_wanting_more_cpus_than_the_host_has_is_a_no_naming_it(
    sched: LocalScheduler,
) -> None:
    answer = check(sched, app(64))
    assert answer.can_run == CanRun.NO
    assert "replica w/0 needs 64 CPU" in answer.reason
    assert f"is {host_cpus()} CPU" in answer.reason


def test_replicas_add_up_on_the_one_host(sched: LocalScheduler) -> None:
    # each fits alone; together they want one CPU more than the host has
    answer = check(sched, app(1, replicas=host_cpus() + 1))
    assert answer.can_run == CanRun.NO
    assert f"after placing {host_cpus()} other replica(s) is 0 CPU" in answer.reason


def test_memory_is_what_the_host_has_available_now(sched: LocalScheduler) -> None:
    available = mem_available_mb()
    assert available is not None and available > 0
    answer = check(sched, app(1, mem_mb=available * 4))
    assert answer.can_run == CanRun.NO
    assert f"{available * 4} MB" in answer.reason


def test_gpus_are_the_ones_the_scheduler_would_hand_out(
    sched: LocalScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    none = check(sched, app(1, gpu=1))
    assert none.can_run == CanRun.NO and "0 GPU" in none.reason
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert check(sched, app(1, gpu=2)).can_run == CanRun.YES
    assert check(sched, app(1, gpu=1, replicas=3)).can_run == CanRun.NO


def test_an_array_is_checked_by_one_index(sched: LocalScheduler) -> None:
    assert check(sched, app(1, array=ArraySpec(50, parallelism=4))).can_run == CanRun.YES
    assert check(sched, app(64, array=ArraySpec(50))).can_run == CanRun.NO


def test_through_the_runner(state_dir: Path) -> None:
    with get_runner("cap", state_dir=str(state_dir)) as runner:
        yes = runner.check_capacity(app(1), "local_cwd", {})
        no = runner.check_capacity(app(64), "local_cwd")
        assert yes.can_run == CanRun.YES and no.can_run == CanRun.NO
        assert "replica w/0" in no.reason
        assert runner.list("local_cwd") == []
