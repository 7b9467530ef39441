"""Builds an AppDef by calling a component function with arguments parsed from a command line.

Each parameter of the component becomes an option ``--param`` (``--param-name`` also works
for ``param_name``); ``*args`` takes the rest of the command line (after ``--`` or after the
first value that is not an option). Values are parsed by the parameter's annotation:

========================  ============================  ===============================
annotation                command line                  value
========================  ============================  ===============================
``str`` / ``int``         ``--n 3``                     ``3``
``bool``                  ``--flag``, ``--flag=no``     ``True``, ``False``
``list[str]``             ``--xs a,b,c``                ``['a', 'b', 'c']``
``dict[str, str]``        ``--env K1=v1,K2=v2``         ``{'K1': 'v1', 'K2': 'v2'}``
``Optional[X]``           as ``X``                      ``None`` when not given
========================  ============================  ===============================
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from anylaunch.specs.api import AppDef
from anylaunch.specs.errors import InvalidSpecError, did_you_mean
from anylaunch.specs.file_linter import get_fn_docstring, parse_fn_docstring

if TYPE_CHECKING:
    import argparse

__all__ = ["ComponentArgsError", "materialize_appdef", "parse_args"]

_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})
_PRIMITIVES: dict[type, str] = {str: "str", int: "int", float: "float", bool: "bool"}
_SUPPORTED = "str, int, float, bool, list[P], dict[P, P] (P a primitive) or Optional[...] of these"


class ComponentArgsError(InvalidSpecError):
    """The command-line arguments given to a component do not match its parameters.

    >>> err = ComponentArgsError("echo", ["--bogus"], "unrecognized arguments: --bogus",
    ...                          "usage: echo [--help] --msg MSG")
    >>> print(err)
    invalid arguments for component echo: unrecognized arguments: --bogus. Fix: follow the usage: ...

    The message never repeats the raw arguments (they may carry secrets); ``value`` holds them.
    """

    def __init__(self, component: str, cli_args: Sequence[str], message: str, usage: str) -> None:
        self.component = component
        self.message = message
        self.usage = usage
        super().__init__(
            f"{component} args",
            list(cli_args),
            message,
            f"follow the usage: {usage} (pass --help to list every option)",
        )
        self.args = (f"invalid arguments for component {component}: {message}. Fix: {self.fix}",)


# ---------------------------------------------------------------------------------------------
# Value parsers (one per annotation)
# ---------------------------------------------------------------------------------------------


def _type_error(message: str) -> Exception:
    import argparse

    # argparse reports an ArgumentTypeError's message verbatim, prefixed with the option
    return argparse.ArgumentTypeError(message)


def _parse_bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise _type_error(
        f"expected one of true/false/1/0/yes/no, got {value!r} (to pass arguments to the "
        "app after a bare flag, put -- before them)"
    )


def _primitive_parser(tp: type) -> Callable[[str], Any]:
    if tp is bool:
        return _parse_bool
    name = _PRIMITIVES[tp]

    def parse(value: str) -> Any:
        try:
            parsed = tp(value)
        except ValueError:
            raise _type_error(f"invalid {name} value: {value!r}") from None
        if tp is float and not math.isfinite(parsed):
            raise _type_error(f"invalid {name} value: {value!r} (must be a finite number)")
        return parsed

    return parse


def _list_parser(element: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    def parse(value: str) -> list[Any]:
        return [element(item) for item in value.split(",")] if value else []

    return parse


def _dict_parser(
    key: Callable[[str], Any], val: Callable[[str], Any]
) -> Callable[[str], dict[Any, Any]]:
    def parse(value: str) -> dict[Any, Any]:
        pairs: dict[str, str] = {}
        last: str | None = None
        for item in value.split(",") if value else []:
            k, sep, v = item.partition("=")
            if sep:
                pairs[k] = v
                last = k
            elif last is not None:
                # "FOO=a,b,BAR=c": a comma-separated item without '=' continues the last value
                pairs[last] = f"{pairs[last]},{item}"
            else:
                # not quoted: a misplaced value (e.g. a token given without its name) is secret
                raise _type_error(
                    "expected KEY=VALUE pairs separated by commas; the first item has no '=' "
                    f"({len(item)} characters, not shown)"
                )
        return {key(k): val(v) for k, v in pairs.items()}

    return parse


def _unwrap_optional(tp: Any) -> Any:
    """``Optional[X]`` / ``X | None`` -> ``X``; anything else unchanged."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _value_parser(tp: Any) -> tuple[Callable[[str], Any], str] | None:
    """Returns the parser and metavar for an (unwrapped) annotation, or None if unsupported."""
    if tp is inspect.Parameter.empty or tp is typing.Any:
        return _primitive_parser(str), "str"
    if tp in _PRIMITIVES:
        return _primitive_parser(tp), _PRIMITIVES[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and len(args) == 1 and args[0] in _PRIMITIVES:
        return _list_parser(_primitive_parser(args[0])), f"{_PRIMITIVES[args[0]]},..."
    if origin is dict and len(args) == 2 and all(a in _PRIMITIVES for a in args):
        key, val = (_primitive_parser(a) for a in args)
        return _dict_parser(key, val), f"{_PRIMITIVES[args[0]]}={_PRIMITIVES[args[1]]},..."
    return None


# ---------------------------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------------------------


def _component_name(fn: Callable[..., object]) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def _type_hints(fn: Callable[..., object]) -> dict[str, Any]:
    try:
        # resolves string annotations (and `from __future__ import annotations`) in fn's globals
        return typing.get_type_hints(fn)
    except Exception as e:
        raise InvalidSpecError(
            f"{_component_name(fn)} annotations",
            str(e),
            "cannot be resolved",
            "import every type used in the component's signature at the top of its module",
        ) from None


def _check_inputs(component_fn: object, cli_args: object, defaults: object) -> None:
    if not callable(component_fn):
        raise InvalidSpecError(
            "component_fn", component_fn, "is not callable", "pass the component function"
        )
    if isinstance(cli_args, str) or not isinstance(cli_args, Sequence):
        raise InvalidSpecError(
            "cli_args",
            cli_args,
            "must be a list of str",
            "split the command line into words, e.g. shlex.split('--msg hello')",
        )
    for arg in cli_args:
        if not isinstance(arg, str):
            raise InvalidSpecError("cli_args", arg, "is not a str", "pass every argument as str")
    if defaults is not None and not isinstance(defaults, Mapping):
        raise InvalidSpecError(
            "defaults", defaults, "must be a mapping of parameter name to str", "pass a dict"
        )


def _normalized_defaults(
    name: str, params: Mapping[str, inspect.Parameter], defaults: Mapping[str, str] | None
) -> dict[str, str]:
    result: dict[str, str] = {}
    for key, value in (defaults or {}).items():
        param = key if key in params else key.replace("-", "_")
        if param not in params:
            raise InvalidSpecError(
                f"defaults[{key!r}] of component {name!r}",
                value,
                f"{name} has no such parameter.{did_you_mean(key, params)}",
                f"use one of {', '.join(params) or '(no parameters)'}",
            )
        if not isinstance(value, str):
            raise InvalidSpecError(
                f"defaults[{key!r}] of component {name!r}",
                value,
                "must be a str, as it would be typed on the command line",
                "quote the value, e.g. '3' or 'a,b' or 'K=v'",
            )
        result[param] = value
    return result


def _typo_hints(cli_args: Sequence[str], known_options: Sequence[str]) -> str:
    """Names the misspelt options in ``cli_args`` (argparse may only report a missing one)."""
    hints = []
    for arg in cli_args:
        if arg == "--":
            break
        option = arg.split("=", 1)[0]
        if option.startswith("-") and option not in known_options:
            hint = did_you_mean(option, known_options)
            if hint:
                hints.append(f"{option!r}:{hint}")
    return f" (unknown option {'; '.join(hints)})" if hints else ""


def _build_parser(
    component_fn: Callable[..., object],
    params: Mapping[str, inspect.Parameter],
    defaults: Mapping[str, str],
    cli_args: Sequence[str],
) -> tuple[argparse.ArgumentParser, dict[str, Callable[[str], Any]]]:
    """Returns the parser and the value parsers of ``*args`` (applied after parsing)."""
    import argparse  # only needed when a component is materialized

    name = _component_name(component_fn)

    class HelpFormatter(argparse.RawDescriptionHelpFormatter):
        def _get_help_string(self, action: argparse.Action) -> str:
            text = action.help or ""
            if action.default is not argparse.SUPPRESS:  # every option but --help
                if not action.option_strings:
                    text += " (optional)"
                elif action.required:
                    text += " (required)"
                else:
                    shown = repr(action.default) if action.default == "" else action.default
                    text += f" (default: {shown})"
            # argparse %-formats help texts: a literal % in a docstring must not break --help
            return text.replace("%", "%%")

    known_options: list[str] = []

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            usage = " ".join(self.format_usage().split())
            message += _typo_hints(cli_args, known_options)
            raise ComponentArgsError(name, cli_args, message, usage)

    description, _ = get_fn_docstring(component_fn)
    doc = inspect.getdoc(component_fn)
    _, arg_docs = parse_fn_docstring(doc) if doc else ("", {})
    parser = Parser(
        prog=f"anylaunch run <run args...> {name}",
        description=description,
        formatter_class=HelpFormatter,
        # components may have a parameter named "h": keep --help only
        add_help=False,
        # a prefix of an option must not silently match it
        allow_abbrev=False,
    )
    parser.add_argument(
        "--help", action="help", default=argparse.SUPPRESS, help="show this help message and exit"
    )
    hints = _type_hints(component_fn)
    vararg_parsers: dict[str, Callable[[str], Any]] = {}
    for param_name, param in params.items():
        annotation = hints.get(param_name, inspect.Parameter.empty)
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            raise InvalidSpecError(
                f"{name}(**{param_name})",
                param_name,
                "**kwargs cannot be passed on the command line",
                "declare each parameter, or take a dict[str, str] parameter",
            )
        unwrapped = _unwrap_optional(annotation)
        found = _value_parser(unwrapped)
        if found is None:
            raise InvalidSpecError(
                f"{name}({param_name})",
                getattr(annotation, "__name__", str(annotation)),
                "is not a type that can be parsed from the command line",
                f"annotate it as {_SUPPORTED}",
            )
        value_parser, metavar = found
        help_text = arg_docs.get(param_name) or param_name
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            # parsed after argparse: the remainder may start with a literal "--"
            vararg_parsers[param_name] = value_parser
            parser.add_argument(param_name, nargs=argparse.REMAINDER, help=help_text)
            continue
        options = [f"--{param_name}"]
        if "_" in param_name:
            options.append(f"--{param_name.replace('_', '-')}")
        if len(param_name) == 1:
            options.insert(0, f"-{param_name}")
        kwargs: dict[str, Any] = {
            "dest": param_name,
            "type": value_parser,
            "metavar": metavar,
            "help": help_text,
        }
        if unwrapped is bool:
            # a bare --flag means True; --flag=false (or no/0) turns it off
            kwargs.update(nargs="?", const=True, metavar="{true,false}")
        if param_name in defaults:
            try:
                kwargs["default"] = value_parser(defaults[param_name])
            except (argparse.ArgumentTypeError, ValueError, TypeError) as e:
                raise InvalidSpecError(
                    f"defaults[{param_name!r}] of component {name!r}",
                    defaults[param_name],
                    str(e),
                    f"give a {metavar} value",
                ) from None
        elif param.default is not inspect.Parameter.empty:
            kwargs["default"] = param.default
        else:
            kwargs["required"] = True
        parser.add_argument(*options, **kwargs)
        known_options.extend(options)
    return parser, vararg_parsers


def parse_args(
    component_fn: Callable[..., object],
    cli_args: Sequence[str],
    defaults: Mapping[str, str] | None = None,
) -> argparse.Namespace:
    """Parses ``cli_args`` into the component's parameters (one attribute per parameter).

    >>> def echo(msg: str, *args: str, n: int = 1) -> AppDef: ...
    >>> parse_args(echo, ["--msg", "hi", "--", "a", "--b"], defaults={"n": "2"})
    Namespace(msg='hi', args=['a', '--b'], n=2)

    Args:
        component_fn: the component function
        cli_args: the component's command-line arguments (``--help`` prints help and exits)
        defaults: parameter name to value as typed on the command line (e.g. from a config
            file); overrides the function's own defaults

    Returns:
        the parsed values, typed by the parameters' annotations

    Raises:
        ComponentArgsError: if the arguments do not match the component's parameters
        InvalidSpecError: if the component's signature or ``defaults`` cannot work
    """
    _check_inputs(component_fn, cli_args, defaults)
    name = _component_name(component_fn)
    params = inspect.signature(component_fn).parameters
    normalized = _normalized_defaults(name, params, defaults)
    parser, vararg_parsers = _build_parser(component_fn, params, normalized, cli_args)
    namespace = parser.parse_args(list(cli_args))
    for param_name, value_parser in vararg_parsers.items():
        raw: list[str] = list(getattr(namespace, param_name) or [])
        if raw[:1] == ["--"]:
            raw = raw[1:]
        elif not raw and param_name in normalized:
            import shlex

            raw = shlex.split(normalized[param_name])
        values = []
        for item in raw:
            try:
                values.append(value_parser(item))
            except Exception as e:  # the value parsers raise argparse.ArgumentTypeError
                parser.error(f"argument *{param_name}: {e}")
        setattr(namespace, param_name, values)
    return namespace


def materialize_appdef(
    component_fn: Callable[..., object],
    cli_args: Sequence[str],
    defaults: Mapping[str, str] | None = None,
) -> AppDef:
    """Calls ``component_fn`` with arguments parsed from ``cli_args`` and returns its AppDef.

    >>> from anylaunch.specs import AppDef, Role
    >>> def echo(msg: str, replicas: int = 1) -> AppDef:
    ...     '''Echoes a message.
    ...
    ...     Args:
    ...         msg: message to print
    ...         replicas: number of copies
    ...     '''
    ...     role = Role("echo", image="/tmp", entrypoint="echo", args=[msg], num_replicas=replicas)
    ...     return AppDef("echo", roles=[role])
    >>> app = materialize_appdef(echo, ["--msg", "hello", "--replicas", "2"])
    >>> app.roles[0].args, app.roles[0].num_replicas
    (['hello'], 2)
    >>> materialize_appdef(echo, ["--replicas", "two"])
    Traceback (most recent call last):
    ...
    anylaunch.specs.builders.ComponentArgsError: invalid arguments for component echo: argument --replicas: invalid int value: 'two'. Fix: ...

    Args:
        component_fn: the component function (returns an AppDef)
        cli_args: the component's command-line arguments
        defaults: parameter name to value as typed on the command line (e.g. from a config
            file); overrides the function's own defaults

    Returns:
        the AppDef the component built

    Raises:
        ComponentArgsError: if the arguments do not match the component's parameters
        InvalidSpecError: if the component's signature or ``defaults`` cannot work, or the
            component does not return an AppDef
    """
    namespace = parse_args(component_fn, cli_args, defaults)
    positional: list[Any] = []
    keyword: dict[str, Any] = {}
    for param_name, param in inspect.signature(component_fn).parameters.items():
        value = getattr(namespace, param_name)
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            positional.extend(value)
        elif param.kind is inspect.Parameter.KEYWORD_ONLY:
            keyword[param_name] = value
        else:
            positional.append(value)
    app = component_fn(*positional, **keyword)
    if not isinstance(app, AppDef):
        name = _component_name(component_fn)
        raise InvalidSpecError(
            f"return value of component {name!r}",
            type(app).__name__,
            "a component must return an AppDef",
            f"make {name} return anylaunch.specs.AppDef(name=..., roles=[...])",
        )
    return app
