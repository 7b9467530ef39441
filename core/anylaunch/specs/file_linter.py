"""Component linter: checks a component function statically and reads its docstring.

A component is a top-level function that returns an :class:`~anylaunch.specs.AppDef`, has
a Google-style docstring and annotates every parameter with a type the CLI can parse:

- primitives: ``str``, ``int``, ``float``, ``bool``
- ``list[P]`` / ``List[P]`` and ``dict[P, P]`` / ``Dict[P, P]`` of primitives ``P``
- ``tuple[P1, P2, ...]`` / ``Tuple[...]`` of primitives (a fixed number of values), and
  ``tuple[P, ...]`` (any number of ``P``)
- ``Optional[X]``, ``Union[X, None]`` and ``X | None`` of any of the above
- ``Annotated[X, ...]`` of any of the above; text metadata starting with ``-`` is an option
  alias (``config_name: Annotated[str, "-cn"]`` also reads ``-cn NAME``), as in TorchX
- any of these as a string annotation (``"list[str]"``, ``from __future__ import annotations``)

:func:`validate` parses the file with :mod:`ast`: the file is never imported or executed,
so a component with heavy or broken imports can still be linted. The component may be
defined at the top level or under ``if``/``else``, ``try`` or ``with`` blocks of the module
(e.g. one definition per Python version); every such definition is checked.
"""

from __future__ import annotations

import abc
import ast
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from anylaunch.specs.errors import InvalidSpecError, did_you_mean
from anylaunch.specs.file_linter_extras import (
    AnylaunchArgumentHelpFormatter,
    ComponentFnVisitor,
    get_generic_type,
    get_optional_type,
    is_primitive,
)

if TYPE_CHECKING:
    from os import PathLike

__all__ = [
    "AnylaunchArgumentHelpFormatter",
    "ArgTypeValidator",
    "ComponentFnVisitor",
    "ComponentFunctionValidator",
    "DocstringValidator",
    "LinterMessage",
    "ReturnTypeValidator",
    "get_fn_docstring",
    "get_generic_type",
    "get_optional_type",
    "is_primitive",
    "parse_fn_docstring",
    "validate",
]

_PRIMITIVES = frozenset({"str", "int", "float", "bool"})
_LISTS = frozenset({"list", "List"})
_DICTS = frozenset({"dict", "Dict"})
_TUPLES = frozenset({"tuple", "Tuple"})
_APPDEF_NAMES = frozenset(
    {"AppDef", "specs.AppDef", "anylaunch.specs.AppDef", "anylaunch.specs.api.AppDef"}
)
_SUPPORTED_HELP = (
    "use str, int, float, bool, list[P], dict[P, P], tuple[P, ...] (P a primitive) "
    "or Optional[...] of these"
)
_DOCS_TIP = (
    "TIP: improve this help string by adding a Google-style docstring to your component "
    "(a description, then an Args: section with one 'name: description' line per parameter)"
)


@dataclass
class LinterMessage:
    """One problem found in a component file.

    >>> LinterMessage("ReturnTypeValidator", "missing return annotation", line=3, char=0)
    LinterMessage(name='ReturnTypeValidator', description='missing return annotation', ...)
    """

    name: str
    description: str
    line: int
    char: int
    severity: str = "error"


class ComponentFunctionValidator(abc.ABC):
    """Checks one aspect of a component's ``ast.FunctionDef``; subclass to add a rule."""

    @abc.abstractmethod
    def validate(self, fn: ast.FunctionDef) -> list[LinterMessage]:
        """Returns the problems found in ``fn`` (empty if it complies)."""

    def _message(self, description: str, node: ast.AST) -> LinterMessage:
        return LinterMessage(
            name=type(self).__name__,
            description=description,
            line=getattr(node, "lineno", 0),
            char=getattr(node, "col_offset", 0),
        )


# ---------------------------------------------------------------------------------------------
# Annotation checks (on the AST, never evaluated)
# ---------------------------------------------------------------------------------------------


