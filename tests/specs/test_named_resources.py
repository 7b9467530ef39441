"""Named resources: generic sizes, AWS types, fractional slices, lookups and entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from anylaunch.specs import AnylaunchError, InvalidSpecError, Resource, named_resources, resource
from anylaunch.specs.named_resources_aws import EFA_DEVICE, K8S_ITYPE, NEURON_DEVICE
from anylaunch.specs.resources import (
    UnknownNamedResourceError,
    get_named_resources,
    named_resource,
)

CORE = Path(__file__).resolve().parents[2] / "core"
GiB = 1024

# The table in "Generic Named Resources" of the specs reference: name -> (cpu, gpu, memMB).
GENERIC_TABLE = {
    "gpu.small": (8, 1, 32 * GiB),
    "gpu.medium": (16, 2, 64 * GiB),
    "gpu.large": (32, 4, 128 * GiB),
    "gpu.xlarge": (64, 8, 256 * GiB),
    "cpu.nano": (1, 0, 512),
    "cpu.micro": (1, 0, 1 * GiB),
    "cpu.small": (1, 0, 2 * GiB),
    "cpu.medium": (2, 0, 4 * GiB),
    "cpu.large": (2, 0, 8 * GiB),
    "cpu.xlarge": (8, 0, 32 * GiB),
}

# Published AWS figures: type -> (vCPUs, GPUs, memory GiB, EFA interfaces).
AWS_SAMPLE = {
    "t3.medium": (2, 0, 4, 0),
    "m5.2xlarge": (8, 0, 32, 0),
    "c5.18xlarge": (72, 0, 144, 0),
    "g4dn.xlarge": (4, 1, 16, 0),
    "g5.48xlarge": (192, 8, 768, 1),
    "p3.2xlarge": (8, 1, 61, 0),
    "p3.8xlarge": (32, 4, 244, 0),
    "p4d.24xlarge": (96, 8, 1152, 4),
    "p5.48xlarge": (192, 8, 2048, 32),
    "trn1.32xlarge": (128, 0, 512, 8),
}


def run_python(code: str, *paths: Path) -> subprocess.CompletedProcess[str]:
    """Runs ``code`` in a fresh interpreter that sees this tree's core (and ``paths``)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (CORE, *paths))}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("name", sorted(GENERIC_TABLE))
def test_generic_sizes_match_the_reference_table(name: str) -> None:
    r = named_resources[name]
    assert (r.cpu, r.gpu, r.memMB) == GENERIC_TABLE[name]
    assert r.capabilities == {}
    assert r.devices == {}
    assert r.get_resource_name() == name
    assert not r.is_fractional()


@pytest.mark.parametrize("itype", sorted(AWS_SAMPLE))
def test_aws_types_have_real_figures_and_pin_the_instance_type(itype: str) -> None:
    cpu, gpu, gib, efa = AWS_SAMPLE[itype]
    r = named_resources[f"aws_{itype}"]
    assert (r.cpu, r.gpu) == (cpu, gpu)
    # memory tax, TorchX's way: nominal GiB times a taxed GiB of int(1024 * 0.96) = 983 MiB,
    # except c5.18xlarge, which asks for 142 of its 144 GiB
    assert r.memMB == (142 if itype == "c5.18xlarge" else gib) * 983
    assert r.memMB < gib * 1024
    assert r.capabilities == {K8S_ITYPE: itype}
    assert r.devices.get(EFA_DEVICE, 0) == efa
    assert r.get_resource_name() == f"aws_{itype}"


def test_trainium_carries_neuron_devices_not_gpus() -> None:
    r = named_resources["aws_trn1.32xlarge"]
    assert r.gpu == 0
    assert r.devices == {EFA_DEVICE: 8, NEURON_DEVICE: 16}


def test_every_registered_name_makes_a_valid_resource_tagged_with_that_name() -> None:
    names = list(named_resources)
    assert len(names) == len(set(names)) == len(named_resources)
    for name in names:
        r = named_resources[name]
        assert isinstance(r, Resource)
        assert r.get_resource_name() == name
        if name.startswith("aws_"):
            # aws_<type>, or aws_<type>_<n> for a slice (or the whole host) of n GPUs
            itype = r.capabilities[K8S_ITYPE]
            assert name == f"aws_{itype}" or name == f"aws_{itype}_{r.gpu}"


