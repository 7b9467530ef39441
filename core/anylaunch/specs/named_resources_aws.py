"""AWS EC2 instance types as named resources ``aws_<instance type>``.

Figures come from https://aws.amazon.com/ec2/instance-types/ (the rows live in
:mod:`anylaunch.specs.named_resources_aws_catalog`). They may change between releases: register
named resources for the instances you actually run on (see :mod:`anylaunch.specs.resources`).

- One factory function per instance type, named after it with ``-`` and ``.`` as ``_``
  (``aws_p3_2xlarge()``, ``aws_p6_b200_48xlarge()``), and :data:`NAMED_RESOURCES`, which maps
  ``aws_<type>`` (e.g. ``aws_p3.2xlarge``) to a factory that also tags the resource with its name.
- ``memMB`` is the nominal memory in GiB times :data:`GiB`, a "GiB" of ``int(1024 * MEM_TAX)``
  = 983 MiB: ECS/EC2 keep part of a host's memory for the OS and agent, and AWS Batch enforces
  hard memory limits, so a job asking for the full nominal memory would never leave the job
  queue. A few types ask for less than that (``c5.18xlarge``: 142 of its 144 GiB).
- ``capabilities`` holds ``{K8S_ITYPE: "<type>"}`` so that schedulers can pin replicas to the
  instance type (a Kubernetes node selector, an AWS Batch compute environment, a SageMaker
  instance type); :func:`instance_type_from_resource` reads it back.
- EFA-capable types carry ``devices={EFA_DEVICE: <interfaces>}``; Trainium and Inferentia types
  carry their Neuron device count under :data:`NEURON_DEVICE` (and no GPUs).
- GPU types are also registered as slices ``aws_<type>_<n>`` with ``n`` GPUs, for each power of
  two ``n`` that divides the GPU count (TorchX's ``powers_of_two_gpus`` convention): on an 8-GPU
  host ``_4`` is a half and ``_1`` an eighth (``is_fractional()``), and ``_8`` is the whole host
  under another name (not fractional).

>>> from anylaunch.specs import named_resources
>>> print(named_resources["aws_t3.medium"])
Resource(cpu=2, gpu=0, memMB=3932, capabilities={'node.kubernetes.io/instance-type': 't3.medium'},
         devices={}, tags={'anylaunch/resource_name': 'aws_t3.medium'})
>>> aws_p3_2xlarge()
Resource(cpu=8, gpu=1, memMB=59963, capabilities={'node.kubernetes.io/instance-type': 'p3.2xlarge'},
         devices={}, tags={})
>>> r = aws_p6_b200_48xlarge()
>>> (r.cpu, r.gpu, r.memMB == 2048 * GiB, r.devices)
(192, 8, True, {'vpc.amazonaws.com/efa': 8})
>>> half = named_resources["aws_p4d.24xlarge_4"]
>>> (half.cpu, half.gpu, half.devices, half.is_fractional())
(48, 4, {'vpc.amazonaws.com/efa': 2}, True)
"""

from __future__ import annotations

import logging

from anylaunch.specs.api import Resource
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.named_resources_aws_catalog import FAMILIES, INSTANCE_TYPES, InstanceType
from anylaunch.specs.resources import ResourceFactory, named_resource

logger: logging.Logger = logging.getLogger(__name__)

#: Device name of AWS Elastic Fabric Adapter interfaces (the EKS EFA device plugin's resource).
EFA_DEVICE = "vpc.amazonaws.com/efa"
#: Device name of AWS Neuron (Trainium/Inferentia) devices (the EKS Neuron device plugin's).
NEURON_DEVICE = "aws.amazon.com/neurondevice"
#: Capability key holding the instance type (the well-known Kubernetes node label); AWS Batch
#: uses it to pick the compute environment of non-homogeneous queues.
K8S_ITYPE = "node.kubernetes.io/instance-type"
#: Share of nominal memory a job may ask for: ECS/EC2 reserve the rest for the OS and agent
#: (https://docs.aws.amazon.com/batch/latest/userguide/memory-management.html); 96% is the
#: empirically safe figure TorchX uses.
MEM_TAX = 0.96
#: MiB per nominal GiB after the memory tax (983): ``memMB = <GiB> * GiB``. Not
#: ``anylaunch.specs.GiB`` (1024), which is a plain GiB.
GiB: int = int(1024 * MEM_TAX)


