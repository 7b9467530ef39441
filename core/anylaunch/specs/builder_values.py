"""Component parameter values: parsers from command-line text and checks of typed values.

Used by :mod:`anylaunch.specs.builders`. A parameter's annotation (``Optional`` removed)
selects how its value is read:

========================  ============================  ===============================
annotation                command line                  value
========================  ============================  ===============================
``str`` / ``int``         ``--n 3``                     ``3``
``bool``                  ``--flag``, ``--flag=no``     ``True``, ``False``
``list[str]``             ``--xs a,b,c``                ``['a', 'b', 'c']``
``dict[str, str]``        ``--env K1=v1,K2=v2``         ``{'K1': 'v1', 'K2': 'v2'}``
``tuple[int, str]``       ``--shape 2,x``               ``(2, 'x')``
``tuple[int, ...]``       ``--dims 1,2,3``              ``(1, 2, 3)``
========================  ============================  ===============================
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from anylaunch.specs.errors import InvalidSpecError

__all__ = ["ValueSpec", "coerce_value", "component_cli_args", "unwrap_optional", "value_spec"]

_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})
_PRIMITIVES: dict[type, str] = {str: "str", int: "int", float: "float", bool: "bool"}
SUPPORTED = (
    "str, int, float, bool, list[P], dict[P, P], tuple[P, ...] (P a primitive) "
    "or Optional[...] of these"
)


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


def _tuple_parser(
    elements: list[Callable[[str], Any]], variadic: bool
) -> Callable[[str], tuple[Any, ...]]:
    def parse(value: str) -> tuple[Any, ...]:
        items = value.split(",") if value else []
        if variadic:
            return tuple(elements[0](item) for item in items)
        if len(items) != len(elements):
            raise _type_error(f"expected {len(elements)} comma-separated values, got {len(items)}")
        return tuple(parse_item(item) for parse_item, item in zip(elements, items, strict=True))

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


def unwrap_optional(tp: Any) -> Any:
    """``Optional[X]`` / ``X | None`` -> ``X``; anything else unchanged.

    >>> unwrap_optional(typing.Optional[int]), unwrap_optional(list[str] | None)
    (<class 'int'>, list[str])
    """
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _tuple_elements(args: tuple[Any, ...]) -> tuple[list[type], bool] | None:
    """The element types of ``tuple[...]`` and whether it is ``tuple[P, ...]``."""
    variadic = len(args) == 2 and args[1] is Ellipsis
    elements = list(args[:1] if variadic else args)
    if not elements or not all(a in _PRIMITIVES for a in elements):
        return None
    return elements, variadic


@dataclass(frozen=True)
class ValueSpec:
    """How one (``Optional``-unwrapped) annotation is read from text and checked.

    Attributes:
        annotation: the annotation without ``Optional``
        parse: parses command-line text (raises ``argparse.ArgumentTypeError``)
        metavar: how ``--help`` shows the value
    """

    annotation: Any
    parse: Callable[[str], Any]
    metavar: str


def value_spec(tp: Any) -> ValueSpec | None:
    """The parser of an (``Optional``-unwrapped) annotation, or None if text cannot be parsed
    into it.

    >>> value_spec(dict[str, int]).parse("a=1,b=2")
    {'a': 1, 'b': 2}
    >>> value_spec(tuple[int, str]).parse("2,x"), value_spec(set[str]) is None
    ((2, 'x'), True)
    """
    if tp is inspect.Parameter.empty or tp is typing.Any:
        return ValueSpec(tp, _primitive_parser(str), "str")
    if tp in _PRIMITIVES:
        return ValueSpec(tp, _primitive_parser(tp), _PRIMITIVES[tp])
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and len(args) == 1 and args[0] in _PRIMITIVES:
        return ValueSpec(
            tp, _list_parser(_primitive_parser(args[0])), f"{_PRIMITIVES[args[0]]},..."
        )
    if origin is dict and len(args) == 2 and all(a in _PRIMITIVES for a in args):
        key, val = (_primitive_parser(a) for a in args)
        metavar = f"{_PRIMITIVES[args[0]]}={_PRIMITIVES[args[1]]},..."
        return ValueSpec(tp, _dict_parser(key, val), metavar)
    if origin is tuple:
        found = _tuple_elements(args)
        if found is None:
            return None
        elements, variadic = found
        names = [_PRIMITIVES[e] for e in elements]
        metavar = f"{names[0]},..." if variadic else ",".join(names)
        return ValueSpec(
            tp, _tuple_parser([_primitive_parser(e) for e in elements], variadic), metavar
        )
    return None


def coerce_value(tp: Any, value: object) -> Any:
    """Checks a typed ``value`` (e.g. from a JSON config) against the (``Optional``-unwrapped)
    annotation ``tp``; text is parsed as on the command line. Returns the value to pass.

    >>> coerce_value(list[float], [1, "2.5"]), coerce_value(tuple[int, str], [3, "x"])
    ([1.0, 2.5], (3, 'x'))
    >>> coerce_value(int, True)
    Traceback (most recent call last):
    ...
    TypeError: expected int, got bool

    Raises:
        TypeError: ``value`` does not fit ``tp``
        argparse.ArgumentTypeError: text in ``value`` does not parse
    """
    spec = value_spec(tp)
    if tp is inspect.Parameter.empty or tp is typing.Any:
        return value  # unannotated: text stays text, anything else is passed as is
    if isinstance(value, str) and spec is not None:
        return spec.parse(value)
    if tp in _PRIMITIVES:
        return _coerce_primitive(tp, value)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if spec is not None and origin is list:
        items = _sequence(tp, value)
        return [_coerce_primitive(args[0], item) for item in items]
    if spec is not None and origin is dict:
        if not isinstance(value, Mapping):
            raise TypeError(f"expected a mapping for {_name(tp)}, got {type(value).__name__}")
        return {
            _coerce_primitive(args[0], k): _coerce_primitive(args[1], v) for k, v in value.items()
        }
    if spec is not None and origin is tuple:
        elements, variadic = _tuple_elements(args) or ([], False)
        items = _sequence(tp, value)
        if variadic:
            return tuple(_coerce_primitive(elements[0], item) for item in items)
        if len(items) != len(elements):
            raise TypeError(f"expected {len(elements)} values for {_name(tp)}, got {len(items)}")
        return tuple(_coerce_primitive(e, item) for e, item in zip(elements, items, strict=True))
    # a type the command line cannot parse: a typed value is passed as is
    if isinstance(value, str):
        raise TypeError(f"{_name(tp)} cannot be parsed from text")
    if isinstance(tp, type) and not isinstance(value, tp):
        raise TypeError(f"expected {_name(tp)}, got {type(value).__name__}")
    return value


def _name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else str(tp)


def _sequence(tp: Any, value: object) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"expected a list for {_name(tp)}, got {type(value).__name__}")
    return list(value)


def _coerce_primitive(tp: type, value: object) -> Any:
    if isinstance(value, str):
        return _primitive_parser(tp)(value)
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, tp) and (tp is bool or not isinstance(value, bool)):
        return value
    raise TypeError(f"expected {_PRIMITIVES[tp]}, got {type(value).__name__}")


def component_cli_args(component_fn: Any, args: Mapping[str, object]) -> list[str]:
    """Turns ``{param: value}`` into the component's command-line arguments.

    A list value for the ``*args`` parameter is passed after ``--``; None means "use the
    default".

    >>> def fn(msg: str, flag: bool = False, *rest: str) -> None: ...
    >>> component_cli_args(fn, {"msg": "hi", "flag": True, "rest": ["a", "b"]})
    ['--msg=hi', '--flag=true', '--', 'a', 'b']

    Raises:
        InvalidSpecError: a key is not a parameter name, or a value has no command-line
            form: not a str, int, finite float or bool (nor, for a list, tuple or dict
            parameter, a list, tuple or dict of those), naming ``component_args[key]``
    """

    varargs = next(
        (
            p.name
            for p in inspect.signature(component_fn).parameters.values()
            if p.kind is inspect.Parameter.VAR_POSITIONAL
        ),
        None,
    )

    def as_cli(value: object) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (list, tuple)):
            return ",".join(as_cli(v) for v in value)
        if isinstance(value, dict):
            return ",".join(f"{as_cli(k)}={as_cli(v)}" for k, v in value.items())
        return str(value)

    hints = _hints_or_none(component_fn)
    cli: list[str] = []
    rest: list[str] = []
    for key, value in args.items():
        if not isinstance(key, str) or not key:
            raise InvalidSpecError(
                "component_args", key, "keys must be parameter names", "use {'msg': 'hi'}"
            )
        if value is None:
            continue
        _check_arg(
            key, value, key == varargs, unwrap_optional(hints.get(key, inspect.Parameter.empty))
        )
        if key == varargs:
            items = value if isinstance(value, (list, tuple)) else [value]
            rest = ["--", *(as_cli(v) for v in items)]
        else:
            # --name=value keeps values that start with '-' from reading as options
            cli.append(f"--{key}={as_cli(value)}")
    return cli + rest


def _hints_or_none(component_fn: Any) -> dict[str, Any]:
    """The component's resolved annotations; ``{}`` if they do not resolve (the builder
    reports that itself, naming the component)."""
    try:
        return typing.get_type_hints(component_fn)
    except Exception:
        return {}


_SCALARS = (str, int, float, bool)
_CONTAINERS = (list, tuple, dict)


def _scalar_problem(value: object) -> str | None:
    """Why ``value`` has no command-line form as one value (None: it has one)."""
    if not isinstance(value, _SCALARS):
        return f"{type(value).__name__} values have no command-line form"
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number (NaN and infinities cannot work)"
    return None


def _check_arg(key: str, value: object, is_varargs: bool, annotation: Any) -> None:
    """Refuses a ``{param: value}`` value that the command line cannot carry."""
    field = f"component_args[{key!r}]"
    fix = "pass a str, int, float or bool (a list or dict of those for a list or dict parameter)"
    if isinstance(value, _CONTAINERS):
        if annotation in _PRIMITIVES and not is_varargs:
            raise InvalidSpecError(
                field,
                f"<{type(value).__name__}>",
                f"parameter {key!r} takes one {_PRIMITIVES[annotation]}, not a "
                f"{type(value).__name__}",
                f"pass one {_PRIMITIVES[annotation]} value, e.g. {{{key!r}: '...'}}",
            )
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else list(value)
        for item in items:
            problem = _scalar_problem(item)
            if problem is not None:
                raise InvalidSpecError(field, f"<{type(item).__name__} item>", problem, fix)
        return
    problem = _scalar_problem(value)
    if problem is not None:
        raise InvalidSpecError(field, f"<{type(value).__name__}>", problem, fix)
