"""Component discovery: built-ins, files, entry points, lint, did-you-mean, cheap imports."""

import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import anylaunch.components as components
from anylaunch.components import (
    ComponentLoadError,
    ComponentNotFoundException,
    ComponentValidationException,
    dist,
    get_component,
    get_components,
    serve,
    utils,
)
from anylaunch.specs import AppDef
from anylaunch.specs.errors import AnylaunchError
from anylaunch.specs.file_linter import parse_fn_docstring, validate

BUILTINS = {
    "dist.ddp": dist.ddp,
    "dist.spmd": dist.spmd,
    "serve.torchserve": serve.torchserve,
    "utils.binary": utils.binary,
    "utils.booth": utils.booth,
    "utils.copy": utils.copy,
    "utils.echo": utils.echo,
    "utils.hydra": utils.hydra,
    "utils.python": utils.python,
    "utils.sh": utils.sh,
    "utils.touch": utils.touch,
}


def test_builtins_are_exactly_the_component_functions() -> None:
    found = get_components(include_invalid=True)
    builtin_names = {n for n in found if n.split(".")[0] in ("dist", "serve", "utils")}
    assert builtin_names == set(BUILTINS)
    for name, fn in BUILTINS.items():
        assert found[name].fn is fn
        assert found[name].validation_errors == []
    # helpers are not components
    assert "dist.parse_j" not in found
    assert not any(n.startswith("get_component") for n in found)


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_builtin_passes_the_linter_and_documents_every_parameter(name: str) -> None:
    fn = BUILTINS[name]
    assert validate(inspect.getfile(fn), fn.__name__) == []
    description, documented = parse_fn_docstring(inspect.getdoc(fn) or "")
    assert description
    assert set(inspect.signature(fn).parameters) <= set(documented), name
    assert all(documented.values())


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_get_component_by_name(name: str) -> None:
    component = get_component(name)
    assert component.name == name
    assert component.fn is BUILTINS[name]
    assert component.description == (inspect.getdoc(BUILTINS[name]) or "").splitlines()[0]
    assert component.is_valid


def test_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(ComponentNotFoundException) as info:
        get_component("dist.dpp")
    assert isinstance(info.value, AnylaunchError)
    assert isinstance(info.value, LookupError)
    assert "Did you mean 'dist.ddp'?" in str(info.value)
    assert "Fix:" in str(info.value)
    with pytest.raises(ComponentNotFoundException) as info:
        get_component("zzzzzz")
    assert "Did you mean" not in str(info.value)


def test_components_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "my_components.py"
    path.write_text(
        textwrap.dedent(
            '''\
            from __future__ import annotations
            from dataclasses import dataclass
            import anylaunch.specs as specs


            @dataclass
            class Opts:  # needs the module registered in sys.modules while loading
                n: int = 1


            def trainer(n: int = Opts().n, msg: str = "x") -> specs.AppDef:
                """Trains a model.

                Args:
                    n: replicas
                    msg: message
                """
                role = specs.Role("t", image=".", entrypoint="echo", args=[msg], num_replicas=n)
                return specs.AppDef("trainer", roles=[role])


            def undocumented(n: int) -> specs.AppDef:
                return specs.AppDef("u")
            '''
        )
    )
    component = get_component(f"{path}:trainer")
    assert component.name == f"{path}:trainer"
    assert component.description == "Trains a model."
    app = component.fn(n=3, msg="hi")
    assert isinstance(app, AppDef)
    assert (app.roles[0].num_replicas, app.roles[0].args) == (3, ["hi"])

    with pytest.raises(ComponentNotFoundException, match="Did you mean 'trainer'"):
        get_component(f"{path}:trainr")
    with pytest.raises(ComponentNotFoundException, match="does not exist"):
        get_component(f"{tmp_path / 'missing.py'}:trainer")
    with pytest.raises(ComponentValidationException, match="google-style docs") as info:
        get_component(f"{path}:undocumented")
    assert info.value.component.validation_errors


def test_a_file_that_fails_to_import_raises_its_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("raise RuntimeError('boom at import')\n")
    with pytest.raises(ComponentLoadError, match="line 1: RuntimeError: boom at import") as err:
        get_component(f"{path}:anything")
    assert isinstance(err.value.error, RuntimeError)  # the original error is kept


