"""The AWS EC2 instance types behind :mod:`anylaunch.specs.named_resources_aws`, as plain data.

One :class:`InstanceType` per type: the published vCPUs, GPUs, nominal memory (GiB), EFA
interfaces and Neuron devices from https://aws.amazon.com/ec2/instance-types/. Types marked
``torchx=True`` are TorchX's catalogue (same names, same figures); the others are types
anylaunch also registers. Turning a row into a :class:`~anylaunch.specs.Resource` (the memory
tax, the instance-type capability, the devices) is the job of
:mod:`anylaunch.specs.named_resources_aws`; this module imports nothing.

>>> row = INSTANCE_TYPES["p4d.24xlarge"]
>>> (row.cpu, row.gpu, row.mem_gib, row.efa, row.family)
(96, 8, 1152, 4, 'p4d')
>>> INSTANCE_TYPES["c5.18xlarge"].request_gib  # TorchX asks for less than nominal memory here
142
"""

from __future__ import annotations

from typing import NamedTuple


class InstanceType(NamedTuple):
    """One EC2 instance type as AWS publishes it.

    >>> InstanceType("g5.xlarge", cpu=4, gpu=1, mem_gib=16).request_gib
    16
    """

    name: str
    """The EC2 instance type, e.g. ``p4d.24xlarge``."""
    cpu: int
    """vCPUs."""
    gpu: int
    """GPUs (Trainium and Inferentia accelerators are Neuron devices, not GPUs)."""
    mem_gib: float
    """Nominal memory in GiB."""
    efa: int = 0
    """Elastic Fabric Adapter interfaces a job may use (0: no EFA)."""
    neuron: int = 0
    """AWS Neuron devices (Trainium, Inferentia)."""
    usable_gib: float | None = None
    """GiB to request when the memory tax alone still asks for more than the host can give."""
    torchx: bool = True
    """Whether TorchX registers this type too (False: an anylaunch addition)."""

    @property
    def family(self) -> str:
        """The part before the dot, e.g. ``p6-b200`` for ``p6-b200.48xlarge``."""
        return self.name.split(".", 1)[0]

    @property
    def request_gib(self) -> float:
        """GiB a job asks for before the memory tax: ``usable_gib`` if set, else ``mem_gib``."""
        return self.mem_gib if self.usable_gib is None else self.usable_gib


#: What each family's accelerators (or purpose) are, for docstrings and listings.
FAMILIES: dict[str, str] = {
    "t3": "burstable general purpose",
    "m5": "general purpose",
    "m5d": "general purpose, local NVMe SSD",
    "c5": "compute optimized",
    "g4dn": "NVIDIA T4",
    "g5": "NVIDIA A10G",
    "g6e": "NVIDIA L40S",
    "p3": "NVIDIA V100",
    "p3dn": "NVIDIA V100 32 GB",
    "p4d": "NVIDIA A100 40 GB",
    "p4de": "NVIDIA A100 80 GB",
    "p5": "NVIDIA H100",
    "p5e": "NVIDIA H200",
    "p5en": "NVIDIA H200",
    "p6-b200": "NVIDIA B200",
    "p6-b300": "NVIDIA B300",
    "p6e-gb200": "NVIDIA GB200 (UltraServer only)",
    "trn1": "AWS Trainium",
    "trn1n": "AWS Trainium",
    "inf2": "AWS Inferentia2",
}


def _t(
    name: str,
    cpu: int,
    gpu: int,
    mem_gib: float,
    efa: int = 0,
    neuron: int = 0,
    usable_gib: float | None = None,
) -> InstanceType:
    return InstanceType(name, cpu, gpu, mem_gib, efa, neuron, usable_gib, torchx=True)


def _ours(
    name: str, cpu: int, gpu: int, mem_gib: float, efa: int = 0, neuron: int = 0
) -> InstanceType:
    return InstanceType(name, cpu, gpu, mem_gib, efa, neuron, None, torchx=False)


