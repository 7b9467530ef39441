"""What the TorchX names added for issue 31 do, beyond importing (``tests/test_torchx_names.py``
checks the names): workspace walking and pinning, the component runner, the configured
trackers, the ``NULL``/``MISSING`` named resources, ``is_started``, the file linter's and the
finder's helpers, and the CLI's subcommand description."""

from __future__ import annotations

import argparse
import ast
import inspect
import os
from pathlib import Path

import fsspec
import pytest

import anylaunch.specs as specs
from anylaunch.components import ComponentValidationException
from anylaunch.components.utils import echo
from anylaunch.runner import get_runner
from anylaunch.runner.api import ComponentRunner, get_component_runner, get_configured_trackers
from anylaunch.specs import AppDef, AppState, Role, Workspace
from anylaunch.specs.api import is_started
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.file_linter import (
    AnylaunchArgumentHelpFormatter,
    ComponentFnVisitor,
    ComponentFunctionValidator,
    DocstringValidator,
    LinterMessage,
    get_generic_type,
    get_optional_type,
    is_primitive,
)
from anylaunch.specs.finder import get_builtin_source, module_relname
from anylaunch.tracker.backend.fsspec import generate_filename
from anylaunch.workspace import pin_workspace_images, walk_workspace

# ---- workspace ----


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _walked(root: Path) -> tuple[list[str], list[str]]:
    fs = fsspec.filesystem("file")
    dirs, files = [], []
    for directory, _, found in walk_workspace(fs, str(root)):
        rel = os.path.relpath(directory, root)
        dirs.append(rel)
        files += [os.path.normpath(os.path.join(rel, f)) for f in found]
    return sorted(dirs), sorted(files)


def test_walk_workspace_leaves_out_what_the_ignore_file_lists(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "train.py": "",
            "notes.log": "",
            "keep.log": "",
            "data/big.csv": "",
            "data/small.csv": "",
            "build/out.bin": "",
            "src/pkg/mod.py": "",
            "Dockerfile.anylaunch": "",
            ".anylaunchignore": (
                "# comments and blank lines are skipped\n\n"
                "*.log\n!keep.log\nbuild\ndata/*.csv\n!data/small.csv\n*.anylaunch\n"
            ),
        },
    )
    dirs, files = _walked(tmp_path)
    assert "build" not in dirs  # an ignored directory is not entered
    assert files == [
        ".anylaunchignore",
        "Dockerfile.anylaunch",  # never ignored: a Docker workspace builds with it
        "data/small.csv",  # un-ignored by a later ! line
        "keep.log",
        "src/pkg/mod.py",
        "train.py",
    ]


def test_walk_workspace_without_an_ignore_file_walks_everything(tmp_path: Path) -> None:
    _tree(tmp_path, {"a.py": "", "sub/b.log": ""})
    assert _walked(tmp_path)[1] == ["a.py", "sub/b.log"]
    # another ignore file name is read instead
    _tree(tmp_path, {".myignore": "sub\n"})
    fs = fsspec.filesystem("file")
    found = [f for _, _, files in walk_workspace(fs, str(tmp_path), ".myignore") for f in files]
    assert sorted(found) == [".myignore", "a.py"]


def test_pin_workspace_images_points_matching_roles_at_their_built_image() -> None:
    ws, other = Workspace({"/src": ""}), Workspace({"/other": ""})
    app = AppDef(
        "a",
        roles=[
            Role("built", image="base", workspace=ws),
            Role("other_base", image="base2", workspace=ws),  # same workspace, other image
            Role("unbuilt", image="base", workspace=other),
            Role("no_ws", image="prebuilt"),
        ],
    )
    pin_workspace_images(app, {("base", ws): "base@sha256:1", ("base2", other): "x"})
    assert [(r.image, r.workspace) for r in app.roles] == [
        ("base@sha256:1", None),
        ("base2", ws),
        ("base", other),
        ("prebuilt", None),
    ]


# ---- runner ----


def test_component_runner_applies_its_defaults_over_the_runners() -> None:
    runner = get_runner(component_defaults={"utils.echo": {"msg": "from-runner"}})
    with ComponentRunner(runner, {"utils.sh": {"num_replicas": "2"}}) as cr:
        assert cr.runner is runner
        echo = cr.dryrun_component("utils.echo", [], "local_cwd")
        assert echo.app is not None and echo.app.roles[0].args == ["from-runner"]
        given = cr.dryrun_component("utils.echo", {"msg": "given"}, "local_cwd")
        assert given.app is not None and given.app.roles[0].args == ["given"]
    cr2 = ComponentRunner(get_runner(), {"utils.echo": {"msg": "mine"}})
    info = cr2.dryrun_component("utils.echo", ["--msg", "cli"], "local_cwd")
    assert info.app is not None and info.app.roles[0].args == ["cli"]  # the CLI wins
    info = cr2.dryrun_component("utils.echo", [], "local_cwd")
    assert info.app is not None and info.app.roles[0].args == ["mine"]
    cr2.close()


def test_component_runner_runs_a_component(tmp_path: Path) -> None:
    with get_component_runner("cr", state_dir=str(tmp_path)) as cr:
        handle = cr.run_component("utils.echo", {"msg": "ran"}, "local_cwd")
        assert handle.startswith("local_cwd://cr/")
        status = cr.runner.wait(handle, wait_interval=0.5, timeout=60)
        assert status is not None and status.state == AppState.SUCCEEDED


