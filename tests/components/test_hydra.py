"""utils.hydra builds the AppDef a Hydra config declares (TorchX HEAD's ``utils.hydra``).

Input checks run everywhere; composing needs ``hydra-core``, which cannot share the main env
with Dagster (its omegaconf pins an antlr4 runtime too old for Dagster's parser): the test
command runs this file in the ``hydra`` env too (``bash scripts/engine_envs.sh hydra``), where
nothing is skipped.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from anylaunch.components import get_component
from anylaunch.components.utils import hydra
from anylaunch.runner import Runner, get_runner
from anylaunch.sdk import MissingDependencyError
from anylaunch.specs import AppDef, AppState, InvalidSpecError, Resource
from anylaunch.specs.builders import materialize_appdef

JOB = """\
defaults:
  - role: echo
  - _self_
app:
  _target_: anylaunch.specs.AppDef
  name: my_job
  roles:
    - ${role}
"""
ROLE = """\
_target_: anylaunch.specs.Role
name: trainer
image: "."
entrypoint: echo
num_replicas: 1
args: [hello, "${anylaunch.app_id:}", "${anylaunch.replica_id:}"]
resource:
  _target_: anylaunch.specs.Resource
  cpu: 1
  gpu: 0
  memMB: 256
"""


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    (tmp_path / "role").mkdir()
    (tmp_path / "my_job.yaml").write_text(JOB)
    (tmp_path / "role" / "echo.yaml").write_text(ROLE)
    (tmp_path / "not_an_app.yaml").write_text("app:\n  _target_: builtins.dict\n  a: 1\n")
    (tmp_path / "no_app.yaml").write_text("job:\n  name: x\n")
    return tmp_path


@pytest.fixture
def with_hydra() -> None:
    pytest.importorskip("hydra", reason="hydra-core is not installed")


# --- input checks (no hydra needed) ---------------------------------------------------------


def test_is_a_builtin_that_passes_the_linter() -> None:
    component = get_component("utils.hydra")
    assert component.fn is hydra
    assert not component.validation_errors


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"config_name": ""}, "config_name"),
        ({"config_name": "my_job", "config_dir": ""}, "config_dir"),
        ({"config_name": "my_job", "config_dir": "/no/such/dir"}, "config_dir"),
        ({"config_name": "my_jb"}, "config_name"),
    ],
)
def test_bad_input_names_the_field(
    config_dir: Path, kwargs: dict[str, str], field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(config_dir.parent)
    kwargs = {"config_dir": config_dir.name, **kwargs}
    with pytest.raises(InvalidSpecError) as info:
        hydra(**kwargs)
    assert info.value.field == field
    if kwargs["config_name"] == "my_jb":
        assert "Did you mean 'my_job'?" in str(info.value)


def test_an_empty_override_names_its_position(config_dir: Path) -> None:
    with pytest.raises(InvalidSpecError) as info:
        hydra("role.num_replicas=2", "", config_name="my_job", config_dir=str(config_dir))
    assert info.value.field == "overrides[1]"


def test_without_hydra_core_the_error_says_what_to_install(
    config_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "hydra", None)  # import hydra raises ImportError
    with pytest.raises(MissingDependencyError, match="pip install hydra-core"):
        hydra(config_name="my_job", config_dir=str(config_dir))


# --- composing (needs hydra-core) ------------------------------------------------------------


@pytest.mark.usefixtures("with_hydra")
def test_builds_the_configured_app_with_overrides(config_dir: Path) -> None:
    app = hydra(
        "role.num_replicas=3", "role.args.0=bye", config_name="my_job", config_dir=str(config_dir)
    )
    assert isinstance(app, AppDef)
    (role,) = app.roles
    assert (app.name, role.name, role.entrypoint, role.num_replicas) == (
        "my_job",
        "trainer",
        "echo",
        3,
    )
    # the macros stay literal for the scheduler to substitute
    assert role.args == ["bye", "${app_id}", "${replica_id}"]
    assert role.resource == Resource(cpu=1, gpu=0, memMB=256)
    # composing twice in one process works (Hydra's global state is released)
    again = hydra(config_name="my_job.yaml", config_dir=str(config_dir))
    assert again.roles[0].num_replicas == 1


@pytest.mark.usefixtures("with_hydra")
def test_the_default_config_dir_is_dot_anylaunch(
    config_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(config_dir.parent)
    config_dir.rename(config_dir.parent / ".anylaunch")
    assert hydra(config_name="my_job").name == "my_job"


@pytest.mark.usefixtures("with_hydra")
@pytest.mark.parametrize(
    ("overrides", "config_name", "field", "words"),
    [
        (["nokey=1"], "my_job", "overrides", "+nokey=1"),
        (["role.num_replicas"], "my_job", "overrides", "missing EQUAL"),
        (["role.num_replicas=0"], "my_job", "app._target_", "num_replicas"),
        ([], "not_an_app", "not_an_app.app", "does not build an AppDef"),
        ([], "no_app", "app", "no app key"),
    ],
)
def test_bad_configs_and_overrides_name_the_field(
    config_dir: Path, overrides: list[str], config_name: str, field: str, words: str
) -> None:
    with pytest.raises(InvalidSpecError) as info:
        hydra(*overrides, config_name=config_name, config_dir=str(config_dir))
    assert info.value.field == field
    assert words in str(info.value)
    assert "\n" not in str(info.value)  # one line in a terminal or a task log


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runner]:
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    with get_runner() as runner:
        yield runner


@pytest.mark.usefixtures("with_hydra")
def test_runs_for_real_on_local_cwd_from_the_command_line_form(
    config_dir: Path, runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(config_dir)  # the role's image "." is the current directory
    app = materialize_appdef(
        hydra, ["--config_name", "my_job", "--config_dir", ".", "--", "role.num_replicas=2"]
    )
    handle = runner.run(app, "local_cwd")
    status = runner.wait(handle, wait_interval=0.1)
    assert status is not None and status.state == AppState.SUCCEEDED
    app_id = handle.rsplit("/", 1)[-1]
    for k in range(2):
        lines = [line.strip() for line in runner.log_lines(handle, "trainer", k)]
        assert lines == [f"hello {app_id} {k}"]