def instance_type_from_resource(resource: Resource) -> str | None:
    """Returns the EC2 instance type a resource is pinned to (its :data:`K8S_ITYPE` capability).

    Logs a warning and returns None when the resource names no instance type: schedulers then
    cannot pick a compute environment of a non-homogeneous queue, nor one instance type for all
    nodes of a multi-node job.

    >>> instance_type_from_resource(aws_g5_xlarge())
    'g5.xlarge'
    >>> instance_type_from_resource(Resource(cpu=1, gpu=0, memMB=512)) is None
    True

    Args:
        resource: the resource, typically ``role.resource``.

    Raises:
        InvalidSpecError: ``resource`` is not a Resource, or its capability is not a str.
    """
    if not isinstance(resource, Resource):
        raise InvalidSpecError(
            "instance_type_from_resource.resource",
            resource,
            f"must be an anylaunch.specs.Resource, not a {type(resource).__name__}",
            "pass a role's resource, e.g. instance_type_from_resource(role.resource)",
        )
    itype = resource.capabilities.get(K8S_ITYPE)
    if itype is None or itype == "":
        logger.warning(
            "cannot determine the instance type of %s: it has no %r capability, which can cause "
            "issues for non-homogeneous compute environments and multi-node jobs. Fix: use an "
            "AWS named resource (e.g. resource(h='aws_p4d.24xlarge')) or set "
            "capabilities={anylaunch.specs.named_resources_aws.K8S_ITYPE: '<instance type>'}",
            resource.get_resource_name() or "the resource",
            K8S_ITYPE,
        )
        return None
    if not isinstance(itype, str):
        raise InvalidSpecError(
            f"Resource.capabilities[{K8S_ITYPE!r}]",
            itype,
            "must be an EC2 instance type name (a str)",
            "set it to e.g. 'p4d.24xlarge', or use a named resource such as "
            "resource(h='aws_p4d.24xlarge')",
        )
    return itype


def _function_name(itype: str) -> str:
    return "aws_" + itype.replace("-", "_").replace(".", "_")


def _mem_mb(row: InstanceType) -> int:
    return int(row.request_gib * GiB)


def _describe(row: InstanceType) -> str:
    parts = [f"{row.cpu} vCPUs"]
    if row.gpu:
        parts.append(f"{row.gpu} GPU{'s' if row.gpu > 1 else ''}")
    asks = "" if row.usable_gib is None else f", asks for {row.usable_gib:g}"
    parts.append(f"{row.mem_gib:g} GiB{asks} (memMB={_mem_mb(row)})")
    if row.efa:
        parts.append(f"{row.efa} EFA")
    if row.neuron:
        parts.append(f"{row.neuron} Neuron device{'s' if row.neuron > 1 else ''}")
    return f"AWS ``{row.name}`` ({FAMILIES[row.family]}): {', '.join(parts)}."


_BY_TYPE: dict[str, ResourceFactory] = {}


def _factory(itype: str) -> ResourceFactory:
    row = INSTANCE_TYPES[itype]
    devices = {EFA_DEVICE: row.efa, NEURON_DEVICE: row.neuron}

    def create() -> Resource:
        return Resource(
            cpu=row.cpu,
            gpu=row.gpu,
            memMB=_mem_mb(row),
            capabilities={K8S_ITYPE: row.name},
            devices={name: n for name, n in devices.items() if n},
        )

    create.__name__ = create.__qualname__ = _function_name(itype)
    create.__doc__ = _describe(row)
    _BY_TYPE[itype] = create
    return create


