"""TorchX's smaller public helpers of ``torchx.specs.file_linter``: the annotation helpers,
the visitor that finds a component and runs validators on it, and the help formatter of a
component's ``--help``. :mod:`anylaunch.specs.file_linter` exports them.
"""

from __future__ import annotations

import argparse
import ast
from typing import TYPE_CHECKING

from anylaunch.specs.errors import InvalidSpecError

if TYPE_CHECKING:
    from anylaunch.specs.file_linter import ComponentFunctionValidator, LinterMessage

__all__ = [
    "AnylaunchArgumentHelpFormatter",
    "ComponentFnVisitor",
    "get_generic_type",
    "get_optional_type",
    "is_primitive",
]


def is_primitive(arg: ast.expr) -> bool:
    """True if the annotation ``arg`` is a bare name (``int``, ``str``, ``float``, ``bool``).

    >>> is_primitive(ast.parse("int", mode="eval").body), is_primitive(ast.parse("list[int]", mode="eval").body)
    (True, False)
    """
    return isinstance(arg, ast.Name)


def get_generic_type(arg: ast.expr) -> ast.expr:
    """The type parameters of the subscripted annotation ``arg`` (``T`` of ``list[T]``, the
    ``(K, V)`` tuple of ``dict[K, V]``).

    >>> ast.unparse(get_generic_type(ast.parse("Optional[str]", mode="eval").body))
    'str'

    Raises:
        InvalidSpecError: ``arg`` is not subscripted (``C[T]``)
    """
    if not isinstance(arg, ast.Subscript):
        raise InvalidSpecError(
            "arg",
            ast.unparse(arg) if isinstance(arg, ast.AST) else arg,
            "is not a subscripted type",
            "pass a C[T] annotation, e.g. list[str]",
        )
    return arg.slice


def get_optional_type(arg: ast.expr) -> ast.expr | None:
    """``T`` of the annotation ``Optional[T]``, ``T | None`` or ``None | T``; ``None`` if
    ``arg`` is not optional.

    >>> [ast.unparse(get_optional_type(ast.parse(a, mode="eval").body) or ast.Name("-"))
    ...  for a in ("Optional[int]", "str | None", "None | float", "int")]
    ['int', 'str', 'float', '-']
    """
    if isinstance(arg, ast.Subscript):
        value = arg.value
        name = value.id if isinstance(value, ast.Name) else getattr(value, "attr", None)
        return arg.slice if name == "Optional" else None
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.BitOr):
        if isinstance(arg.right, ast.Constant) and arg.right.value is None:
            return arg.left
        if isinstance(arg.left, ast.Constant) and arg.left.value is None:
            return arg.right
    return None


class AnylaunchArgumentHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help formatter for components' ``--help`` (TorchX's ``TorchXArgumentHelpFormatter``):
    appends ``(required)`` to a required option's help and ``(default: VALUE)`` to the others.

    >>> p = argparse.ArgumentParser(prog="c", formatter_class=AnylaunchArgumentHelpFormatter)
    >>> _ = p.add_argument("--msg", required=True, help="what to say")
    >>> _ = p.add_argument("--n", default=2, help="how often")
    >>> text = p.format_help()
    >>> "what to say (required)" in text, "how often (default: 2)" in text
    (True, True)
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default is argparse.SUPPRESS:  # --help
            return text
        if action.required:
            return text + " (required)"
        # argparse %-formats help texts: escape the default's own %
        return text + f" (default: {str(action.default).replace('%', '%%')})"


class ComponentFnVisitor(ast.NodeVisitor):
    """Finds the function ``component_function_name`` in a parsed module and runs validators
    on it (TorchX's ``ComponentFnVisitor``); ``validate`` is the usual entry point.

    ``validators`` default to checking the argument types and the ``AppDef`` return type.
    After ``visit``, ``linter_errors`` holds the messages and ``visited_function`` says
    whether the function was found.

    >>> v = ComponentFnVisitor("echo", None)
    >>> v.visit(ast.parse("def echo(msg) -> AppDef: ..."))
    >>> v.visited_function, [m.description.split(":")[0] for m in v.linter_errors]
    (True, ["Argument 'msg' of function 'echo'"])
    """

    def __init__(
        self,
        component_function_name: str,
        validators: list[ComponentFunctionValidator] | None,
    ) -> None:
        from anylaunch.specs.file_linter import ArgTypeValidator, ReturnTypeValidator

        self.component_function_name = component_function_name
        self.validators: list[ComponentFunctionValidator] = (
            [ArgTypeValidator(), ReturnTypeValidator()] if validators is None else validators
        )
        self.linter_errors: list[LinterMessage] = []
        self.visited_function = False

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        """Runs the validators on ``node`` if it is the component function."""
        if node.name != self.component_function_name:
            return
        self.visited_function = True
        for validator in self.validators:
            self.linter_errors += validator.validate(node)
