"""anylaunch.distributed: rank helpers from the env without torch; a fake torch for the rest."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import types
from typing import Any

import pytest

import anylaunch.distributed as d
from anylaunch.sdk import MissingDependencyError

RANK_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*RANK_VARS, "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)


def test_torch_is_not_installed_here() -> None:
    # the no-torch paths below are the real ones only if torch is absent
    assert importlib.util.find_spec("torch") is None


def test_importing_and_the_rank_helpers_do_not_import_torch() -> None:
    code = (
        "import sys, anylaunch.distributed as d; d.rank(); d.world_size(); d.local_rank(); "
        "print([m for m in sys.modules if m.split('.')[0] == 'torch'])"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"


def test_not_distributed() -> None:
    assert (d.rank(), d.world_size(), d.local_rank()) == (0, 1, 0)
    assert d.is_rank0() and d.is_local_rank0()
    seen = []
    with d.on_rank0_first():
        seen.append("rank0")
    with d.on_local_rank0_first():
        seen.append("local0")
    assert seen == ["rank0", "local0"]


def test_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "9")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "16")
    assert (d.rank(), d.world_size(), d.local_rank()) == (9, 16, 1)
    assert not d.is_rank0() and not d.is_local_rank0()


def test_an_empty_variable_is_unset_and_a_bad_one_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "")
    assert d.rank() == 0
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match=r"\$WORLD_SIZE='two' is not an integer"):
        d.world_size()


@pytest.mark.parametrize("fn", [d.local_device, d.local_cuda_device, d.init_pg])
def test_device_helpers_need_torch(fn: Any) -> None:
    with pytest.raises(MissingDependencyError, match=r"needs PyTorch.*pip install torch"):
        fn()
    assert issubclass(MissingDependencyError, ImportError)


# --- with a fake torch --------------------------------------------------------------------------


class FakeDist(types.ModuleType):
    def __init__(self, initialized: bool, backend: str = "gloo", elastic: bool = False) -> None:
        super().__init__("torch.distributed")
        self.initialized, self.backend, self.elastic = initialized, backend, elastic
        self.calls: list[tuple[str, Any]] = []

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self.initialized

    def get_rank(self) -> int:
        return 3

    def get_world_size(self) -> int:
        return 4

    def get_backend(self) -> str:
        return self.backend

    def barrier(self) -> None:
        self.calls.append(("barrier", None))

    def is_nccl_available(self) -> bool:
        return True

    def is_torchelastic_launched(self) -> bool:
        return self.elastic

    def init_process_group(self, **kwargs: Any) -> None:
        self.calls.append(("init", kwargs))
        self.initialized = True


def fake_torch(monkeypatch: pytest.MonkeyPatch, dist: FakeDist, gpus: int = 0) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.device = lambda spec: f"device({spec})"  # type: ignore[attr-defined]
    torch.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        is_available=lambda: True, device_count=lambda: gpus
    )
    torch.distributed = dist  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    return torch


def test_an_initialized_group_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_torch(monkeypatch, FakeDist(initialized=True))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert (d.rank(), d.world_size(), d.is_rank0()) == (3, 4, False)


def test_local_rank_warns_when_a_group_exists_without_local_rank(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_torch(monkeypatch, FakeDist(initialized=True))
    with pytest.warns(UserWarning, match="LOCAL_RANK is not set"):
        assert d.local_rank() == 0


def test_on_rank0_first_orders_with_barriers(monkeypatch: pytest.MonkeyPatch) -> None:
    dist = FakeDist(initialized=True)  # rank 3: waits first
    fake_torch(monkeypatch, dist)
    monkeypatch.setenv("LOCAL_RANK", "0")  # local rank 0: passes the barrier after
    with d.on_rank0_first():
        dist.calls.append(("body", None))
    with d.on_local_rank0_first():
        dist.calls.append(("body", None))
    assert [c for c, _ in dist.calls] == ["barrier", "body", "body", "barrier"]


@pytest.mark.parametrize(
    ("initialized", "backend", "gpus", "local", "expected"),
    [
        (True, "nccl", 0, "2", "device(cuda:2)"),
        (True, "gloo", 8, "2", "device(cpu)"),
        (False, "gloo", 8, "0", "device(cuda)"),
        (False, "gloo", 0, "0", "device(cpu)"),
    ],
)
def test_local_device(
    monkeypatch: pytest.MonkeyPatch,
    initialized: bool,
    backend: str,
    gpus: int,
    local: str,
    expected: str,
) -> None:
    fake_torch(monkeypatch, FakeDist(initialized, backend), gpus=gpus)
    monkeypatch.setenv("LOCAL_RANK", local)
    assert d.local_device() == expected


def test_init_pg_in_a_single_process(monkeypatch: pytest.MonkeyPatch) -> None:
    dist = FakeDist(initialized=False)
    fake_torch(monkeypatch, dist, gpus=0)
    assert d.init_pg() == "device(cpu)"
    assert dist.calls == [("init", {"backend": "gloo", "rank": 0, "world_size": 1})]
    assert (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]) == ("localhost", "0")


def test_init_pg_under_torchrun_picks_nccl_on_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    dist = FakeDist(initialized=False, elastic=True)
    fake_torch(monkeypatch, dist, gpus=2)
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert d.init_pg(timeout=5) == "device(cuda:1)"
    assert dist.calls == [("init", {"backend": "nccl", "timeout": 5})]