def _dotted(node: ast.expr) -> str | None:
    """``a.b.C`` for Name/Attribute chains, also inside a string annotation; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        parsed = _parse_annotation(node.value)
        return _dotted(parsed) if parsed is not None else None
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _parse_annotation(text: str) -> ast.expr | None:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None


def _short_name(node: ast.expr) -> str | None:
    """The last part of a dotted name: ``typing.List`` -> ``List``."""
    dotted = _dotted(node)
    return dotted.rsplit(".", 1)[-1] if dotted else None


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _unquote(node: ast.expr) -> ast.expr | str:
    """Parses string annotations; returns an error reason if the string is not an expression."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        parsed = _parse_annotation(node.value)
        if parsed is None:
            return f"string annotation {node.value!r} is not a valid type expression"
        return _unquote(parsed)
    return node


def _unwrap_optional(node: ast.expr) -> ast.expr:
    """``Optional[X]``, ``Union[X, None]``, ``X | None`` and ``None | X`` -> ``X``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _unquote(node.left), _unquote(node.right)
        if isinstance(right, ast.expr) and _is_none(right) and isinstance(left, ast.expr):
            return left
        if isinstance(left, ast.expr) and _is_none(left) and isinstance(right, ast.expr):
            return right
    if isinstance(node, ast.Subscript):
        origin = _short_name(node.value)
        if origin == "Optional":
            inner = _unquote(node.slice)
            return inner if isinstance(inner, ast.expr) else node
        if origin == "Union" and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2:
            first, second = (_unquote(e) for e in node.slice.elts)
            if isinstance(second, ast.expr) and _is_none(second) and isinstance(first, ast.expr):
                return first
            if isinstance(first, ast.expr) and _is_none(first) and isinstance(second, ast.expr):
                return second
    return node


def _unwrap_annotated(node: ast.expr) -> ast.expr | str:
    """``Annotated[T, ...]`` -> ``T`` (its metadata, e.g. an option alias, is the builder's);
    other annotations as they are (a string: why it does not parse)."""
    inner = _unquote(node)
    if isinstance(inner, ast.Subscript) and _short_name(inner.value) == "Annotated":
        if not isinstance(inner.slice, ast.Tuple) or len(inner.slice.elts) < 2:
            return f"{ast.unparse(inner)!r} must be Annotated[T, metadata, ...]"
        return _unwrap_annotated(inner.slice.elts[0])
    return inner


def _primitive_error(node: ast.expr) -> str | None:
    inner = _unwrap_annotated(node)
    if isinstance(inner, str):
        return inner
    if _dotted(inner) in _PRIMITIVES:
        return None
    return f"{ast.unparse(inner)!r} is not one of str, int, float, bool"


def _annotation_error(node: ast.expr) -> str | None:
    """Returns why ``node`` is not a supported parameter annotation, or None if it is."""
    unquoted = _unwrap_annotated(node)
    if isinstance(unquoted, str):
        return unquoted
    target = _unwrap_optional(unquoted)
    if isinstance(target, ast.Subscript) and _short_name(target.value) == "Annotated":
        return _annotation_error(target)  # Optional[Annotated[T, ...]]
    if _dotted(target) in _PRIMITIVES:
        return None
    name = _short_name(target.value) if isinstance(target, ast.Subscript) else _dotted(target)
    if not isinstance(target, ast.Subscript):
        if name in _LISTS or name in _DICTS or name in _TUPLES:
            return f"bare {name!r} has no element type (write e.g. {name}[str])"
        return f"unsupported type {ast.unparse(target)!r}"
    params = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
    if name in _LISTS:
        if len(params) != 1:
            return f"{ast.unparse(target)!r} must have exactly one element type"
        return _primitive_error(params[0])
    if name in _DICTS:
        if len(params) != 2:
            return f"{ast.unparse(target)!r} must have a key and a value type (dict[K, V])"
        return _primitive_error(params[0]) or _primitive_error(params[1])
    if name in _TUPLES:
        return _tuple_error(target, params)
    return f"unsupported type {ast.unparse(target)!r}"


def _tuple_error(target: ast.Subscript, params: list[ast.expr]) -> str | None:
    """``tuple[P1, ..., Pn]`` (n >= 1) or ``tuple[P, ...]``; every element a primitive."""
    last = params[-1] if params else None
    variadic = isinstance(last, ast.Constant) and last.value is Ellipsis
    elements = params[:-1] if variadic else params
    if not elements or (variadic and len(elements) != 1):
        return (
            f"{ast.unparse(target)!r} must list its element types "
            "(tuple[P1, P2, ...] of primitives, or tuple[P, ...])"
        )
    for element in elements:
        problem = _primitive_error(element)
        if problem:
            return problem
    return None


class ArgTypeValidator(ComponentFunctionValidator):
    """Every parameter (positional, ``*args``, keyword-only) has a supported type annotation.

    >>> fn = ast.parse("def f(a: int, b: 'list[str] | None', *rest: str) -> AppDef: ...").body[0]
    >>> ArgTypeValidator().validate(fn)
    []
    >>> fn = ast.parse("def f(a: tuple[int, str], b: Tuple[float, ...]) -> AppDef: ...").body[0]
    >>> ArgTypeValidator().validate(fn)
    []
    >>> fn = ast.parse("def f(a, b: set[str]) -> AppDef: ...").body[0]
    >>> [m.description.split(":")[0] for m in ArgTypeValidator().validate(fn)]
    ["Argument 'a' of function 'f'", "Argument 'b' of function 'f'"]
    """

    def validate(self, fn: ast.FunctionDef) -> list[LinterMessage]:
        """Returns one message per badly annotated parameter."""
        args = fn.args
        messages: list[LinterMessage] = []
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            problem = (
                _annotation_error(arg.annotation) if arg.annotation else "missing type annotation"
            )
            if problem:
                messages.append(self._arg_message(fn, arg, problem, _SUPPORTED_HELP))
        if args.vararg:
            # *args receives the remainder of the command line: each element is one primitive
            arg = args.vararg
            problem = (
                _primitive_error(arg.annotation) if arg.annotation else "missing type annotation"
            )
            if problem:
                messages.append(self._arg_message(fn, arg, problem, "annotate it as *args: str"))
        if args.kwarg:
            messages.append(
                self._arg_message(
                    fn,
                    args.kwarg,
                    "**kwargs cannot be passed on the command line",
                    "declare each parameter, or take a dict[str, str] parameter",
                )
            )
        return messages

    def _arg_message(
        self, fn: ast.FunctionDef, arg: ast.arg, problem: str, fix: str
    ) -> LinterMessage:
        return self._message(
            f"Argument {arg.arg!r} of function {fn.name!r}: {problem}. Fix: {fix}", arg
        )


class ReturnTypeValidator(ComponentFunctionValidator):
    """The function is annotated to return ``AppDef`` (bare, ``specs.`` or fully qualified).

    >>> fn = ast.parse("def f() -> 'specs.AppDef': ...").body[0]
    >>> ReturnTypeValidator().validate(fn)
    []
    >>> fn = ast.parse("def f() -> dict: ...").body[0]
    >>> print(ReturnTypeValidator().validate(fn)[0].description)
    Function 'f' returns 'dict'. Fix: annotate it as -> AppDef (from anylaunch.specs import AppDef)
    """

    def validate(self, fn: ast.FunctionDef) -> list[LinterMessage]:
        """Returns a message if the return annotation is missing or is not AppDef."""
        fix = "annotate it as -> AppDef (from anylaunch.specs import AppDef)"
        if fn.returns is None:
            return [self._message(f"Function {fn.name!r} has no return annotation. Fix: {fix}", fn)]
        if _dotted(fn.returns) in _APPDEF_NAMES:
            return []
        returned = _unquote(fn.returns)
        shown = ast.unparse(returned) if isinstance(returned, ast.expr) else ast.unparse(fn.returns)
        return [self._message(f"Function {fn.name!r} returns {shown!r}. Fix: {fix}", fn.returns)]


class DocstringValidator(ComponentFunctionValidator):
    """The function has a docstring (its Google-style text becomes the CLI help).

    >>> print(DocstringValidator().validate(ast.parse("def f(): pass").body[0])[0].description)
    Function 'f' must have google-style docs. Fix: add a docstring with a description and an ...
    """

    def validate(self, fn: ast.FunctionDef) -> list[LinterMessage]:
        """Returns a message if the function has no (or an empty) docstring."""
        if (ast.get_docstring(fn) or "").strip():
            return []
        return [
            self._message(
                f"Function {fn.name!r} must have google-style docs. "
                "Fix: add a docstring with a description and an Args: section",
                fn,
            )
        ]


def _default_validators() -> list[ComponentFunctionValidator]:
    return [DocstringValidator(), ArgTypeValidator(), ReturnTypeValidator()]


def _file_message(description: str, line: int = 0, char: int = 0) -> LinterMessage:
    return LinterMessage(name="validate", description=description, line=line, char=char)


def _checked_path(path: object) -> str:
    """``path`` as a str if it names a file (a non-empty str or str path object without NUL)."""
    import os

    text = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(text, str):
        raise InvalidSpecError(
            "path",
            f"<{type(path).__name__}>",
            "must be the path of a Python file (a str or pathlib.Path)",
            "pass e.g. 'components/train.py'",
        )
    if not text.strip() or "\x00" in text:
        raise InvalidSpecError(
            "path",
            text,
            "is empty or holds a NUL byte, so it names no file",
            "pass the component file's path, e.g. 'components/train.py'",
        )
    return text


def _checked_validators(validators: object) -> list[ComponentFunctionValidator]:
    if validators is None:
        return _default_validators()
    if isinstance(validators, (list, tuple)) and all(
        isinstance(v, ComponentFunctionValidator) for v in validators
    ):
        return list(validators)
    shown = (
        [type(v).__name__ for v in validators]
        if isinstance(validators, (list, tuple))
        else f"<{type(validators).__name__}>"
    )
    raise InvalidSpecError(
        "validators",
        shown,
        "must be a list of ComponentFunctionValidator instances, or None",
        "pass e.g. [DocstringValidator(), ArgTypeValidator()] (None: the default rules)",
    )


def validate(
    path: str | PathLike[str],
    component_function: str,
    validators: list[ComponentFunctionValidator] | None = None,
) -> list[LinterMessage]:
    """Validates that ``component_function`` in the file at ``path`` is a proper component.

    Rules (the default ``validators``): the function has google-style docs, every parameter
    is annotated with a supported type, and it returns ``AppDef``. The file is parsed, never
    imported. A missing file, a syntax error or a missing function is reported as a message.

    >>> import pathlib, tempfile
    >>> src = "import sys\\nif sys.platform:\\n    def echo(msg: str) -> AppDef:\\n        'Echoes.'\\n"
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = pathlib.Path(d, "c.py")
    ...     _ = p.write_text(src)
    ...     validate(p, "echo"), [m.description for m in validate(p, "ecoh")]
    ([], ["Function 'ecoh' not found in ... Did you mean 'echo'?"])

    Args:
        path: path to the Python source file
        component_function: name of the module-level function to check (top level or
            under ``if``/``try``/``with`` blocks)
        validators: rules to apply (default: docstring, argument types, return type)

    Returns:
        the problems found; empty if the function complies

    Raises:
        InvalidSpecError: ``path`` is not a str or path object naming a file,
            ``component_function`` is not a function name, or ``validators`` is not a list
            of validators
    """
    path = _checked_path(path)
    rules = _checked_validators(validators)
    if not isinstance(component_function, str) or not component_function.isidentifier():
        raise InvalidSpecError(
            "component_function",
            component_function,
            "is not a Python function name",
            "pass the bare function name, e.g. 'ddp' for dist.ddp",
        )
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except FileNotFoundError:
        return [_file_message(f"{path}: no such file. Fix: check the component's file path")]
    except (OSError, UnicodeDecodeError) as e:
        return [_file_message(f"{path}: cannot be read ({e}). Fix: pass a UTF-8 .py file")]
    try:
        module = ast.parse(source, filename=str(path))
    except SyntaxError as e:
        return [
            _file_message(
                f"{path}: syntax error: {e.msg}. Fix: correct the file "
                f"(check it with: python -m py_compile {path})",
                e.lineno or 0,
                e.offset or 0,
            )
        ]

    functions = _module_functions(module.body)
    matches = [n for n in functions if n.name == component_function]
    if not matches:
        hint = did_you_mean(component_function, [n.name for n in functions])
        return [_file_message(f"Function {component_function!r} not found in {path}.{hint}")]
    messages: list[LinterMessage] = []
    # every definition is checked: under if/else either one may be the one that runs
    for fn in matches:
        if isinstance(fn, ast.AsyncFunctionDef):
            messages.append(
                _file_message(
                    f"Function {fn.name!r} is async. Fix: make the component a plain def",
                    fn.lineno,
                    fn.col_offset,
                )
            )
            continue
        for validator in rules:
            messages += validator.validate(fn)
    return messages


def _module_functions(body: list[ast.stmt]) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions a block of statements defines, in its own body or in its nested
    ``if``/``try``/``with``/loop blocks (never inside a function or a class). A definition
    followed by another of the same name in the same block is dropped: it can never run."""
    found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found = [f for f in found if f.name != stmt.name]
            found.append(stmt)
        elif not isinstance(stmt, ast.ClassDef):
            for block in _nested_blocks(stmt):
                found.extend(_module_functions(block))
    return found


def _nested_blocks(stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement lists of a compound statement (bodies, else, except and case blocks)."""
    for _, value in ast.iter_fields(stmt):
        if not isinstance(value, list) or not value:
            continue
        if isinstance(value[0], ast.stmt):
            yield value
        elif isinstance(value[0], (ast.excepthandler, ast.match_case)):
            for clause in value:
                yield clause.body


# ---------------------------------------------------------------------------------------------
# Google-style docstrings
# ---------------------------------------------------------------------------------------------

_ARG_SECTIONS = frozenset(
    {
        "args",
        "arguments",
        "parameters",
        "params",
        "keyword args",
        "keyword arguments",
        "other parameters",
    }
)
_OTHER_SECTIONS = frozenset(
    {
        "attributes",
        "example",
        "examples",
        "methods",
        "note",
        "notes",
        "raises",
        "references",
        "return",
        "returns",
        "see also",
        "todo",
        "warning",
        "warnings",
        "yield",
        "yields",
    }
)
_SECTION = re.compile(r"^(?P<title>[A-Za-z][A-Za-z ]*):\s*$")
_ENTRY = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(?:\((?P<type>.*?)\))?\s*:\s*(?P<desc>.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _section_title(line: str) -> str | None:
    match = _SECTION.match(line.strip())
    title = match.group("title").lower() if match else None
    return title if title in _ARG_SECTIONS or title in _OTHER_SECTIONS else None


def parse_fn_docstring(docstring: str) -> tuple[str, dict[str, str]]:
    """Splits a Google-style docstring into its description and its argument descriptions.

    The description is the text before the first section (``Args:``, ``Returns:``, ...).
    Argument entries may be ``name: text`` or ``name (type): text``; deeper-indented lines
    continue the entry. ``*args``/``**kwargs`` entries are keyed without the stars.

    >>> parse_fn_docstring('''Trains a model.
    ...
    ... Args:
    ...     lr (float): learning
    ...         rate
    ...     *args: script arguments
    ... Returns:
    ...     the app
    ... ''')
    ('Trains a model.', {'lr': 'learning rate', 'args': 'script arguments'})

    Args:
        docstring: the docstring text (``inspect.cleandoc`` is applied)

    Returns:
        the description and a map from argument name to its description

    Raises:
        InvalidSpecError: ``docstring`` is not a str
    """
    if not isinstance(docstring, str):
        raise InvalidSpecError(
            "docstring",
            f"<{type(docstring).__name__}>",
            "must be the docstring's text (a str)",
            "pass e.g. inspect.getdoc(fn) or '' (for a function without one)",
        )
    lines = inspect.cleandoc(docstring).splitlines()
    description: list[str] = []
    args: dict[str, str] = {}
    i = 0
    while i < len(lines) and _section_title(lines[i]) is None:
        description.append(lines[i])
        i += 1
    while i < len(lines):
        title = _section_title(lines[i])
        # cleandoc dedents every line but the first: a header on the first line (right after
        # the opening quotes) can have its entries at its own indentation
        header_indent = _indent(lines[i]) if i else -1
        i += 1
        if title is None:
            continue  # stray text between sections is not part of any argument
        entry_indent: int | None = None
        current: str | None = None
        while i < len(lines):
            line = lines[i]
            if line.strip() and (
                _indent(line) <= header_indent
                or (header_indent < 0 and _indent(line) == 0 and _section_title(line))
            ):
                break
            i += 1
            if title not in _ARG_SECTIONS or not line.strip():
                continue
            if entry_indent is None:
                entry_indent = _indent(line)
            match = _ENTRY.match(line.strip()) if _indent(line) <= entry_indent else None
            if match:
                current = match.group("name")
                args[current] = match.group("desc").strip()
            elif current is not None:
                args[current] = f"{args[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), args


def _format_default(value: object) -> str:
    return repr(value) if value == "" else str(value)


def _usage_info(parameter: inspect.Parameter) -> str:
    if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        return " (optional)"
    if parameter.default is inspect.Parameter.empty:
        return " (required)"
    return f" (default: {_format_default(parameter.default)})"


def get_fn_docstring(fn: Callable[..., object]) -> tuple[str, dict[str, str]]:
    """Returns a component's description and a help text for each of its parameters.

    The texts come from the Google-style docstring. The description is the summary (the
    first line) and, on the next line, the longer description (the paragraphs before the
    first section, blank lines inside it kept). Without a docstring (or under ``python -OO``,
    which strips docstrings) the description is the function's name plus a tip on writing
    one; a parameter missing from the docstring is described by its name. Every parameter's
    text ends with `` (required)`` or `` (default: X)``.

    >>> def echo(msg: str, num: int = 1) -> None:
    ...     '''Prints a message.
    ...
    ...     Args:
    ...         msg: what to print
    ...     '''
    >>> get_fn_docstring(echo)
    ('Prints a message.', {'msg': 'what to print (required)', 'num': 'num (default: 1)'})
    >>> def train() -> None:
    ...     '''Trains a model.
    ...
    ...     Uses DDP.
    ...
    ...     Scales to many nodes.
    ...     '''
    >>> get_fn_docstring(train)[0]
    'Trains a model.\\nUses DDP.\\n\\nScales to many nodes.'

    Args:
        fn: the component function, with or without a docstring

    Returns:
        the function description and a map from parameter name to its help text
    """
    if not callable(fn):
        raise InvalidSpecError("fn", fn, "is not callable", "pass the component function")
    name = getattr(fn, "__name__", type(fn).__name__)
    default_description = f"{name} {_DOCS_TIP}"
    docstring = inspect.getdoc(fn)
    description, documented = parse_fn_docstring(docstring) if docstring else ("", {})
    summary, _, long_description = description.partition("\n")
    if long_description.strip():
        description = f"{summary}\n{long_description.strip()}"
    args = {
        param_name: (documented.get(param_name) or param_name) + _usage_info(parameter)
        for param_name, parameter in inspect.signature(fn).parameters.items()
    }
    return description or default_description, args
