"""AWS EC2 instance types as named resources ``aws_<instance type>``.

Figures are taken from https://aws.amazon.com/ec2/instance-types/ (vCPUs, GPUs, memory, EFA
interfaces). These definitions may change between releases; manage your own named resources for
the instances you actually run on (see :mod:`anylaunch.specs.resources`).

- ``memMB`` is the nominal memory times :data:`MEM_TAX` (0.96): ECS/EC2 keep part of a host's
  memory for the OS and agent, and AWS Batch enforces hard memory limits, so a job asking for
  the full nominal memory would never leave the job queue.
- ``capabilities`` holds ``{K8S_ITYPE: "<type>"}`` so that schedulers can pin replicas to the
  instance type (a Kubernetes node selector, an AWS Batch compute environment).
- EFA-capable sizes carry ``devices={EFA_DEVICE: <interfaces>}``; Trainium sizes also carry
  their Neuron device count under :data:`NEURON_DEVICE`.
- Types with 2 or more GPUs are also registered as fractional slices ``aws_<type>_<n>``, where
  ``n`` is the slice's GPU count (e.g. ``aws_p4d.24xlarge_4`` is half a p4d.24xlarge); see
  :func:`anylaunch.specs.resources.named_resource`.

>>> from anylaunch.specs import named_resources
>>> print(named_resources["aws_t3.medium"])
Resource(cpu=2, gpu=0, memMB=3932, capabilities={'node.kubernetes.io/instance-type': 't3.medium'},
         devices={}, tags={'anylaunch/resource_name': 'aws_t3.medium'})
>>> r = named_resources["aws_m5.2xlarge"]
>>> (r.cpu, r.gpu, r.memMB)
(8, 0, 31457)
>>> r = named_resources["aws_p3.2xlarge"]
>>> (r.cpu, r.gpu, r.memMB)
(8, 1, 59965)
>>> r = named_resources["aws_p3.8xlarge"]
>>> (r.cpu, r.gpu, r.memMB)
(32, 4, 239861)
>>> named_resources["aws_p4d.24xlarge"].devices
{'vpc.amazonaws.com/efa': 4}
"""

from __future__ import annotations

from anylaunch.specs.api import Resource
from anylaunch.specs.resources import ResourceFactory, named_resource

#: Device name of AWS Elastic Fabric Adapter interfaces (the EKS EFA device plugin's resource).
EFA_DEVICE = "vpc.amazonaws.com/efa"
#: Device name of AWS Neuron (Trainium/Inferentia) devices (the EKS Neuron device plugin's).
NEURON_DEVICE = "aws.amazon.com/neurondevice"
#: Capability key holding the instance type (the well-known Kubernetes node label).
K8S_ITYPE = "node.kubernetes.io/instance-type"
#: Share of nominal memory a job may ask for: ECS/EC2 reserve the rest for the OS and agent
#: (https://docs.aws.amazon.com/batch/latest/userguide/memory-management.html); 96% is the
#: empirically safe figure TorchX uses.
MEM_TAX = 0.96