def test_h_wins_over_raw_specs() -> None:
    r = resource(cpu=99, gpu=7, memMB=1, h="cpu.small")
    assert (r.cpu, r.gpu, r.memMB) == GENERIC_TABLE["cpu.small"]
    assert r.get_resource_name() == "cpu.small"


def test_raw_specs_and_their_defaults() -> None:
    assert resource(cpu=4, gpu=1, memMB=8192) == Resource(cpu=4, gpu=1, memMB=8192)
    assert resource() == Resource(cpu=2, gpu=0, memMB=1024)
    # explicit zeros are kept, not replaced by the defaults
    assert resource(cpu=0, gpu=0, memMB=0) == Resource(cpu=0, gpu=0, memMB=0)
    assert resource(cpu=3, h="").cpu == 3  # empty h counts as unset, as in TorchX
    assert resource(gpu=2).get_resource_name() is None


def test_bad_resource_arguments_raise_invalid_spec_error() -> None:
    with pytest.raises(InvalidSpecError, match=r"resource\.h=3"):
        resource(h=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match=r"Resource\.cpu=-1"):
        resource(cpu=-1)


def test_each_lookup_returns_a_fresh_resource() -> None:
    first = named_resources["aws_p4d.24xlarge"]
    first.cpu = 1
    first.capabilities["zone"] = "us-east-1a"
    first.devices[EFA_DEVICE] = 0
    first.tags["mine"] = True
    second = get_named_resources("aws_p4d.24xlarge")
    assert second is not first
    assert second.cpu == 96
    assert second.capabilities == {K8S_ITYPE: "p4d.24xlarge"}
    assert second.devices == {EFA_DEVICE: 4}
    assert "mine" not in second.tags


def test_a_factory_returning_a_shared_instance_still_gives_fresh_copies() -> None:
    shared = Resource(cpu=1, gpu=0, memMB=64)
    factory = named_resource("shared", lambda: shared)["shared"]
    made = factory()
    made.capabilities["x"] = 1
    assert made is not shared
    assert shared.capabilities == {} and shared.tags == {}
    assert factory().capabilities == {}


def test_typo_gets_did_you_mean_and_the_fix() -> None:
    with pytest.raises(UnknownNamedResourceError) as info:
        named_resources["gpu.smal"]
    err = info.value
    assert isinstance(err, KeyError)
    assert isinstance(err, AnylaunchError)
    assert "Did you mean 'gpu.small'?" in str(err)
    assert "Fix:" in str(err) and "anylaunch.named_resources" in str(err)
    with pytest.raises(UnknownNamedResourceError) as info:
        resource(h="aws_p4d.24xl")
    assert "Did you mean 'aws_p4d.24xlarge'?" in str(info.value)
    with pytest.raises(UnknownNamedResourceError) as info:
        resource(h="zzz")
    assert "Did you mean" not in str(info.value)


def test_mapping_protocol() -> None:
    assert named_resources.get("no-such-resource") is None
    assert "no-such-resource" not in named_resources
    assert 42 not in named_resources  # type: ignore[comparison-overlap]
    with pytest.raises(UnknownNamedResourceError):
        named_resources[42]  # type: ignore[index]
    with pytest.raises(TypeError):
        named_resources["mine"] = Resource(cpu=1, gpu=0, memMB=1)  # type: ignore[index]


