"""Exported constants compute what TorchX's do (issue 31): a value that differs from TorchX's
under the same name silently changes what a ported program asks for."""

from __future__ import annotations

import pytest

from anylaunch import specs
from anylaunch.components.dist import TORCH_DEBUG_FLAGS
from anylaunch.specs import named_resources_aws as aws
from anylaunch.specs import named_resources_generic as generic

# TorchX (main): torchx.specs.api, torchx.specs, named_resources_aws, named_resources_generic,
# torchx.components.dist (there ``_TORCH_DEBUG_FLAGS``).
TORCHX: list[tuple[str, object, object]] = [
    ("specs.ALL", specs.ALL, "all"),
    ("specs.MISSING", specs.MISSING, "<MISSING>"),
    ("specs.NONE", specs.NONE, "<NONE>"),
    ("specs.GiB", specs.GiB, 1024),
    ("named_resources_generic.GiB", generic.GiB, 1024),
    ("named_resources_aws.MEM_TAX", aws.MEM_TAX, 0.96),
    ("named_resources_aws.GiB", aws.GiB, int(1024 * 0.96)),
    ("named_resources_aws.K8S_ITYPE", aws.K8S_ITYPE, "node.kubernetes.io/instance-type"),
    ("named_resources_aws.EFA_DEVICE", aws.EFA_DEVICE, "vpc.amazonaws.com/efa"),
    ("named_resources_aws.NEURON_DEVICE", aws.NEURON_DEVICE, "aws.amazon.com/neurondevice"),
    ("macros.img_root", specs.macros.img_root, "${img_root}"),
    ("macros.base_img_root", specs.macros.base_img_root, "${base_img_root}"),
    ("macros.app_id", specs.macros.app_id, "${app_id}"),
    ("macros.replica_id", specs.macros.replica_id, "${replica_id}"),
    ("macros.rank0_env", specs.macros.rank0_env, "${rank0_env}"),
    (
        "dist.TORCH_DEBUG_FLAGS",
        TORCH_DEBUG_FLAGS,
        {
            "CUDA_LAUNCH_BLOCKING": "1",
            "NCCL_DESYNC_DEBUG": "1",
            "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
            "TORCH_SHOW_CPP_STACKTRACES": "1",
        },
    ),
]


@pytest.mark.parametrize(("ours", "theirs"), [pytest.param(o, t, id=n) for n, o, t in TORCHX])
def test_constant_is_torchx_value(ours: object, theirs: object) -> None:
    assert ours == theirs
    assert type(ours) is type(theirs)


def test_null_resource_is_torchx_sentinel() -> None:
    r = specs.NULL_RESOURCE
    assert (r.cpu, r.gpu, r.memMB) == (-1, -1, -1)


@pytest.mark.parametrize(
    ("name", "nominal_gib"),
    [("aws_p3.2xlarge", 61), ("aws_t3.medium", 4), ("aws_p4d.24xlarge", 1152)],
)
def test_aws_memory_is_nominal_times_the_taxed_gib(name: str, nominal_gib: int) -> None:
    # TorchX: memMB = <nominal GiB> * GiB, where its GiB already holds the memory tax
    assert specs.named_resources[name].memMB == nominal_gib * int(1024 * aws.MEM_TAX)