# One factory per instance type (TorchX's names); each returns a fresh, untagged Resource.
aws_t3_nano: ResourceFactory = _factory("t3.nano")
aws_t3_micro: ResourceFactory = _factory("t3.micro")
aws_t3_small: ResourceFactory = _factory("t3.small")
aws_t3_medium: ResourceFactory = _factory("t3.medium")
aws_t3_large: ResourceFactory = _factory("t3.large")
aws_t3_xlarge: ResourceFactory = _factory("t3.xlarge")
aws_t3_2xlarge: ResourceFactory = _factory("t3.2xlarge")
aws_m5_large: ResourceFactory = _factory("m5.large")
aws_m5_xlarge: ResourceFactory = _factory("m5.xlarge")
aws_m5_2xlarge: ResourceFactory = _factory("m5.2xlarge")
aws_m5_4xlarge: ResourceFactory = _factory("m5.4xlarge")
aws_m5_8xlarge: ResourceFactory = _factory("m5.8xlarge")
aws_m5_12xlarge: ResourceFactory = _factory("m5.12xlarge")
aws_m5_16xlarge: ResourceFactory = _factory("m5.16xlarge")
aws_m5_24xlarge: ResourceFactory = _factory("m5.24xlarge")
aws_m5_metal: ResourceFactory = _factory("m5.metal")
aws_m5d_large: ResourceFactory = _factory("m5d.large")
aws_m5d_xlarge: ResourceFactory = _factory("m5d.xlarge")
aws_m5d_2xlarge: ResourceFactory = _factory("m5d.2xlarge")
aws_m5d_4xlarge: ResourceFactory = _factory("m5d.4xlarge")
aws_m5d_8xlarge: ResourceFactory = _factory("m5d.8xlarge")
aws_m5d_12xlarge: ResourceFactory = _factory("m5d.12xlarge")
aws_m5d_16xlarge: ResourceFactory = _factory("m5d.16xlarge")
aws_m5d_24xlarge: ResourceFactory = _factory("m5d.24xlarge")
aws_m5d_metal: ResourceFactory = _factory("m5d.metal")
aws_c5_large: ResourceFactory = _factory("c5.large")
aws_c5_xlarge: ResourceFactory = _factory("c5.xlarge")
aws_c5_2xlarge: ResourceFactory = _factory("c5.2xlarge")
aws_c5_4xlarge: ResourceFactory = _factory("c5.4xlarge")
aws_c5_9xlarge: ResourceFactory = _factory("c5.9xlarge")
aws_c5_12xlarge: ResourceFactory = _factory("c5.12xlarge")
aws_c5_18xlarge: ResourceFactory = _factory("c5.18xlarge")
aws_c5_24xlarge: ResourceFactory = _factory("c5.24xlarge")
aws_g4dn_xlarge: ResourceFactory = _factory("g4dn.xlarge")
aws_g4dn_2xlarge: ResourceFactory = _factory("g4dn.2xlarge")
aws_g4dn_4xlarge: ResourceFactory = _factory("g4dn.4xlarge")
aws_g4dn_8xlarge: ResourceFactory = _factory("g4dn.8xlarge")
aws_g4dn_12xlarge: ResourceFactory = _factory("g4dn.12xlarge")
aws_g4dn_16xlarge: ResourceFactory = _factory("g4dn.16xlarge")
aws_g4dn_metal: ResourceFactory = _factory("g4dn.metal")
aws_g5_xlarge: ResourceFactory = _factory("g5.xlarge")
aws_g5_2xlarge: ResourceFactory = _factory("g5.2xlarge")
aws_g5_4xlarge: ResourceFactory = _factory("g5.4xlarge")
aws_g5_8xlarge: ResourceFactory = _factory("g5.8xlarge")
aws_g5_12xlarge: ResourceFactory = _factory("g5.12xlarge")
aws_g5_16xlarge: ResourceFactory = _factory("g5.16xlarge")
aws_g5_24xlarge: ResourceFactory = _factory("g5.24xlarge")
aws_g5_48xlarge: ResourceFactory = _factory("g5.48xlarge")
aws_g6e_xlarge: ResourceFactory = _factory("g6e.xlarge")
aws_g6e_2xlarge: ResourceFactory = _factory("g6e.2xlarge")
aws_g6e_4xlarge: ResourceFactory = _factory("g6e.4xlarge")
aws_g6e_8xlarge: ResourceFactory = _factory("g6e.8xlarge")
aws_g6e_12xlarge: ResourceFactory = _factory("g6e.12xlarge")
aws_g6e_16xlarge: ResourceFactory = _factory("g6e.16xlarge")
aws_g6e_24xlarge: ResourceFactory = _factory("g6e.24xlarge")
aws_g6e_48xlarge: ResourceFactory = _factory("g6e.48xlarge")
aws_p3_2xlarge: ResourceFactory = _factory("p3.2xlarge")
aws_p3_8xlarge: ResourceFactory = _factory("p3.8xlarge")
aws_p3_16xlarge: ResourceFactory = _factory("p3.16xlarge")
aws_p3dn_24xlarge: ResourceFactory = _factory("p3dn.24xlarge")
aws_p4d_24xlarge: ResourceFactory = _factory("p4d.24xlarge")
aws_p4de_24xlarge: ResourceFactory = _factory("p4de.24xlarge")
aws_p5_48xlarge: ResourceFactory = _factory("p5.48xlarge")
aws_p5e_48xlarge: ResourceFactory = _factory("p5e.48xlarge")
aws_p5en_48xlarge: ResourceFactory = _factory("p5en.48xlarge")
aws_p6_b200_48xlarge: ResourceFactory = _factory("p6-b200.48xlarge")
aws_p6_b300_48xlarge: ResourceFactory = _factory("p6-b300.48xlarge")
aws_p6e_gb200_36xlarge: ResourceFactory = _factory("p6e-gb200.36xlarge")
aws_trn1_2xlarge: ResourceFactory = _factory("trn1.2xlarge")
aws_trn1_32xlarge: ResourceFactory = _factory("trn1.32xlarge")
aws_trn1n_32xlarge: ResourceFactory = _factory("trn1n.32xlarge")
aws_inf2_xlarge: ResourceFactory = _factory("inf2.xlarge")
aws_inf2_8xlarge: ResourceFactory = _factory("inf2.8xlarge")
aws_inf2_24xlarge: ResourceFactory = _factory("inf2.24xlarge")
aws_inf2_48xlarge: ResourceFactory = _factory("inf2.48xlarge")


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _gpu_slices(gpu: int) -> tuple[int, ...]:
    """Divisors 2, 4, ... that cut a power-of-two GPU count into smaller power-of-two slices."""
    if not _is_power_of_two(gpu):
        return ()
    return tuple(2**k for k in range(1, gpu.bit_length()))


def _named_resources() -> dict[str, ResourceFactory]:
    table: dict[str, ResourceFactory] = {}
    for row in INSTANCE_TYPES.values():
        name, factory = f"aws_{row.name}", _BY_TYPE[row.name]
        table.update(named_resource(name, factory, divisors=_gpu_slices(row.gpu)))
        if _is_power_of_two(row.gpu):
            # the whole host under its GPU count: a slice of 1/1, so not fractional
            table.update(named_resource(f"{name}_{row.gpu}", factory))
    return table


#: Name (``aws_<type>``, and ``aws_<type>_<n>`` for n of its GPUs) to factory; every factory
#: makes a fresh Resource tagged with that name.
NAMED_RESOURCES: dict[str, ResourceFactory] = _named_resources()
