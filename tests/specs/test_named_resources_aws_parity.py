"""AWS named resources match TorchX's catalogue: names, figures, memory arithmetic, factories."""

from __future__ import annotations

import logging

import pytest

from anylaunch.schedulers.aws.batch_request import check_app, device_mounts
from anylaunch.schedulers.kubernetes.pods import container_resources
from anylaunch.specs import AppDef, InvalidSpecError, Resource, Role, named_resources, resource
from anylaunch.specs import named_resources_aws as aws
from anylaunch.specs.named_resources_aws import (
    EFA_DEVICE,
    K8S_ITYPE,
    NAMED_RESOURCES,
    NEURON_DEVICE,
    instance_type_from_resource,
)
from anylaunch.specs.named_resources_aws_catalog import FAMILIES, INSTANCE_TYPES

TAXED_GIB = 983  # int(1024 * 0.96)

# TorchX's AWS named resources (main, Aug 2026): name -> (cpu, gpu, GiB asked for, EFA, Neuron).
TORCHX: dict[str, tuple[int, int, int, int, int]] = {
    "aws_t3.medium": (2, 0, 4, 0, 0),
    "aws_m5.large": (2, 0, 8, 0, 0),
    "aws_m5.xlarge": (4, 0, 16, 0, 0),
    "aws_m5.2xlarge": (8, 0, 32, 0, 0),
    "aws_m5.4xlarge": (16, 0, 64, 0, 0),
    "aws_m5.8xlarge": (32, 0, 128, 0, 0),
    "aws_m5.12xlarge": (48, 0, 192, 0, 0),
    "aws_m5.16xlarge": (64, 0, 256, 0, 0),
    "aws_m5.24xlarge": (96, 0, 384, 0, 0),
    "aws_m5.metal": (96, 0, 384, 0, 0),
    "aws_m5d.large": (2, 0, 8, 0, 0),
    "aws_m5d.xlarge": (4, 0, 16, 0, 0),
    "aws_m5d.2xlarge": (8, 0, 32, 0, 0),
    "aws_m5d.4xlarge": (16, 0, 64, 0, 0),
    "aws_m5d.8xlarge": (32, 0, 128, 0, 0),
    "aws_m5d.12xlarge": (48, 0, 192, 0, 0),
    "aws_m5d.16xlarge": (64, 0, 256, 0, 0),
    "aws_m5d.24xlarge": (96, 0, 384, 0, 0),
    "aws_m5d.metal": (96, 0, 384, 0, 0),
    "aws_c5.18xlarge": (72, 0, 142, 0, 0),  # 144 GiB nominal: the documented exception
    "aws_p3.2xlarge": (8, 1, 61, 0, 0),
    "aws_p3.8xlarge": (32, 4, 244, 0, 0),
    "aws_p3.16xlarge": (64, 8, 488, 0, 0),
    "aws_p3dn.24xlarge": (96, 8, 768, 1, 0),
    "aws_p4d.24xlarge": (96, 8, 1152, 4, 0),
    "aws_p4de.24xlarge": (96, 8, 1152, 4, 0),
    "aws_p5.48xlarge": (192, 8, 2048, 32, 0),
    "aws_p5e.48xlarge": (192, 8, 2048, 32, 0),
    "aws_p5en.48xlarge": (192, 8, 2048, 16, 0),
    "aws_p6-b200.48xlarge": (192, 8, 2048, 8, 0),
    "aws_p6-b300.48xlarge": (192, 8, 4096, 16, 0),
    "aws_p6e-gb200.36xlarge": (144, 4, 960, 16, 0),
    "aws_g4dn.xlarge": (4, 1, 16, 0, 0),
    "aws_g4dn.2xlarge": (8, 1, 32, 0, 0),
    "aws_g4dn.4xlarge": (16, 1, 64, 0, 0),
    "aws_g4dn.8xlarge": (32, 1, 128, 1, 0),
    "aws_g4dn.16xlarge": (64, 1, 256, 1, 0),
    "aws_g4dn.12xlarge": (48, 4, 192, 1, 0),
    "aws_g4dn.metal": (96, 8, 384, 1, 0),
    "aws_g5.xlarge": (4, 1, 16, 0, 0),
    "aws_g5.2xlarge": (8, 1, 32, 0, 0),
    "aws_g5.4xlarge": (16, 1, 64, 0, 0),
    "aws_g5.8xlarge": (32, 1, 128, 1, 0),
    "aws_g5.16xlarge": (64, 1, 256, 1, 0),
    "aws_g5.12xlarge": (48, 4, 192, 1, 0),
    "aws_g5.24xlarge": (96, 4, 384, 1, 0),
    "aws_g5.48xlarge": (192, 8, 768, 1, 0),
    "aws_g6e.xlarge": (4, 1, 32, 0, 0),
    "aws_g6e.2xlarge": (8, 1, 64, 0, 0),
    "aws_g6e.4xlarge": (16, 1, 128, 0, 0),
    "aws_g6e.8xlarge": (32, 1, 256, 0, 0),
    "aws_g6e.16xlarge": (64, 1, 512, 0, 0),
    "aws_g6e.12xlarge": (48, 4, 384, 0, 0),
    "aws_g6e.24xlarge": (96, 4, 768, 2, 0),
    "aws_g6e.48xlarge": (192, 8, 1536, 4, 0),
    "aws_trn1.2xlarge": (8, 0, 32, 0, 1),
    "aws_trn1.32xlarge": (128, 0, 512, 8, 16),
    "aws_inf2.xlarge": (4, 0, 16, 0, 1),
    "aws_inf2.8xlarge": (32, 0, 128, 0, 1),
    "aws_inf2.24xlarge": (96, 0, 384, 0, 6),
    "aws_inf2.48xlarge": (192, 0, 768, 0, 12),
}

