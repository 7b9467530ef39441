"""file_linter parity with TorchX: components under if blocks, tuple parameters, and the
description get_fn_docstring builds (summary, newline, long description)."""

import textwrap
from pathlib import Path

import pytest

from anylaunch.specs.file_linter import LinterMessage, get_fn_docstring, validate


def _write(tmp_path: Path, source: str) -> str:
    path = tmp_path / "comp.py"
    path.write_text(textwrap.dedent(source))
    return str(path)


def _descriptions(messages: list[LinterMessage]) -> list[str]:
    return [m.description for m in messages]


# --------------------------------------------------------------------------------------------
# where the component is defined
# --------------------------------------------------------------------------------------------


def test_component_under_an_if_block_is_found(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
        import sys
        from anylaunch.specs import AppDef

        if sys.version_info >= (3, 10):
            def echo(msg: str) -> AppDef:
                "Echoes."
        """,
    )
    assert validate(path, "echo") == []


def test_both_branches_of_an_if_are_checked(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
        import os
        if os.environ.get("X"):
            def echo(msg: str) -> AppDef:
                "Echoes."
        else:
            def echo(msg: set[str]) -> AppDef:
                "Echoes."
        """,
    )
    [message] = validate(path, "echo")
    assert "Argument 'msg'" in message.description
    assert message.line == 7


@pytest.mark.parametrize(
    "block",
    [
        "try:\n    {fn}\nexcept ImportError:\n    pass\n",
        "try:\n    pass\nexcept ImportError:\n    {fn}\n",
        "with open(__file__):\n    {fn}\n",
        "if False:\n    pass\nelif True:\n    {fn}\n",
        "for _ in range(1):\n    {fn}\n",
        "match 1:\n    case 1:\n        {fn}\n",
    ],
)
def test_component_in_other_module_level_blocks_is_found(tmp_path: Path, block: str) -> None:
    indent = "        " if "case" in block else "    "
    fn = f'def echo(msg: str) -> AppDef:\n{indent}    "Echoes."'
    (tmp_path / "comp.py").write_text(block.format(fn=fn))
    assert validate(str(tmp_path / "comp.py"), "echo") == []


def test_functions_inside_functions_and_classes_are_not_components(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
        def outer() -> None:
            def echo(msg: str) -> AppDef:
                "Echoes."

        class C:
            def echo(self, msg: str) -> AppDef:
                "Echoes."
        """,
    )
    [message] = validate(path, "echo")
    assert "not found" in message.description


def test_a_later_definition_in_the_same_block_shadows_an_earlier_one(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
        import os
        if os.environ.get("X"):
            def echo(msg) -> AppDef:
                "Old."
        def echo(msg: str) -> AppDef:
            "New."
        """,
    )
    assert validate(path, "echo") == []


def test_not_found_suggests_a_function_defined_under_if(tmp_path: Path) -> None:
    path = _write(tmp_path, 'if True:\n    def trainer(x: int) -> AppDef:\n        "T."\n')
    [message] = validate(path, "trainr")
    assert "Did you mean 'trainer'?" in message.description


# --------------------------------------------------------------------------------------------
# tuple parameters
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "annotation",
    [
        "tuple[int, str]",
        "Tuple[int, str, float]",
        "typing.Tuple[bool, int]",
        "tuple[int]",
        "tuple[str, ...]",
        "Optional[tuple[int, int]]",
        "tuple[int, int] | None",
        "'tuple[float, float]'",
    ],
)
def test_tuple_parameters_are_accepted(tmp_path: Path, annotation: str) -> None:
    path = _write(tmp_path, f'def f(x: {annotation}) -> AppDef:\n    "F."\n')
    assert validate(path, "f") == []


@pytest.mark.parametrize(
    ("annotation", "problem"),
    [
        ("tuple", "no element type"),
        ("tuple[list[int], int]", "is not one of str, int, float, bool"),
        ("tuple[int, dict[str, str]]", "is not one of str, int, float, bool"),
        ("tuple[int, str, ...]", "must list its element types"),
        ("tuple[()]", "must list its element types"),
        ("tuple[...]", "must list its element types"),
    ],
)
def test_bad_tuple_parameters_are_reported(tmp_path: Path, annotation: str, problem: str) -> None:
    path = _write(tmp_path, f'def f(x: {annotation}) -> AppDef:\n    "F."\n')
    [message] = validate(path, "f")
    assert "Argument 'x'" in message.description
    assert problem in message.description


# --------------------------------------------------------------------------------------------
# get_fn_docstring's description
# --------------------------------------------------------------------------------------------


def test_description_is_summary_newline_long_description() -> None:
    def train(lr: float = 0.1) -> None:
        """Trains a model.

        Uses DDP across nodes.

        Scales well.

        Args:
            lr: learning rate
        """

    description, args = get_fn_docstring(train)
    assert description == "Trains a model.\nUses DDP across nodes.\n\nScales well."
    assert args == {"lr": "learning rate (default: 0.1)"}


def test_summary_only() -> None:
    def echo(msg: str) -> None:
        """Echoes a message.

        Args:
            msg: the message
        """

    assert get_fn_docstring(echo)[0] == "Echoes a message."


def test_long_description_right_after_the_summary() -> None:
    def echo() -> None:
        """Echoes
        a message."""

    assert get_fn_docstring(echo)[0] == "Echoes\na message."


def test_no_docstring_gives_the_name_and_a_tip() -> None:
    def echo(msg: str) -> None:
        pass

    description, args = get_fn_docstring(echo)
    assert description.startswith("echo TIP:")
    assert args == {"msg": "msg (required)"}
