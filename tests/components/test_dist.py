"""dist.ddp and dist.spmd build the AppDef TorchX would (torchrun, c10d, -j topologies)."""

import os
import shlex
import stat
import subprocess
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anylaunch.components import DEFAULT_IMAGE
from anylaunch.components.dist import TORCH_DEBUG_FLAGS, ddp, parse_j, spmd
from anylaunch.specs import InvalidSpecError, VolumeMount, macros
from anylaunch.specs.resources import named_resources


def torchrun_argv(app_args: list[str]) -> list[str]:
    """The torchrun argv the role's ``sh -c`` command runs (before macro substitution)."""
    assert app_args[0] == "-c"
    words = shlex.split(app_args[1])
    assert words[0] == "exec"
    return words[1:]


def opt(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_single_node_uses_localhost_and_one_replica() -> None:
    app = ddp("--lr", "0.1", script="scripts/train.py", j="1x4")
    (role,) = app.roles
    argv = torchrun_argv(role.args)
    assert role.entrypoint == "sh"
    assert (app.name, role.name, role.num_replicas, role.min_replicas) == (
        "train",
        "train",
        1,
        None,
    )
    assert argv[0] == "torchrun"
    assert opt(argv, "--rdzv_backend") == "c10d"
    assert opt(argv, "--rdzv_endpoint") == "localhost:0"
    assert opt(argv, "--rdzv_id") == macros.app_id
    assert opt(argv, "--nnodes") == "1"
    assert opt(argv, "--nproc_per_node") == "4"
    assert argv[-3:] == ["scripts/train.py", "--lr", "0.1"]
    assert "--node_rank" not in argv
    assert role.image == DEFAULT_IMAGE
    assert role.port_map == {"c10d": 29500}


def test_multi_node_endpoint_expands_rank0_host_in_the_shell() -> None:
    role = ddp(script="train.py", j="3x2", rdzv_port=29600).roles[0]
    argv = torchrun_argv(role.args)
    assert opt(argv, "--rdzv_endpoint") == "$${${rank0_env}:=localhost}:29600"
    assert role.num_replicas == 3
    assert role.port_map == {"c10d": 29600}


def test_elastic_j_sets_min_replicas_and_nnodes_range() -> None:
    role = ddp(m="pkg.trainer", j="2:5x8").roles[0]
    argv = torchrun_argv(role.args)
    assert (role.num_replicas, role.min_replicas) == (5, 2)
    assert opt(argv, "--nnodes") == "2:5"
    assert argv[-2:] == ["-m", "pkg.trainer"]
    assert role.name == "trainer"


def test_bare_number_j_is_processes_on_one_node() -> None:
    role = ddp(script="t.py", j="4").roles[0]
    assert role.num_replicas == 1
    assert opt(torchrun_argv(role.args), "--nproc_per_node") == "4"


def test_static_backend_passes_node_rank() -> None:
    argv = torchrun_argv(ddp(script="t.py", j="2x1", rdzv_backend="static").roles[0].args)
    assert opt(argv, "--rdzv_backend") == "static"
    assert opt(argv, "--node_rank") == macros.replica_id


def test_rdzv_conf_and_tee_are_passed() -> None:
    argv = torchrun_argv(ddp(script="t.py", rdzv_conf="timeout=600", tee=1).roles[0].args)
    assert opt(argv, "--rdzv_conf") == "timeout=600"
    assert opt(argv, "--tee") == "1"


def test_resources_env_mounts_metadata_retries() -> None:
    user_env = {"FOO": "bar"}
    app = ddp(
        script="t.py",
        cpu=8,
        gpu=2,
        memMB=4096,
        env=user_env,
        metadata={"k": "v"},
        max_retries=3,
        mounts=["type=volume,src=data,dst=/data"],
        debug=True,
        name="exp1/run7",
    )
    role = app.roles[0]
    assert (role.resource.cpu, role.resource.gpu, role.resource.memMB) == (8, 2, 4096)
    assert role.env["FOO"] == "bar"
    assert role.env["ANYLAUNCH_TRACKING_EXPERIMENT_NAME"] == "exp1"
    assert role.env["ANYLAUNCH_TRACKING_RUN_NAME"] == "run7"
    assert role.env["LOGLEVEL"] == os.getenv("LOGLEVEL", "WARNING")
    assert TORCH_DEBUG_FLAGS.items() <= role.env.items()
    assert user_env == {"FOO": "bar"}  # the caller's dict is not modified
    assert role.mounts == [VolumeMount(src="data", dst_path="/data")]
    assert app.metadata == {"k": "v"}
    assert role.max_retries == 3
    assert app.name == "run7"


def test_named_resource_takes_precedence() -> None:
    role = ddp(script="t.py", h="gpu.small", cpu=99).roles[0]
    expected = named_resources["gpu.small"]
    assert (role.resource.cpu, role.resource.gpu) == (expected.cpu, expected.gpu)
    assert role.resource.get_resource_name() == "gpu.small"


@pytest.mark.parametrize(
    ("name", "experiment", "run"),
    [
        ("/", "default-experiment", "train"),
        ("foo/bar", "foo", "bar"),
        ("foo/", "foo", "train"),
        ("/bar", "default-experiment", "bar"),
        ("bar", "default-experiment", "bar"),
    ],
)
def test_structured_name(name: str, experiment: str, run: str) -> None:
    app = ddp(script="a/train.py", name=name)
    env = app.roles[0].env
    assert app.name == run
    assert env["ANYLAUNCH_TRACKING_EXPERIMENT_NAME"] == experiment
    assert env["ANYLAUNCH_TRACKING_RUN_NAME"] == run


@pytest.mark.parametrize(
    "j", ["", "x", "2x", "x4", "2x4x1", "1:x4", "a", "0x4", "2x0", "3:2x1", "-1x2"]
)
def test_bad_j_names_the_field(j: str) -> None:
    with pytest.raises(InvalidSpecError) as info:
        ddp(script="t.py", j=j)
    assert info.value.field == "j"
    assert info.value.value == j
    assert "Fix:" in str(info.value)


@pytest.mark.parametrize("kwargs", [{}, {"script": "t.py", "m": "t"}])
def test_exactly_one_of_script_and_m(kwargs: dict[str, str]) -> None:
    with pytest.raises(InvalidSpecError, match="exactly one of script and m"):
        ddp(**kwargs)


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_bad_rdzv_port(port: int) -> None:
    with pytest.raises(InvalidSpecError) as info:
        ddp(script="t.py", j="2x1", rdzv_port=port)
    assert info.value.field == "rdzv_port"


@given(
    lo=st.integers(min_value=1, max_value=64),
    extra=st.integers(min_value=0, max_value=64),
    nproc=st.integers(min_value=1, max_value=128),
)
def test_j_round_trips_into_the_role(lo: int, extra: int, nproc: int) -> None:
    hi = lo + extra
    j = f"{lo}:{hi}x{nproc}" if extra else f"{lo}x{nproc}"
    spec = parse_j(j)
    assert (spec.min_nnodes, spec.max_nnodes, spec.nproc_per_node) == (lo, hi, nproc)
    role = ddp(script="t.py", j=j).roles[0]
    argv = torchrun_argv(role.args)
    assert role.num_replicas == hi
    assert role.min_replicas == (lo if extra else None)
    assert opt(argv, "--nnodes") == (f"{lo}:{hi}" if extra else str(hi))
    assert opt(argv, "--nproc_per_node") == str(nproc)
    assert (opt(argv, "--rdzv_endpoint") == "localhost:0") == (hi == 1)


@given(
    args=st.lists(
        st.text(alphabet=st.characters(exclude_characters="\x00"), max_size=12), max_size=5
    )
)
def test_script_args_survive_the_shell_quoting(args: list[str]) -> None:
    argv = torchrun_argv(ddp(*args, script="t.py").roles[0].args)
    assert argv[argv.index("t.py") + 1 :] == args


FAKE_TORCHRUN = textwrap.dedent(
    """\
    #!/bin/sh
    for a in "$@"; do printf '%s\\n' "$a"; done
    """
)


@pytest.mark.parametrize("rank0_host", [None, "10.1.2.3"])
def test_command_runs_under_sh_after_macro_substitution(
    tmp_path: Path, rank0_host: str | None
) -> None:
    # a stand-in torchrun on PATH prints the arguments it was given, one per line
    fake = tmp_path / "torchrun"
    fake.write_text(FAKE_TORCHRUN)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    role = ddp("--msg", "it's $HOME", script="train.py", j="2x3", rdzv_port=29511).roles[0]
    values = macros.Values(img_root="", app_id="app-42", replica_id="1", rank0_env="MY_RANK0_HOST")
    applied = values.apply(role)
    env = {"PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    if rank0_host:
        env["MY_RANK0_HOST"] = rank0_host
    out = subprocess.run(
        [applied.entrypoint, *applied.args], env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert opt(out, "--rdzv_endpoint") == f"{rank0_host or 'localhost'}:29511"
    assert opt(out, "--rdzv_id") == "app-42"
    assert out[-3:] == ["train.py", "--msg", "it's $HOME"]


def test_spmd_infers_nproc_from_the_host_gpus() -> None:
    gpus = named_resources["gpu.medium"].gpu
    app = spmd("--foo", m="my.trainer", j="2", h="gpu.medium", name="exp/trial")
    role = app.roles[0]
    argv = torchrun_argv(role.args)
    assert (app.name, role.num_replicas) == ("trial", 2)
    assert opt(argv, "--nproc_per_node") == str(gpus)
    assert role.resource.gpu == gpus
    assert argv[-3:] == ["-m", "my.trainer", "--foo"]


def test_spmd_explicit_nproc_warns_on_gpu_mismatch() -> None:
    with pytest.warns(UserWarning, match="GPU"):
        role = spmd(script="t.py", j="1x3", h="gpu.small").roles[0]
    assert opt(torchrun_argv(role.args), "--nproc_per_node") == "3"


def test_spmd_elastic_j() -> None:
    role = spmd(script="t.py", j="1:4", h="gpu.small").roles[0]
    assert (role.min_replicas, role.num_replicas) == (1, 4)


def test_spmd_cannot_infer_nproc_on_a_cpu_host() -> None:
    with pytest.raises(InvalidSpecError, match="no GPUs"):
        spmd(script="t.py", j="2", h="cpu.small")


@pytest.mark.parametrize("j", ["", "2x", "ax2", "1x2x3"])
def test_spmd_bad_j(j: str) -> None:
    with pytest.raises(InvalidSpecError) as info:
        spmd(script="t.py", j=j)
    assert info.value.field == "j"


def test_spmd_requires_exactly_one_program() -> None:
    with pytest.raises(InvalidSpecError, match="exactly one of script and m"):
        spmd()


def test_app_validates() -> None:
    ddp(script="t.py", j="1:2x2").validate()
    spmd(script="t.py").validate()
