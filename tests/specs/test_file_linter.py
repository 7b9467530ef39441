import ast
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.file_linter import (
    ArgTypeValidator,
    ComponentFunctionValidator,
    LinterMessage,
    ReturnTypeValidator,
    get_fn_docstring,
    parse_fn_docstring,
    validate,
)

FIXTURES = Path(__file__).parent / "fixtures" / "components"
# python -OO strips docstrings (the -OO behaviour itself is tested in a subprocess)
NEEDS_DOCSTRINGS = pytest.mark.skipif(sys.flags.optimize >= 2, reason="docstrings stripped")
OLD_STYLE = FIXTURES / "old_style.py"
NEW_STYLE = FIXTURES / "new_style.py"
INVALID = FIXTURES / "invalid.py"


def _line_of(path: Path, needle: str) -> int:
    """1-based number of the first line of ``path`` containing ``needle``."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


def _fn(source: str) -> ast.FunctionDef:
    node = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


# --------------------------------------------------------------------------------------------
# validate() on fixture files
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "function"),
    [
        (OLD_STYLE, "trainer"),
        (OLD_STYLE, "echo"),
        (NEW_STYLE, "trainer"),
        (NEW_STYLE, "flags"),
        (NEW_STYLE, "not_an_app"),  # statically fine: it *claims* to return an AppDef
    ],
)
def test_valid_components_in_both_typing_styles_pass(path: Path, function: str) -> None:
    assert validate(str(path), function) == []


def test_validate_accepts_a_path_object() -> None:
    assert validate(NEW_STYLE, "trainer") == []


def test_missing_docstring_is_an_error() -> None:
    [message] = validate(str(INVALID), "no_docstring")
    assert message.severity == "error"
    assert "must have google-style docs" in message.description
    assert "'no_docstring'" in message.description
    assert message.line == _line_of(INVALID, "def no_docstring")


def test_missing_annotation_names_the_argument_and_its_line() -> None:
    [message] = validate(str(INVALID), "missing_annotation")
    assert "'msg'" in message.description
    assert "missing type annotation" in message.description
    assert message.line == _line_of(INVALID, "def missing_annotation")
    assert message.char == len("def missing_annotation(")


def test_missing_return_annotation() -> None:
    [message] = validate(str(INVALID), "missing_return")
    assert message.name == "ReturnTypeValidator"
    assert "no return annotation" in message.description
    assert "AppDef" in message.description


def test_wrong_return_annotation_shows_what_was_found() -> None:
    [message] = validate(str(INVALID), "wrong_return")
    assert "'dict[str, str]'" in message.description
    assert message.line == _line_of(INVALID, "def wrong_return")


def test_every_unsupported_parameter_is_reported_once() -> None:
    messages = validate(str(INVALID), "unsupported_types")
    reported = {m.description.split("'")[1] for m in messages}
    assert reported == {"a", "b", "c", "d", "e", "rest", "f", "kw"}
    assert all(m.name == "ArgTypeValidator" for m in messages)
    by_arg = {m.description.split("'")[1]: m for m in messages}
    assert "set[str]" in by_arg["a"].description
    assert "bare 'list'" in by_arg["d"].description
    assert "not a valid type expression" in by_arg["e"].description
    assert "**kwargs" in by_arg["kw"].description
    assert by_arg["c"].line == _line_of(INVALID, "c: dict[str, Any]")


def test_missing_function_suggests_a_close_name() -> None:
    [message] = validate(str(NEW_STYLE), "trainr")
    assert "'trainr' not found" in message.description
    assert "Did you mean 'trainer'?" in message.description


def test_only_top_level_functions_are_components() -> None:
    [message] = validate(str(INVALID), "nested")
    assert "not found" in message.description


def test_async_function_is_rejected() -> None:
    [message] = validate(str(INVALID), "async_component")
    assert "async" in message.description


def test_missing_file_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    [message] = validate(str(tmp_path / "nope.py"), "f")
    assert "no such file" in message.description
    assert message.severity == "error"


def test_directory_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    [message] = validate(str(tmp_path), "f")
    assert "cannot be read" in message.description


def test_syntax_error_reports_its_position(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("from anylaunch.specs import AppDef\n\ndef f(x: int -> AppDef:\n    pass\n")
    [message] = validate(str(path), "f")
    assert "syntax error" in message.description
    assert message.line == 3
    assert message.char > 0


def test_bad_function_name_raises_invalid_spec_error() -> None:
    with pytest.raises(InvalidSpecError, match="component_function"):
        validate(str(NEW_STYLE), "dist.ddp")


def test_last_definition_wins(tmp_path: Path) -> None:
    path = tmp_path / "twice.py"
    path.write_text('def f(x) -> AppDef:\n    "Old."\n\ndef f(x: int) -> AppDef:\n    "New."\n')
    assert validate(str(path), "f") == []


def test_custom_validators_replace_the_defaults(tmp_path: Path) -> None:
    class NameValidator(ComponentFunctionValidator):
        def validate(self, fn: ast.FunctionDef) -> list[LinterMessage]:
            if fn.name.islower():
                return []
            return [self._message("component names are lower case", fn)]

    path = tmp_path / "c.py"
    path.write_text("def Echo(x):\n    pass\n")  # no docs, no annotations
    [message] = validate(str(path), "Echo", validators=[NameValidator()])
    assert message.name == "NameValidator"
    assert message.line == 1
    assert validate(str(path), "Echo", validators=[]) == []


# --------------------------------------------------------------------------------------------
# Validators on single functions
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "annotation",
    [
        "str",
        "int",
        "float",
        "bool",
        "list[str]",
        "List[int]",
        "typing.List[float]",
        "list[bool]",
        "dict[str, str]",
        "Dict[str, int]",
        "t.Dict[int, float]",
        "Optional[str]",
        "typing.Optional[Dict[str, str]]",
        "Optional[List[str]]",
        "str | None",
        "None | int",
        "list[str] | None",
        "dict[str, str] | None",
        "Union[str, None]",
        "Union[None, List[str]]",
        "'str'",
        "'list[str] | None'",
        "'Optional[Dict[str, str]]'",
        "Optional['int']",
        "list['str']",
    ],
)
def test_supported_annotations(annotation: str) -> None:
    fn = _fn(f"def f(x: {annotation}, *, y: {annotation}) -> AppDef: ...")
    assert ArgTypeValidator().validate(fn) == []


@pytest.mark.parametrize(
    "annotation",
    [
        "set[str]",
        "list",
        "Dict",
        "list[list[str]]",
        "dict[str, list[str]]",
        "dict[str]",
        "list[str, int]",
        "Union[str, int]",
        "Optional[set[str]]",
        "str | int",
        "Any",
        "'no such'",
        "MyConfig",
    ],
)
def test_unsupported_annotations(annotation: str) -> None:
    fn = _fn(f"def f(x: {annotation}) -> AppDef: ...")
    [message] = ArgTypeValidator().validate(fn)
    assert "'x'" in message.description
    assert "Fix:" in message.description


def test_vararg_must_be_a_primitive() -> None:
    assert ArgTypeValidator().validate(_fn("def f(*args: str) -> AppDef: ...")) == []
    [message] = ArgTypeValidator().validate(_fn("def f(*args: list[str]) -> AppDef: ..."))
    assert "'args'" in message.description
    [message] = ArgTypeValidator().validate(_fn("def f(*args) -> AppDef: ..."))
    assert "missing type annotation" in message.description


def test_positional_only_and_keyword_only_are_checked() -> None:
    messages = ArgTypeValidator().validate(_fn("def f(a, /, b: int, *, c) -> AppDef: ..."))
    assert [m.description.split("'")[1] for m in messages] == ["a", "c"]


@pytest.mark.parametrize(
    "returns",
    [
        "AppDef",
        "specs.AppDef",
        "anylaunch.specs.AppDef",
        "anylaunch.specs.api.AppDef",
        "'AppDef'",
        "'specs.AppDef'",
        "'anylaunch.specs.api.AppDef'",
    ],
)
def test_accepted_return_annotations(returns: str) -> None:
    assert ReturnTypeValidator().validate(_fn(f"def f() -> {returns}: ...")) == []


@pytest.mark.parametrize(
    "returns", ["Role", "other.AppDef", "'AppDeff'", "Optional[AppDef]", "None", "'('"]
)
def test_rejected_return_annotations(returns: str) -> None:
    [message] = ReturnTypeValidator().validate(_fn(f"def f() -> {returns}: ..."))
    assert "Fix: annotate it as -> AppDef" in message.description


# --------------------------------------------------------------------------------------------
# Docstrings
# --------------------------------------------------------------------------------------------


def test_parse_description_and_args_with_types_and_continuations() -> None:
    description, args = parse_fn_docstring(
        """Runs a job.

        Longer text that spans
        two lines.

        Args:
            name: the job name
            replicas (int): how many
                replicas to run,
                at most 8
            env (Dict[str, str], optional): environment: KEY=value pairs
            *args: passed to the script
            **kwargs: ignored

        Returns:
            the app

        Raises:
            ValueError: not an argument
        """
    )
    assert description == "Runs a job.\n\nLonger text that spans\ntwo lines."
    assert args == {
        "name": "the job name",
        "replicas": "how many replicas to run, at most 8",
        "env": "environment: KEY=value pairs",
        "args": "passed to the script",
        "kwargs": "ignored",
    }


@pytest.mark.parametrize("header", ["Args:", "Arguments:", "Parameters:", "Keyword Args:"])
def test_every_argument_section_header_is_recognised(header: str) -> None:
    _, args = parse_fn_docstring(f"Desc.\n\n{header}\n    x: the x\n")
    assert args == {"x": "the x"}


def test_description_on_the_next_line_and_blank_lines_inside_an_entry() -> None:
    _, args = parse_fn_docstring(
        "Desc.\n\nArgs:\n    x:\n        first part\n\n        second part\n    y: why\n"
    )
    assert args == {"x": "first part second part", "y": "why"}


def test_no_description_only_sections() -> None:
    assert parse_fn_docstring("Args:\n    x: the x\n") == ("", {"x": "the x"})
    assert parse_fn_docstring("Args:\n    x: the x\nReturns:\n    app\n") == ("", {"x": "the x"})
    assert parse_fn_docstring("Args:\nx: the x\nReturns:\napp\n") == ("", {"x": "the x"})


def test_example_section_is_not_part_of_the_description() -> None:
    description, args = parse_fn_docstring(
        "Desc.\n\nExample:\n    x: not an arg\n\nArgs:\n    y: an arg\n"
    )
    assert description == "Desc."
    assert args == {"y": "an arg"}


def test_unknown_colon_lines_stay_in_the_description() -> None:
    description, _ = parse_fn_docstring("Desc.\n\nUsage:\n    anylaunch run x\n")
    assert description == "Desc.\n\nUsage:\n    anylaunch run x"


@NEEDS_DOCSTRINGS
def test_get_fn_docstring_appends_required_and_default_info() -> None:
    def comp(script: str, *args: str, nnodes: int = 2, env: str = "", tag: str | None = None):  # type: ignore[no-untyped-def]
        """Does things.

        Args:
            script: the script
            nnodes: number of nodes
        """

    description, args = get_fn_docstring(comp)
    assert description == "Does things."
    assert args == {
        "script": "the script (required)",
        "args": "args (optional)",
        "nnodes": "number of nodes (default: 2)",
        "env": "env (default: '')",
        "tag": "tag (default: None)",
    }


@NEEDS_DOCSTRINGS
def test_get_fn_docstring_drops_documented_args_that_do_not_exist() -> None:
    def comp(x: int) -> None:
        """Desc.

        Args:
            x: the x
            y: gone
        """

    assert get_fn_docstring(comp)[1] == {"x": "the x (required)"}


def test_no_docstring_gives_name_and_tip() -> None:
    def my_component(x: int, y: str = "a") -> None:
        pass

    description, args = get_fn_docstring(my_component)
    assert description.startswith("my_component TIP:")
    assert "docstring" in description
    assert args == {"x": "x (required)", "y": "y (default: a)"}


@NEEDS_DOCSTRINGS
def test_docstring_with_only_sections_falls_back_to_the_tip() -> None:
    def comp(x: int) -> None:
        """Args:
        x: the x
        """

    description, args = get_fn_docstring(comp)
    assert description.startswith("comp TIP:")
    assert args == {"x": "the x (required)"}


def test_get_fn_docstring_rejects_non_callables() -> None:
    with pytest.raises(InvalidSpecError, match="not callable"):
        get_fn_docstring("echo")  # type: ignore[arg-type]


@NEEDS_DOCSTRINGS
def test_fixture_docstrings_parse() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("old_style_fixture", OLD_STYLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description, args = get_fn_docstring(module.trainer)
    assert description.startswith("Trains a model with a script.\nUsage:")
    assert args["lr"] == "learning rate (default: 0.1)"
    assert args["script_args"] == "arguments passed to the script (optional)"
    assert set(args) == set(inspect.signature(module.trainer).parameters)


def test_docstrings_stripped_by_python_OO_do_not_crash() -> None:
    code = textwrap.dedent(
        f"""
        import importlib.util
        from anylaunch.specs.file_linter import get_fn_docstring, validate
        spec = importlib.util.spec_from_file_location("m", {str(NEW_STYLE)!r})
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        assert m.flags.__doc__ is None, "-OO should strip docstrings"
        desc, args = get_fn_docstring(m.flags)
        print(desc.split()[0], args["dry_run"], args["verbose"], sep="|")
        print(validate({str(NEW_STYLE)!r}, "flags"))
        """
    )
    result = subprocess.run(
        [sys.executable, "-OO", "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first == "flags|dry_run (required)|verbose (default: True)"
    assert second == "[]"  # the linter reads the source, not __doc__
