"""Generic, cloud-agnostic t-shirt sizes, meant as defaults for components and examples.

The cpu/gpu/memory ratios follow current hardware trends and map to no particular instance
type; they may change between releases (never assume ``gpu.small`` always has 8 cpus), and they
carry no device capabilities such as EFA network interfaces. For production workloads, or when
an app needs specific hardware (e.g. exactly 4 NVLinked A100s), register named resources that
describe the machines you actually have (see :mod:`anylaunch.specs.resources`).

========== === === =======
Name       CPU GPU Memory
========== === === =======
gpu.small    8   1  32 GiB
gpu.medium  16   2  64 GiB
gpu.large   32   4 128 GiB
gpu.xlarge  64   8 256 GiB
cpu.nano     1   0 512 MiB
cpu.micro    1   0   1 GiB
cpu.small    1   0   2 GiB
cpu.medium   2   0   4 GiB
cpu.large    2   0   8 GiB
cpu.xlarge   8   0  32 GiB
========== === === =======

>>> r = NAMED_RESOURCES["gpu.large"]()
>>> (r.cpu, r.gpu, r.memMB, r.get_resource_name())
(32, 4, 131072, 'gpu.large')
"""

from __future__ import annotations

from anylaunch.specs.api import Resource
from anylaunch.specs.resources import ResourceFactory, named_resource

GiB: int = 1024  # memMB is in MiB


def gpu_small() -> Resource:
    """8 cpu, 1 gpu, 32 GiB."""
    return Resource(cpu=8, gpu=1, memMB=32 * GiB)


def gpu_medium() -> Resource:
    """16 cpu, 2 gpu, 64 GiB."""
    return Resource(cpu=16, gpu=2, memMB=64 * GiB)


def gpu_large() -> Resource:
    """32 cpu, 4 gpu, 128 GiB."""
    return Resource(cpu=32, gpu=4, memMB=128 * GiB)


def gpu_xlarge() -> Resource:
    """64 cpu, 8 gpu, 256 GiB."""
    return Resource(cpu=64, gpu=8, memMB=256 * GiB)


def cpu_nano() -> Resource:
    """1 cpu, 512 MiB."""
    return Resource(cpu=1, gpu=0, memMB=512)


def cpu_micro() -> Resource:
    """1 cpu, 1 GiB."""
    return Resource(cpu=1, gpu=0, memMB=1 * GiB)


def cpu_small() -> Resource:
    """1 cpu, 2 GiB."""
    return Resource(cpu=1, gpu=0, memMB=2 * GiB)


def cpu_medium() -> Resource:
    """2 cpu, 4 GiB."""
    return Resource(cpu=2, gpu=0, memMB=4 * GiB)


def cpu_large() -> Resource:
    """2 cpu, 8 GiB."""
    return Resource(cpu=2, gpu=0, memMB=8 * GiB)


def cpu_xlarge() -> Resource:
    """8 cpu, 32 GiB."""
    return Resource(cpu=8, gpu=0, memMB=32 * GiB)


#: Name to factory; each factory makes a fresh Resource tagged with its name.
NAMED_RESOURCES: dict[str, ResourceFactory] = {
    **named_resource("gpu.small", gpu_small),
    **named_resource("gpu.medium", gpu_medium),
    **named_resource("gpu.large", gpu_large),
    **named_resource("gpu.xlarge", gpu_xlarge),
    **named_resource("cpu.nano", cpu_nano),
    **named_resource("cpu.micro", cpu_micro),
    **named_resource("cpu.small", cpu_small),
    **named_resource("cpu.medium", cpu_medium),
    **named_resource("cpu.large", cpu_large),
    **named_resource("cpu.xlarge", cpu_xlarge),
}
