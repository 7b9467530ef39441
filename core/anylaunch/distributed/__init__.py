"""Helpers for ``torch.distributed`` that also work in a single, non-distributed process
(TorchX's ``torchx.distributed``).

The rank and world size come from the default process group once one is initialized, and
from the environment ``torchrun`` and the schedulers set (``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``) before that. Importing this module does not import PyTorch, and neither do the
rank helpers: a process group exists only where ``torch.distributed`` was imported already.
The device helpers and :func:`init_pg` import PyTorch, and raise
:class:`~anylaunch.sdk.MissingDependencyError` (an ``ImportError``) without it.

>>> env = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"}
>>> with _patched_environ(env):
...     rank(), world_size(), local_rank(), is_rank0(), is_local_rank0()
(3, 8, 1, False, False)
>>> with _patched_environ({}):
...     rank(), world_size(), is_rank0()
(0, 1, True)
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import warnings
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any, Literal

__all__ = [
    "Backend",
    "init_pg",
    "is_local_rank0",
    "is_rank0",
    "local_cuda_device",
    "local_device",
    "local_rank",
    "on_local_rank0_first",
    "on_rank0_first",
    "rank",
    "world_size",
]

#: The backends :func:`init_pg` takes: ``auto`` is ``nccl`` where CUDA devices are, else ``gloo``.
Backend = Literal["nccl", "gloo", "auto"]


@contextlib.contextmanager
def _patched_environ(values: Mapping[str, str]) -> Iterator[None]:
    """Sets the rank variables to ``values`` (the others unset) inside the block."""
    names = ("RANK", "LOCAL_RANK", "WORLD_SIZE")
    saved = {n: os.environ.pop(n) for n in names if n in os.environ}
    os.environ.update(values)
    try:
        yield
    finally:
        for n in names:
            os.environ.pop(n, None)
        os.environ.update(saved)


def _torch(what: str) -> ModuleType:
    try:
        return importlib.import_module("torch")
    except ImportError:
        from anylaunch.sdk import MissingDependencyError

        raise MissingDependencyError(
            f"anylaunch.distributed.{what} needs PyTorch (the Python package 'torch'), which "
            "is not installed. Fix: pip install torch"
        ) from None


def _initialized_dist() -> Any | None:
    """``torch.distributed`` if it was imported and its default process group is initialized
    (never imports it)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"${name}={value!r} is not an integer") from None


def local_rank() -> int:
    """Returns this process's rank on its node (``$LOCAL_RANK``, else 0).

    Set by ``torchrun`` and by the ``dist.ddp``/``dist.spmd`` components; typically used to
    pick the CUDA device. Without ``LOCAL_RANK`` it returns 0, with a warning if a process
    group is initialized (the process was then not started by ``torchrun``).

    >>> with _patched_environ({"LOCAL_RANK": "2"}):
    ...     local_rank()
    2
    """
    if os.environ.get("LOCAL_RANK", "").strip():
        return _env_int("LOCAL_RANK", 0)
    if _initialized_dist() is not None:
        warnings.warn(
            "the default torch.distributed process group is initialized but LOCAL_RANK is "
            "not set: local_rank() returns 0. Start the script with torchrun (or the dist.ddp "
            "component), or set LOCAL_RANK.",
            stacklevel=2,
        )
    return 0


def rank() -> int:
    """Returns this process's global rank: the process group's, else ``$RANK``, else 0.

    Unlike ``torch.distributed.get_rank()`` it does not fail where no process group exists.

    >>> with _patched_environ({"RANK": "5"}):
    ...     rank()
    5
    """
    dist = _initialized_dist()
    return int(dist.get_rank()) if dist is not None else _env_int("RANK", 0)


def world_size() -> int:
    """Returns the number of processes of the job: the process group's, else
    ``$WORLD_SIZE``, else 1.

    >>> with _patched_environ({"WORLD_SIZE": "16"}):
    ...     world_size()
    16
    """
    dist = _initialized_dist()
    return int(dist.get_world_size()) if dist is not None else _env_int("WORLD_SIZE", 1)


