"""Option aliases declared with ``Annotated[T, "-x"]`` (TorchX's builders and linter): the
command line reads them besides ``--name``, the linter accepts the annotation, and a bad alias
is an error naming the parameter."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Annotated, Optional

import pytest

import anylaunch.specs as specs
from anylaunch.components import get_component
from anylaunch.specs.builders import (
    ComponentArgsError,
    ComponentTypeError,
    materialize_appdef,
    parse_args,
)
from anylaunch.specs.file_linter import ArgTypeValidator, validate


def aliased(
    *rest: str,
    config_name: Annotated[str, "-cn"],
    config_dir: Annotated[str, "-cd", "not an alias"] = ".conf",
    n: Optional[Annotated[int, "-N"]] = None,
    x: int = 1,
) -> specs.AppDef:
    """Echoes its arguments.

    Args:
        rest: more arguments
        config_name: a name
        config_dir: a directory
        n: a count
        x: a one-letter parameter
    """
    args = [config_name, config_dir, str(n), str(x), *rest]
    role = specs.Role("r", image=".", entrypoint="echo", args=args)
    return specs.AppDef("aliased", [role])


def test_aliases_and_long_names_both_parse() -> None:
    short = parse_args(aliased, ["-cn", "job", "-cd", "dir", "-N", "3", "-x", "2", "--", "a=b"])
    assert (short.config_name, short.config_dir, short.n, short.x) == ("job", "dir", 3, 2)
    assert short.rest == ["a=b"]
    long = parse_args(aliased, ["--config_name", "job", "--config-dir=d"])
    assert (long.config_name, long.config_dir, long.n) == ("job", "d", None)
    app = materialize_appdef(aliased, ["-cn", "j", "--", "more"])
    assert app.roles[0].args == ["j", ".conf", "None", "1", "more"]


def test_a_required_aliased_option_names_both_spellings_when_missing() -> None:
    with pytest.raises(ComponentArgsError) as e:
        parse_args(aliased, ["-cd", "dir"])
    assert "-cn/--config_name" in str(e.value)


def test_a_malformed_alias_is_an_error_naming_the_parameter() -> None:
    def bad(name: Annotated[str, "-bad alias"]) -> specs.AppDef:
        """Bad.

        Args:
            name: a name
        """
        return specs.AppDef("bad", [])

    with pytest.raises(ComponentTypeError) as e:
        parse_args(bad, ["--name", "x"])
    assert "bad(name)" in str(e.value) and "'-bad alias'" in str(e.value)


def _problems(annotation: str) -> list[str]:
    source = f"def c(p: {annotation}) -> AppDef:\n    ...\n"
    fn = ast.parse(source).body[0]
    assert isinstance(fn, ast.FunctionDef)
    return [m.description for m in ArgTypeValidator().validate(fn)]


@pytest.mark.parametrize(
    "annotation",
    [
        'Annotated[str, "-cn"]',
        'typing.Annotated[list[int], "-l"]',
        'Optional[Annotated[str, "-x"]]',
        'Annotated[Optional[str], "-x"]',
        "'Annotated[dict[str, str], \"-d\"]'",
    ],
)
def test_the_linter_accepts_annotated_types_it_accepts_bare(annotation: str) -> None:
    assert _problems(annotation) == []


@pytest.mark.parametrize(
    ("annotation", "why"),
    [
        ('Annotated[list, "-l"]', "bare 'list'"),
        ('Annotated[object, "-o"]', "unsupported type 'object'"),
        ("Annotated[str]", "must be Annotated[T, metadata, ...]"),
    ],
)
def test_the_linter_still_rejects_what_the_annotation_wraps(annotation: str, why: str) -> None:
    problems = _problems(annotation)
    assert len(problems) == 1 and why in problems[0]


def test_a_component_file_with_aliases_lints_clean(tmp_path: Path) -> None:
    path = tmp_path / "comp.py"
    path.write_text(
        textwrap.dedent(
            '''
            from __future__ import annotations

            from typing import Annotated

            import anylaunch.specs as specs


            def comp(name: Annotated[str, "-n"] = "x") -> specs.AppDef:
                """A component.

                Args:
                    name: a name
                """
                return specs.AppDef("comp", [specs.Role("r", image=".", entrypoint="echo")])
            '''
        )
    )
    assert validate(str(path), "comp") == []


def test_utils_hydra_takes_torchx_short_options() -> None:
    component = get_component("utils.hydra")
    parsed = parse_args(component.fn, ["-cn", "job", "-cd", "conf", "--", "app.name=x"])
    assert (parsed.config_name, parsed.config_dir, parsed.overrides) == (
        "job",
        "conf",
        ["app.name=x"],
    )
    assert component.validation_errors == []