# Types anylaunch registers on top of TorchX's: name -> (cpu, gpu, nominal GiB).
OURS_ONLY = {
    "aws_t3.nano": (2, 0, 0.5),
    "aws_t3.micro": (2, 0, 1),
    "aws_t3.small": (2, 0, 2),
    "aws_t3.large": (2, 0, 8),
    "aws_t3.xlarge": (4, 0, 16),
    "aws_t3.2xlarge": (8, 0, 32),
    "aws_c5.large": (2, 0, 4),
    "aws_c5.xlarge": (4, 0, 8),
    "aws_c5.2xlarge": (8, 0, 16),
    "aws_c5.4xlarge": (16, 0, 32),
    "aws_c5.9xlarge": (36, 0, 72),
    "aws_c5.12xlarge": (48, 0, 96),
    "aws_c5.24xlarge": (96, 0, 192),
    "aws_trn1n.32xlarge": (128, 0, 512),
}


def devices(efa: int, neuron: int) -> dict[str, int]:
    return {k: n for k, n in ((EFA_DEVICE, efa), (NEURON_DEVICE, neuron)) if n}


def function_name(itype: str) -> str:
    return "aws_" + itype.replace("-", "_").replace(".", "_")


def test_constants_have_torchx_values() -> None:
    assert aws.EFA_DEVICE == "vpc.amazonaws.com/efa"
    assert aws.NEURON_DEVICE == "aws.amazon.com/neurondevice"
    assert aws.K8S_ITYPE == "node.kubernetes.io/instance-type"
    assert aws.MEM_TAX == 0.96
    assert aws.GiB == TAXED_GIB == int(1024 * 0.96)


def test_catalogue_holds_every_torchx_name_and_marks_the_rest_as_ours() -> None:
    torchx_rows = {f"aws_{row.name}" for row in INSTANCE_TYPES.values() if row.torchx}
    assert torchx_rows == set(TORCHX)
    ours = {f"aws_{row.name}" for row in INSTANCE_TYPES.values() if not row.torchx}
    assert ours == set(OURS_ONLY)
    assert set(TORCHX) | set(OURS_ONLY) <= set(NAMED_RESOURCES)
    assert {row.family for row in INSTANCE_TYPES.values()} == set(FAMILIES)


@pytest.mark.parametrize("name", sorted(TORCHX))
def test_torchx_types_have_torchx_figures(name: str) -> None:
    cpu, gpu, gib, efa, neuron = TORCHX[name]
    itype = name[len("aws_") :]
    r = named_resources[name]
    assert (r.cpu, r.gpu, r.memMB) == (cpu, gpu, gib * TAXED_GIB)
    assert r.capabilities == {K8S_ITYPE: itype}
    assert r.devices == devices(efa, neuron)
    assert r.get_resource_name() == name
    assert not r.is_fractional()
    # the public factory: TorchX's name, same figures, no tags (as in TorchX)
    made = getattr(aws, function_name(itype))()
    assert made == Resource(
        cpu=cpu,
        gpu=gpu,
        memMB=gib * TAXED_GIB,
        capabilities={K8S_ITYPE: itype},
        devices=devices(efa, neuron),
    )
    assert resource(h=name).memMB == gib * TAXED_GIB


@pytest.mark.parametrize("name", sorted(OURS_ONLY))
def test_our_extra_types_use_the_same_arithmetic(name: str) -> None:
    cpu, gpu, gib = OURS_ONLY[name]
    r = named_resources[name]
    assert (r.cpu, r.gpu, r.memMB) == (cpu, gpu, int(gib * TAXED_GIB))
    assert r.capabilities == {K8S_ITYPE: name[len("aws_") :]}


def test_every_type_has_a_documented_public_factory_making_fresh_resources() -> None:
    for row in INSTANCE_TYPES.values():
        factory = getattr(aws, function_name(row.name))
        assert factory.__name__ == function_name(row.name)
        assert factory.__doc__ and f"``{row.name}``" in factory.__doc__
        assert FAMILIES[row.family] in factory.__doc__
        first, second = factory(), factory()
        assert first == second and first is not second
        first.capabilities[K8S_ITYPE] = "changed"
        first.devices["x"] = 1
        assert factory().capabilities == {K8S_ITYPE: row.name}
        assert "x" not in factory().devices