def is_rank0() -> bool:
    """True for the job's rank 0 (and for a process that is not distributed).

    >>> with _patched_environ({}):
    ...     is_rank0()
    True
    """
    return rank() == 0


def is_local_rank0() -> bool:
    """True for the first process on each node: do a node-wide task once.

    >>> with _patched_environ({"LOCAL_RANK": "0", "RANK": "4"}):
    ...     is_local_rank0(), is_rank0()
    (True, False)
    """
    return local_rank() == 0


def local_cuda_device() -> Any:
    """Returns ``torch.device("cuda:{local_rank()}")``: this process's GPU.

    Prefer :func:`local_device`, which also works on CPU-only hosts.
    """
    return _torch("local_cuda_device").device(f"cuda:{local_rank()}")


def _has_cuda_devices(torch: ModuleType) -> bool:
    # a CUDA build of torch says is_available() on a host without GPUs too
    return bool(torch.cuda.is_available() and torch.cuda.device_count() > 0)


def local_device() -> Any:
    """Returns the ``torch.device`` this process should put its models and tensors on.

    With a process group: ``cuda:{local_rank()}`` for the ``nccl`` backend, else ``cpu``.
    Without one: ``cuda`` where CUDA devices are, else ``cpu``.
    """
    torch = _torch("local_device")
    dist = _initialized_dist()
    if dist is not None:
        return local_cuda_device() if dist.get_backend() == "nccl" else torch.device("cpu")
    return torch.device("cuda" if _has_cuda_devices(torch) else "cpu")


def init_pg(backend: Backend = "auto", **kwargs: Any) -> Any:
    """Initializes the default process group, in a job ``torchrun`` started or in a plain
    ``python`` process (then a group of one), so one script runs both ways.

    .. code-block:: python

        device = init_pg()  # cuda:{LOCAL_RANK} with nccl where GPUs are, else cpu with gloo

    Args:
        backend: ``nccl``, ``gloo``, or ``auto``: ``nccl`` where CUDA devices and NCCL are,
            else ``gloo``
        kwargs: passed on to ``torch.distributed.init_process_group``

    Returns:
        the ``torch.device`` this process should use: ``cuda:{local_rank()}`` for ``nccl``,
        else ``cpu``
    """
    torch = _torch("init_pg")
    dist = importlib.import_module("torch.distributed")
    if backend == "auto":
        nccl = _has_cuda_devices(torch) and dist.is_nccl_available()
        backend = "nccl" if nccl else "gloo"
    if dist.is_torchelastic_launched():
        dist.init_process_group(backend=backend, **kwargs)
    else:
        # a single process: a group of one, on any free port of this host
        os.environ["MASTER_ADDR"] = "localhost"
        os.environ["MASTER_PORT"] = "0"
        dist.init_process_group(backend=backend, rank=0, world_size=1, **kwargs)
    return local_cuda_device() if backend == "nccl" else torch.device("cpu")


@contextlib.contextmanager
def _first(is_first: bool) -> Iterator[None]:
    dist = _initialized_dist()
    if dist is not None and not is_first:
        dist.barrier()  # wait for the first ones to run the block
    try:
        yield
    finally:
        if dist is not None and is_first:
            dist.barrier()  # let the others run it


@contextlib.contextmanager
def on_rank0_first() -> Iterator[None]:
    """Runs the block on rank 0 first, then on the other ranks (e.g. rank 0 downloads a
    dataset that the others then read). Without a process group it just runs the block.

    >>> with on_rank0_first():
    ...     print("downloading")
    downloading
    """
    with _first(is_rank0()):
        yield


@contextlib.contextmanager
def on_local_rank0_first() -> Iterator[None]:
    """Runs the block on each node's local rank 0 first, then on the node's other ranks
    (e.g. one copy of a checkpoint per node). Without a process group it just runs the block.

    >>> with on_local_rank0_first():
    ...     print("copying")
    copying
    """
    with _first(is_local_rank0()):
        yield