def test_bad_names() -> None:
    with pytest.raises(ComponentNotFoundException):
        get_component("")
    with pytest.raises(ComponentNotFoundException, match="not a function name"):
        get_component(f"{__file__}:not-an-identifier")


def run_python(code: str, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pythonpath), *sys.path])}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )


COMPONENT_SRC = '''\
import anylaunch.specs as specs


def {name}(msg: str = "{msg}") -> specs.AppDef:
    """Component {name} from {where}.

    Args:
        msg: message
    """
    return specs.AppDef("{name}", roles=[specs.Role("r", image=".", entrypoint="echo", args=[msg])])
'''


def test_entry_point_components(tmp_path: Path) -> None:
    pkg = tmp_path / "mypkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "components.py").write_text(
        COMPONENT_SRC.format(name="train", msg="m", where="components")
        + "\n\ndef helper() -> str:\n    return 'not a component'\n"
    )
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "deep.py").write_text(COMPONENT_SRC.format(name="eval", msg="d", where="deep"))
    (pkg / "sub" / "broken_mod.py").write_text("import does_not_exist_either\n")
    (pkg / "flat.py").write_text(COMPONENT_SRC.format(name="flat_fn", msg="f", where="flat"))
    # replaces the built-in utils.echo
    (pkg / "override.py").write_text(COMPONENT_SRC.format(name="echo", msg="o", where="override"))
    dist_info = tmp_path / "mypkg-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: mypkg\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(
        textwrap.dedent(
            """\
            [anylaunch.components]
            foo = mypkg
            _ = mypkg.flat
            single = mypkg.components:train
            utils = mypkg.override
            broken = mypkg.does_not_exist
            """
        )
    )
    code = textwrap.dedent(
        """\
        import json
        from anylaunch.components import get_component, get_components
        found = get_components()
        print(json.dumps({
            "names": sorted(found),
            "descriptions": {n: c.description for n, c in found.items()},
            "single_args": get_component("single").fn().roles[0].args,
            "echo_args": get_component("utils.echo").fn().roles[0].args,
        }))
        """
    )
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    names = set(out["names"])
    assert {"foo.components.train", "foo.sub.deep.eval", "flat_fn", "single"} <= names
    assert {"dist.ddp", "utils.sh", "utils.echo"} <= names  # built-ins stay
    assert not any("helper" in n for n in names)
    assert out["descriptions"]["foo.sub.deep.eval"] == "Component eval from deep."
    assert out["descriptions"]["utils.echo"] == "Component echo from override."
    assert out["single_args"] == ["m"]
    assert out["echo_args"] == ["o"]
    # a broken plugin or module is skipped with a warning, not fatal
    assert "mypkg.does_not_exist" in result.stderr
    assert "mypkg.sub.broken_mod" in result.stderr


def test_importing_components_is_cheap(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """\
        import sys, json
        import anylaunch.components
        import anylaunch.components.dist, anylaunch.components.utils, anylaunch.components.serve
        heavy = ("fsspec", "yaml", "importlib.metadata", "http.server", "urllib.request")
        print(json.dumps([m for m in heavy if m in sys.modules]))
        """
    )
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_default_image_is_a_local_directory() -> None:
    assert os.path.isdir(components.DEFAULT_IMAGE)
    assert utils.echo().roles[0].image == components.DEFAULT_IMAGE


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f(:\n    pass\n", "line 1: SyntaxError"),
        ("x = 1\nimport no_such_module_anywhere\n", "line 2: ModuleNotFoundError"),
        ("import sys\n\nsys.exit(3)\n", "line 3 called sys.exit(3)"),
        ("raise SystemExit\n", "called sys.exit(None)"),
    ],
    ids=["syntax error", "import error", "sys.exit", "SystemExit"],
)
def test_a_broken_component_file_is_one_clear_error(
    tmp_path: Path, source: str, expected: str
) -> None:
    path = tmp_path / "broken.py"
    path.write_text(source)
    with pytest.raises(ComponentLoadError) as err:
        get_component(f"{path}:f")
    message = str(err.value)
    assert str(path) in message and expected in message
    assert "\n" not in message


def test_the_cli_reports_a_broken_component_file_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "exits.py"
    path.write_text("import sys\nsys.exit(3)\n")
    result = subprocess.run(
        [sys.executable, "-m", "anylaunch.cli.main", "run", "--dryrun", f"{path}:f"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 1  # an error of ours, not the file's exit code 3
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"{path}, line 2 called sys.exit(3)" in line