def test_memory_stays_below_nominal_and_the_exception_is_documented() -> None:
    for row in INSTANCE_TYPES.values():
        r = getattr(aws, function_name(row.name))()
        assert r.memMB < row.mem_gib * 1024
    c5 = aws.aws_c5_18xlarge
    assert c5().memMB == 142 * TAXED_GIB
    assert "144 GiB, asks for 142" in (c5.__doc__ or "")


@pytest.mark.parametrize(
    ("name", "gpus"),
    [(n, v[1]) for n, v in TORCHX.items() if v[1]],
)
def test_gpu_types_have_power_of_two_slices(name: str, gpus: int) -> None:
    whole = named_resources[name]
    sizes = [n for n in (1, 2, 4, 8, 16) if n <= gpus]
    for n in sizes:
        part = named_resources[f"{name}_{n}"]
        d = gpus // n
        assert part.get_resource_name() == f"{name}_{n}"
        assert part.is_fractional() == (n < gpus)  # the 1/1 slice is the whole host
        assert (part.cpu, part.gpu, part.memMB) == (whole.cpu // d, n, whole.memMB // d)
        assert part.capabilities == whole.capabilities
        for device, count in part.devices.items():
            assert count * d <= whole.devices[device]  # d slices fit on one host
    assert f"{name}_{2 * gpus}" not in named_resources
    if gpus > 1:
        assert f"{name}_3" not in named_resources


def test_types_without_gpus_have_no_slices() -> None:
    for row in INSTANCE_TYPES.values():
        if row.gpu == 0:
            assert not [k for k in NAMED_RESOURCES if k.startswith(f"aws_{row.name}_")]


def test_instance_type_from_resource_reads_the_capability() -> None:
    assert instance_type_from_resource(aws.aws_p6e_gb200_36xlarge()) == "p6e-gb200.36xlarge"
    assert instance_type_from_resource(named_resources["aws_p5.48xlarge_2"]) == "p5.48xlarge"
    mine = Resource(cpu=1, gpu=0, memMB=1, capabilities={K8S_ITYPE: "x9.huge"})
    assert instance_type_from_resource(mine) == "x9.huge"


@pytest.mark.parametrize("capabilities", [{}, {K8S_ITYPE: ""}, {"zone": "us-east-1a"}])
def test_instance_type_from_resource_warns_when_missing(
    capabilities: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    r = Resource(cpu=4, gpu=0, memMB=1024, capabilities=dict(capabilities))
    with caplog.at_level(logging.WARNING, logger="anylaunch.specs.named_resources_aws"):
        assert instance_type_from_resource(r) is None
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert K8S_ITYPE in record.getMessage()
    assert "Fix:" in record.getMessage()


def test_instance_type_from_resource_is_silent_when_present(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG):
        instance_type_from_resource(named_resources["aws_inf2.xlarge"])
    assert caplog.records == []


def test_instance_type_from_resource_rejects_bad_input() -> None:
    bad = Resource(cpu=1, gpu=0, memMB=1, capabilities={K8S_ITYPE: ["p4d.24xlarge"]})
    with pytest.raises(InvalidSpecError, match=r"instance-type.*must be an EC2 instance type"):
        instance_type_from_resource(bad)
    with pytest.raises(ValueError, match=r"must be an anylaunch\.specs\.Resource, not a str"):
        instance_type_from_resource("aws_p4d.24xlarge")  # type: ignore[arg-type]


def test_aws_batch_uses_the_instance_type_and_devices() -> None:
    def role(name: str, h: str) -> Role:
        return Role(name=name, image="img", entrypoint="true", resource=named_resources[h])

    app = AppDef("train", roles=[role("a", "aws_p6-b200.48xlarge_4")])
    assert check_app(app, multinode=True)[1] == "p6-b200.48xlarge"
    mixed = AppDef("train", roles=[role("a", "aws_p5.48xlarge"), role("b", "aws_p5e.48xlarge")])
    with pytest.raises(InvalidSpecError, match="one instance type"):
        check_app(mixed, multinode=True)
    mounts = device_mounts(role("n", "aws_inf2.24xlarge"))
    assert [m.src_path for m in mounts] == [f"/dev/neuron{i}" for i in range(6)]
    assert len(device_mounts(role("e", "aws_p6-b300.48xlarge"))) == 16


def test_kubernetes_requests_the_devices_of_a_named_resource() -> None:
    res = container_resources(named_resources["aws_trn1.32xlarge"])
    assert res["limits"][NEURON_DEVICE] == "16"
    assert res["limits"][EFA_DEVICE] == "8"
    assert res["limits"]["memory"] == f"{512 * TAXED_GIB}Mi"