def test_component_runner_refuses_what_is_not_a_runner() -> None:
    with pytest.raises(InvalidSpecError, match="must be a Runner"):
        ComponentRunner("local_cwd")  # type: ignore[arg-type]


def test_get_configured_trackers_reads_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / ".anylaunchconfig"
    config.write_text(
        f"[anylaunch:tracker]\nfsspec = fsspec\n\n[tracker:fsspec]\nconfig = {tmp_path}\n"
    )
    monkeypatch.setenv("ANYLAUNCHCONFIG", str(config))
    monkeypatch.delenv("ANYLAUNCH_TRACKERS", raising=False)
    assert get_configured_trackers() == {"fsspec": str(tmp_path)}
    monkeypatch.setenv("ANYLAUNCH_TRACKERS", "")  # the variable wins: no trackers
    assert get_configured_trackers() == {}


# ---- specs ----


def test_is_started_holds_for_running_and_terminal_states_only() -> None:
    started = {s for s in AppState if is_started(s)}
    assert started == {AppState.RUNNING, AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED}


def test_the_null_named_resources_are_copies_of_the_placeholder() -> None:
    for name in ("NULL", "MISSING"):
        res = specs.resource(h=name)
        assert res.is_null() and (res.cpu, res.gpu, res.memMB) == (-1, -1, -1)
        assert res.get_resource_name() == name and res is not specs.NULL_RESOURCE
        res.capabilities["x"] = 1  # a caller's edit never reaches the placeholder
        assert specs.NULL_RESOURCE.capabilities == {} and specs.NULL_RESOURCE.tags == {}


# ---- file linter and finder ----


def _annotation(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def test_the_annotation_helpers_read_the_ast() -> None:
    assert is_primitive(_annotation("str")) and not is_primitive(_annotation("list[str]"))
    assert ast.unparse(get_generic_type(_annotation("dict[str, int]"))) == "(str, int)"
    with pytest.raises(InvalidSpecError, match="not a subscripted type"):
        get_generic_type(_annotation("int"))
    assert ast.unparse(get_optional_type(_annotation("typing.Optional[int]")) or _annotation("0"))
    assert get_optional_type(_annotation("list[int]")) is None
    assert get_optional_type(_annotation("int | str")) is None


def test_component_fn_visitor_runs_given_validators_on_the_named_function() -> None:
    class NoUnderscore(ComponentFunctionValidator):
        def validate(self, fn: ast.FunctionDef) -> list[LinterMessage]:
            return [self._message("has _", fn)] if "_" in fn.name else []

    module = ast.parse("def my_fn(a: int) -> AppDef: ...\ndef other(x) -> int: ...")
    visitor = ComponentFnVisitor("my_fn", [NoUnderscore(), DocstringValidator()])
    visitor.visit(module)
    assert visitor.visited_function
    assert [m.description.split(".")[0] for m in visitor.linter_errors] == [
        "has _",
        "Function 'my_fn' must have google-style docs",
    ]
    missing = ComponentFnVisitor("absent", None)
    missing.visit(module)
    assert not missing.visited_function and missing.linter_errors == []


def test_the_help_formatter_marks_required_and_defaults() -> None:
    parser = argparse.ArgumentParser(prog="c", formatter_class=AnylaunchArgumentHelpFormatter)
    parser.add_argument("--need", required=True, help="needed")
    parser.add_argument("--pct", default="50%", help="share")
    text = parser.format_help()
    assert "needed (required)" in text and "share (default: 50%)" in text
    assert "show this help message and exit\n" in text  # --help itself is left alone


def test_get_builtin_source_is_a_template_with_its_imports() -> None:
    source = get_builtin_source("utils.echo")
    head, _, body = source.partition("def echo(")
    assert "import anylaunch.specs as specs" in head and "def " not in head
    assert "return" in body
    # the function's source, as in its file; module-level helpers are not copied (as TorchX)
    assert body.rstrip("\n").endswith(inspect.getsource(echo).rstrip("\n")[-40:])


def test_get_builtin_source_checks_the_given_validators() -> None:
    class Refuse(ComponentFunctionValidator):
        def validate(self, fn: ast.FunctionDef) -> list[LinterMessage]:
            return [self._message("refused", fn)]

    with pytest.raises(ComponentValidationException, match="refused"):
        get_builtin_source("utils.echo", [Refuse()])


def test_module_relname_refuses_a_module_outside_the_package() -> None:
    import anylaunch.components as components
    import anylaunch.specs.api as api

    with pytest.raises(InvalidSpecError, match="is not a submodule"):
        module_relname(api, relative_to=components)


# ---- schedulers ----


def test_has_docker_asks_the_engine() -> None:
    from anylaunch.schedulers.docker_scheduler import has_docker

    assert has_docker()  # the provisioned engine ($DOCKER_HOST)
    assert not has_docker("unix:///nonexistent/docker.sock")
    assert not has_docker("tcp://127.0.0.1:9")  # nothing listens on the discard port


# ---- tracker and CLI ----


def test_generate_filename_sorts_in_creation_order() -> None:
    names = [generate_filename() for _ in range(50)]
    assert names == sorted(names) and len(set(names)) == 50


def test_the_help_describes_the_subcommands() -> None:
    from anylaunch.cli.main import create_parser, get_sub_cmds

    text = create_parser(get_sub_cmds()).format_help()
    words = " ".join(text.split())  # argparse wraps the description
    assert "subcommands: Use the following commands to run operations, e.g.: anylaunch run" in words