def test_fractional_slices_of_an_aws_type() -> None:
    whole = named_resources["aws_p4d.24xlarge"]
    assert not whole.is_fractional()
    for n in (1, 2, 4, 8):
        part = named_resources[f"aws_p4d.24xlarge_{n}"]
        # _8 is the whole host under another name: a 1/1 slice is not fractional
        assert part.is_fractional() == (n < 8)
        assert part.get_resource_name() == f"aws_p4d.24xlarge_{n}"
        assert part.gpu == n
        assert part.cpu == whole.cpu * n // 8
        assert part.memMB == whole.memMB * n // 8
        assert part.capabilities == whole.capabilities
        # 8/n slices always fit on one host, devices included
        assert part.devices.get(EFA_DEVICE, 0) * (8 // n) <= whole.devices[EFA_DEVICE]
    p5_quarter = named_resources["aws_p5.48xlarge_2"]
    assert p5_quarter.devices == {EFA_DEVICE: 8}
    assert "aws_t3.medium_1" not in named_resources  # no GPUs, no slices


def test_named_resource_helper_registers_fractions_and_validates() -> None:
    def box() -> Resource:
        return Resource(cpu=64, gpu=4, memMB=4000, devices={"x": 2})

    table = named_resource("box", box, divisors=(1, 2, 4))
    assert sorted(table) == ["box", "box_1", "box_2", "box_4"]
    quarter = table["box_1"]()
    assert (quarter.cpu, quarter.gpu, quarter.memMB, quarter.devices) == (16, 1, 1000, {})
    assert quarter.is_fractional() and not table["box"]().is_fractional()
    with pytest.raises(InvalidSpecError, match="split the 4 GPU"):
        named_resource("box", box, divisors=(3,))
    with pytest.raises(InvalidSpecError, match="ints >= 1"):
        named_resource("box", box, divisors=(0,))
    with pytest.raises(InvalidSpecError, match="non-empty str"):
        named_resource("", box)
    bad = named_resource("bad", lambda: "not a resource")["bad"]  # type: ignore[arg-type,return-value]
    with pytest.raises(InvalidSpecError, match="returned a str, not a Resource"):
        bad()


def _write_distribution(root: Path, entry_points: str) -> None:
    pkg = root / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        textwrap.dedent(
            """
            from anylaunch.specs import Resource

            def box():
                return Resource(cpu=3, gpu=0, memMB=333, capabilities={"rack": "r1"})

            def not_a_resource():
                return {"cpu": 1}

            def explodes():
                raise RuntimeError("quota service down")
            """
        )
    )
    info = root / "mypkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mypkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


def test_user_entry_points_register_and_override(tmp_path: Path) -> None:
    _write_distribution(
        tmp_path,
        """
        [anylaunch.named_resources]
        my.box = mypkg:box
        gpu.small = mypkg:box
        broken.import = mypkg_does_not_exist:box
        broken.type = mypkg:not_a_resource
        broken.call = mypkg:explodes
        """,
    )
    proc = run_python(
        """
        import json
        from anylaunch.specs import named_resources, resource
        from anylaunch.specs.resources import NamedResourceEntryPointError

        out = {}
        for name in ("my.box", "gpu.small"):
            r = resource(h=name)
            out[name] = [r.cpu, r.gpu, r.memMB, r.capabilities, r.get_resource_name()]
        out["builtin_still_there"] = named_resources["cpu.small"].memMB
        for name in ("broken.import", "broken.type", "broken.call"):
            try:
                named_resources[name]
            except NamedResourceEntryPointError as e:
                out[name] = str(e)
        print(json.dumps(out))
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["my.box"] == [3, 0, 333, {"rack": "r1"}, "my.box"]
    assert out["gpu.small"] == [3, 0, 333, {"rack": "r1"}, "gpu.small"]  # user beats built-in
    assert out["builtin_still_there"] == 2 * GiB  # one broken plugin breaks nothing else
    assert "'broken.import'" in out["broken.import"]
    assert "mypkg_does_not_exist:box" in out["broken.import"]
    assert "ModuleNotFoundError" in out["broken.import"]
    assert "returned a dict, not a Resource" in out["broken.type"]
    assert "quota service down" in out["broken.call"]
    for name in ("broken.import", "broken.type", "broken.call"):
        assert "Fix:" in out[name] and "anylaunch.named_resources" in out[name]


def test_importing_specs_does_not_load_named_resources() -> None:
    proc = run_python(
        """
        import sys
        import anylaunch.specs
        before = [m for m in ("anylaunch.specs.resources", "importlib.metadata",
                              "anylaunch.specs.named_resources_aws") if m in sys.modules]
        from anylaunch.specs import named_resources
        imported = "anylaunch.specs.resources" in sys.modules
        memory = named_resources["cpu.nano"].memMB
        print(before, imported, "importlib.metadata" in sys.modules, memory)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]", "True", "True", "512"]