# (instance type, vCPUs, GPUs, memory GiB, EFA interfaces, Neuron devices)
_INSTANCE_TYPES: tuple[tuple[str, int, int, float, int, int], ...] = (
    # t3: burstable general purpose
    ("t3.nano", 2, 0, 0.5, 0, 0),
    ("t3.micro", 2, 0, 1, 0, 0),
    ("t3.small", 2, 0, 2, 0, 0),
    ("t3.medium", 2, 0, 4, 0, 0),
    ("t3.large", 2, 0, 8, 0, 0),
    ("t3.xlarge", 4, 0, 16, 0, 0),
    ("t3.2xlarge", 8, 0, 32, 0, 0),
    # m5: general purpose
    ("m5.large", 2, 0, 8, 0, 0),
    ("m5.xlarge", 4, 0, 16, 0, 0),
    ("m5.2xlarge", 8, 0, 32, 0, 0),
    ("m5.4xlarge", 16, 0, 64, 0, 0),
    ("m5.8xlarge", 32, 0, 128, 0, 0),
    ("m5.12xlarge", 48, 0, 192, 0, 0),
    ("m5.16xlarge", 64, 0, 256, 0, 0),
    ("m5.24xlarge", 96, 0, 384, 0, 0),
    # c5: compute optimized
    ("c5.large", 2, 0, 4, 0, 0),
    ("c5.xlarge", 4, 0, 8, 0, 0),
    ("c5.2xlarge", 8, 0, 16, 0, 0),
    ("c5.4xlarge", 16, 0, 32, 0, 0),
    ("c5.9xlarge", 36, 0, 72, 0, 0),
    ("c5.12xlarge", 48, 0, 96, 0, 0),
    ("c5.18xlarge", 72, 0, 144, 0, 0),
    ("c5.24xlarge", 96, 0, 192, 0, 0),
    # g4dn: NVIDIA T4
    ("g4dn.xlarge", 4, 1, 16, 0, 0),
    ("g4dn.2xlarge", 8, 1, 32, 0, 0),
    ("g4dn.4xlarge", 16, 1, 64, 0, 0),
    ("g4dn.8xlarge", 32, 1, 128, 1, 0),
    ("g4dn.12xlarge", 48, 4, 192, 1, 0),
    ("g4dn.16xlarge", 64, 1, 256, 1, 0),
    ("g4dn.metal", 96, 8, 384, 1, 0),
    # g5: NVIDIA A10G
    ("g5.xlarge", 4, 1, 16, 0, 0),
    ("g5.2xlarge", 8, 1, 32, 0, 0),
    ("g5.4xlarge", 16, 1, 64, 0, 0),
    ("g5.8xlarge", 32, 1, 128, 1, 0),
    ("g5.12xlarge", 48, 4, 192, 1, 0),
    ("g5.16xlarge", 64, 1, 256, 1, 0),
    ("g5.24xlarge", 96, 4, 384, 1, 0),
    ("g5.48xlarge", 192, 8, 768, 1, 0),
    # p3: NVIDIA V100
    ("p3.2xlarge", 8, 1, 61, 0, 0),
    ("p3.8xlarge", 32, 4, 244, 0, 0),
    ("p3.16xlarge", 64, 8, 488, 0, 0),
    ("p3dn.24xlarge", 96, 8, 768, 1, 0),
    # p4d/p4de: NVIDIA A100 (40 GB / 80 GB)
    ("p4d.24xlarge", 96, 8, 1152, 4, 0),
    ("p4de.24xlarge", 96, 8, 1152, 4, 0),
    # p5/p5en: NVIDIA H100 / H200
    ("p5.48xlarge", 192, 8, 2048, 32, 0),
    ("p5en.48xlarge", 192, 8, 2048, 16, 0),
    # trn1/trn1n: AWS Trainium (accelerators are Neuron devices, not GPUs)
    ("trn1.2xlarge", 8, 0, 32, 0, 1),
    ("trn1.32xlarge", 128, 0, 512, 8, 16),
    ("trn1n.32xlarge", 128, 0, 512, 16, 16),
)


def _mem_mb(gib: float) -> int:
    return int(gib * 1024 * MEM_TAX)


def _factory(itype: str, cpu: int, gpu: int, gib: float, efa: int, neuron: int) -> ResourceFactory:
    devices = {EFA_DEVICE: efa, NEURON_DEVICE: neuron}

    def create() -> Resource:
        return Resource(
            cpu=cpu,
            gpu=gpu,
            memMB=_mem_mb(gib),
            capabilities={K8S_ITYPE: itype},
            devices={name: n for name, n in devices.items() if n},
        )

    return create


def _gpu_divisors(gpu: int) -> tuple[int, ...]:
    """Powers of two that split ``gpu`` evenly, down to single-GPU slices (none below 2 GPUs)."""
    if gpu < 2:
        return ()
    return tuple(d for d in (1, 2, 4, 8, 16) if d <= gpu and gpu % d == 0)


def instance_type_from_resource(resource: Resource) -> str | None:
    """Returns the instance type a resource is pinned to, or None.

    >>> from anylaunch.specs import named_resources
    >>> instance_type_from_resource(named_resources["aws_g5.xlarge"])
    'g5.xlarge'
    >>> instance_type_from_resource(Resource(cpu=1, gpu=0, memMB=512)) is None
    True
    """
    itype = resource.capabilities.get(K8S_ITYPE)
    return itype if isinstance(itype, str) else None


def _named_resources() -> dict[str, ResourceFactory]:
    table: dict[str, ResourceFactory] = {}
    for itype, cpu, gpu, gib, efa, neuron in _INSTANCE_TYPES:
        factory = _factory(itype, cpu, gpu, gib, efa, neuron)
        table.update(named_resource(f"aws_{itype}", factory, divisors=_gpu_divisors(gpu)))
    return table


#: Name (``aws_<type>`` and fractional ``aws_<type>_<n>``) to factory.
NAMED_RESOURCES: dict[str, ResourceFactory] = _named_resources()
