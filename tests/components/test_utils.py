"""utils.* and serve.torchserve build the AppDefs TorchX's built-ins would."""

import os
import shlex
import subprocess

import pytest

from anylaunch.components import DEFAULT_IMAGE, PYTHON, serve, utils
from anylaunch.specs import BindMount, InvalidSpecError, Resource
from anylaunch.specs.resources import named_resources

SMALL = Resource(cpu=1, gpu=0, memMB=1024)


def test_echo() -> None:
    app = utils.echo(msg="hi there", num_replicas=3)
    (role,) = app.roles
    assert (app.name, role.name, role.entrypoint, role.args) == (
        "echo",
        "echo",
        "echo",
        ["hi there"],
    )
    assert role.num_replicas == 3
    assert role.image == DEFAULT_IMAGE
    assert role.resource == SMALL
    assert utils.echo().roles[0].args == ["hello world"]


def test_touch() -> None:
    role = utils.touch("/tmp/x", image="img").roles[0]
    assert (role.entrypoint, role.args, role.image) == ("touch", ["/tmp/x"], "img")
    with pytest.raises(InvalidSpecError) as info:
        utils.touch("")
    assert info.value.field == "file"


def test_sh_quotes_each_argument_for_sh_c() -> None:
    app = utils.sh("echo", "a b", "$HOME", ";", "rm", num_replicas=2, env={"X": "1"}, max_retries=4)
    role = app.roles[0]
    assert (app.name, role.entrypoint, role.args[0]) == ("sh", "sh", "-c")
    assert shlex.split(role.args[1]) == ["echo", "a b", "$HOME", ";", "rm"]
    assert role.env["X"] == "1"
    assert role.env["LOGLEVEL"] == os.getenv("LOGLEVEL", "WARNING")
    assert (role.num_replicas, role.max_retries) == (2, 4)
    # and sh really passes them through literally
    out = subprocess.run([role.entrypoint, *role.args], capture_output=True, text=True, check=True)
    assert out.stdout == "a b $HOME ; rm\n"


def test_sh_with_entrypoint_passes_args_unquoted() -> None:
    role = utils.sh("-c", "print('x y')", entrypoint="python3").roles[0]
    assert (role.entrypoint, role.args) == ("python3", ["-c", "print('x y')"])


def test_sh_resources_and_mounts() -> None:
    role = utils.sh("true", cpu=3, gpu=1, memMB=2048, mounts=["type=bind,src=/a,dst=/b"]).roles[0]
    assert (role.resource.cpu, role.resource.gpu, role.resource.memMB) == (3, 1, 2048)
    assert role.mounts == [BindMount("/a", "/b")]
    assert (
        utils.sh("true", h="cpu.large").roles[0].resource.memMB
        == named_resources["cpu.large"].memMB
    )


def test_sh_needs_a_command() -> None:
    with pytest.raises(InvalidSpecError) as info:
        utils.sh()
    assert info.value.field == "args"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"m": "foo.main"}, ["-m", "foo.main", "--n", "2"]),
        ({"c": "print(1)"}, ["-c", "print(1)", "--n", "2"]),
        ({"script": "main.py"}, ["main.py", "--n", "2"]),
    ],
)
def test_python(kwargs: dict[str, str], expected: list[str]) -> None:
    app = utils.python("--n", "2", name="job", num_replicas=2, cpu=2, **kwargs)
    role = app.roles[0]
    assert (app.name, role.name, role.entrypoint) == ("job", "python", PYTHON)
    assert role.args == expected
    assert (role.num_replicas, role.resource.cpu) == (2, 2)
    assert utils.python(m="x").name == "anylaunch_utils_python"


@pytest.mark.parametrize("kwargs", [{}, {"m": "a", "c": "b"}, {"m": "a", "script": "b.py"}])
def test_python_needs_exactly_one_program(kwargs: dict[str, str]) -> None:
    with pytest.raises(InvalidSpecError, match="exactly one of m, c and script"):
        utils.python(**kwargs)


def test_python_entrypoint_is_on_this_machines_path() -> None:
    # the components name the interpreter, the replica's PATH resolves it
    import shutil

    assert shutil.which(PYTHON) is not None


def test_binary() -> None:
    app = utils.binary("-l", "/", entrypoint="/bin/ls", num_replicas=2, image="/opt")
    role = app.roles[0]
    assert (app.name, role.name, role.entrypoint, role.args) == (
        "anylaunch_utils_binary",
        "binary",
        "/bin/ls",
        ["-l", "/"],
    )
    assert (role.num_replicas, role.image) == (2, "/opt")
    with pytest.raises(InvalidSpecError) as info:
        utils.binary(entrypoint="")
    assert info.value.field == "entrypoint"


def test_copy() -> None:
    app = utils.copy("s3://b/a.txt", "/tmp/a.txt", mounts=["type=bind,src=/x,dst=/y"])
    role = app.roles[0]
    assert app.name == role.name == "anylaunch-utils-copy"
    assert role.entrypoint == PYTHON
    assert role.args == [
        "-m",
        "anylaunch.apps.utils.copy_main",
        "--src=s3://b/a.txt",
        "--dst=/tmp/a.txt",
    ]
    assert role.mounts == [BindMount("/x", "/y")]
    assert role.resource == SMALL


def test_booth() -> None:
    role = utils.booth(1.5, -2.0, trial_idx=7, tracker_base="memory://t").roles[0]
    assert role.entrypoint == PYTHON
    assert role.args == [
        "-m",
        "anylaunch.apps.utils.booth_main",
        "--x1=1.5",
        "--x2=-2.0",
        "--trial_idx=7",
        "--tracker_base=memory://t",
    ]
    assert utils.booth(0, 0).roles[0].args[-1] == "--tracker_base=/tmp/anylaunch-booth"


def test_torchserve() -> None:
    app = serve.torchserve(
        "s3://b/m.mar",
        "http://ts:8081",
        image="img",
        params={"model_name": "resnet", "batch_size": "4"},
        dryrun=True,
        port=9000,
    )
    role = app.roles[0]
    assert (app.name, role.name, role.entrypoint, role.image) == (
        "anylaunch-torchserve",
        "worker",
        PYTHON,
        "img",
    )
    assert role.args == [
        "-m",
        "anylaunch.apps.serve.serve",
        "--model_path=s3://b/m.mar",
        "--management_api=http://ts:8081",
        "--port=9000",
        "--model_name=resnet",
        "--batch_size=4",
        "--dryrun",
    ]
    assert role.port_map == {"model-download": 9000}


def test_torchserve_rejects_bad_input_with_hints() -> None:
    with pytest.raises(InvalidSpecError, match="Did you mean 'model_name'"):
        serve.torchserve("m.mar", "http://ts:8081", params={"modelname": "x"})
    with pytest.raises(InvalidSpecError) as info:
        serve.torchserve("m.mar", "ts:8081")
    assert info.value.field == "management_api"
    with pytest.raises(InvalidSpecError) as info:
        serve.torchserve("m.mar", "http://ts:8081", port=0)
    assert info.value.field == "port"