_ROWS: tuple[InstanceType, ...] = (
    # t3: burstable general purpose
    _ours("t3.nano", 2, 0, 0.5),
    _ours("t3.micro", 2, 0, 1),
    _ours("t3.small", 2, 0, 2),
    _t("t3.medium", 2, 0, 4),
    _ours("t3.large", 2, 0, 8),
    _ours("t3.xlarge", 4, 0, 16),
    _ours("t3.2xlarge", 8, 0, 32),
    # m5 and m5d (m5d: same vCPUs and memory plus local NVMe SSDs)
    *(
        _t(f"{family}.{size}", cpu, 0, gib)
        for family in ("m5", "m5d")
        for size, cpu, gib in (
            ("large", 2, 8),
            ("xlarge", 4, 16),
            ("2xlarge", 8, 32),
            ("4xlarge", 16, 64),
            ("8xlarge", 32, 128),
            ("12xlarge", 48, 192),
            ("16xlarge", 64, 256),
            ("24xlarge", 96, 384),
            ("metal", 96, 384),  # 96 logical processors on 48 physical cores
        )
    ),
    # c5: compute optimized
    _ours("c5.large", 2, 0, 4),
    _ours("c5.xlarge", 4, 0, 8),
    _ours("c5.2xlarge", 8, 0, 16),
    _ours("c5.4xlarge", 16, 0, 32),
    _ours("c5.9xlarge", 36, 0, 72),
    _ours("c5.12xlarge", 48, 0, 96),
    # 144 GiB nominal, but a job asking for 96% of it never gets placed: ask for 142 GiB
    _t("c5.18xlarge", 72, 0, 144, usable_gib=142),
    _ours("c5.24xlarge", 96, 0, 192),
    # g4dn: NVIDIA T4
    _t("g4dn.xlarge", 4, 1, 16),
    _t("g4dn.2xlarge", 8, 1, 32),
    _t("g4dn.4xlarge", 16, 1, 64),
    _t("g4dn.8xlarge", 32, 1, 128, efa=1),
    _t("g4dn.12xlarge", 48, 4, 192, efa=1),
    _t("g4dn.16xlarge", 64, 1, 256, efa=1),
    _t("g4dn.metal", 96, 8, 384, efa=1),
    # g5: NVIDIA A10G
    _t("g5.xlarge", 4, 1, 16),
    _t("g5.2xlarge", 8, 1, 32),
    _t("g5.4xlarge", 16, 1, 64),
    _t("g5.8xlarge", 32, 1, 128, efa=1),
    _t("g5.12xlarge", 48, 4, 192, efa=1),
    _t("g5.16xlarge", 64, 1, 256, efa=1),
    _t("g5.24xlarge", 96, 4, 384, efa=1),
    _t("g5.48xlarge", 192, 8, 768, efa=1),
    # g6e: NVIDIA L40S (EFA on the two largest sizes only)
    _t("g6e.xlarge", 4, 1, 32),
    _t("g6e.2xlarge", 8, 1, 64),
    _t("g6e.4xlarge", 16, 1, 128),
    _t("g6e.8xlarge", 32, 1, 256),
    _t("g6e.12xlarge", 48, 4, 384),
    _t("g6e.16xlarge", 64, 1, 512),
    _t("g6e.24xlarge", 96, 4, 768, efa=2),
    _t("g6e.48xlarge", 192, 8, 1536, efa=4),
    # p3 / p3dn: NVIDIA V100
    _t("p3.2xlarge", 8, 1, 61),
    _t("p3.8xlarge", 32, 4, 244),
    _t("p3.16xlarge", 64, 8, 488),
    _t("p3dn.24xlarge", 96, 8, 768, efa=1),
    # p4d / p4de: NVIDIA A100 (p4de: same host, twice the GPU memory)
    _t("p4d.24xlarge", 96, 8, 1152, efa=4),
    _t("p4de.24xlarge", 96, 8, 1152, efa=4),
    # p5: NVIDIA H100; p5e / p5en: NVIDIA H200
    _t("p5.48xlarge", 192, 8, 2048, efa=32),
    _t("p5e.48xlarge", 192, 8, 2048, efa=32),
    _t("p5en.48xlarge", 192, 8, 2048, efa=16),
    # p6: NVIDIA Blackwell (B200: 8 EFAv4 cards; B300 and GB200: 16 EFA-capable cards)
    _t("p6-b200.48xlarge", 192, 8, 2048, efa=8),
    _t("p6-b300.48xlarge", 192, 8, 4096, efa=16),
    _t("p6e-gb200.36xlarge", 144, 4, 960, efa=16),
    # trn1 / trn1n: AWS Trainium
    _t("trn1.2xlarge", 8, 0, 32, neuron=1),
    _t("trn1.32xlarge", 128, 0, 512, efa=8, neuron=16),
    _ours("trn1n.32xlarge", 128, 0, 512, efa=16, neuron=16),
    # inf2: AWS Inferentia2
    _t("inf2.xlarge", 4, 0, 16, neuron=1),
    _t("inf2.8xlarge", 32, 0, 128, neuron=1),
    _t("inf2.24xlarge", 96, 0, 384, neuron=6),
    _t("inf2.48xlarge", 192, 0, 768, neuron=12),
)

#: Every instance type by name, in catalogue order.
INSTANCE_TYPES: dict[str, InstanceType] = {row.name: row for row in _ROWS}
