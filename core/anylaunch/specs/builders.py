"""Builds an AppDef by calling a component function with arguments parsed from a command line.

Each parameter of the component becomes an option ``--param`` (``--param-name`` also works
for ``param_name``); ``*args`` takes the rest of the command line (after ``--`` or after the
first value that is not an option). Values are parsed by the parameter's annotation (see
:mod:`anylaunch.specs.builder_values`): ``str``, ``int``, ``float``, ``bool`` (``--flag``,
``--flag=no``), ``list[P]`` (``a,b,c``), ``dict[P, P]`` (``K1=v1,K2=v2``), ``tuple[P, ...]``
(``1,2``) and ``Optional`` of these (``None`` when not given).

A value comes from, in order of precedence: the command line, ``config`` (typed values, e.g.
from a JSON file), ``cmpnt_defaults`` (text as typed on the command line, e.g. from
``.anylaunchconfig``), the function's own defaults. ``config`` and ``cmpnt_defaults`` can
also supply required parameters and ``*args``.

A parameter whose type cannot be parsed from text (e.g. ``set[str]`` or a class) is fine as
long as no text is passed for it: its default (or a typed ``config`` value) is used.

This module also exports :func:`make_app_handle`, :func:`parse_mounts` and the mount classes.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from anylaunch.specs.api import AppDef
from anylaunch.specs.builder_values import SUPPORTED, ValueSpec, coerce_value, unwrap_optional
from anylaunch.specs.builder_values import value_spec as _value_spec
from anylaunch.specs.checks import check_type
from anylaunch.specs.component_errors import ComponentRaisedError, secret_arguments
from anylaunch.specs.errors import AnylaunchError, InvalidSpecError, did_you_mean
from anylaunch.specs.file_linter import get_fn_docstring, parse_fn_docstring
from anylaunch.specs.handles import make_app_handle
from anylaunch.specs.mounts import BindMount, DeviceMount, MountType, VolumeMount, parse_mounts

if TYPE_CHECKING:
    import argparse

__all__ = [
    "BindMount",
    "ComponentArgs",
    "ComponentArgsError",
    "ComponentRaisedError",
    "ComponentTypeError",
    "DeviceMount",
    "MountType",
    "VolumeMount",
    "component_args_from_str",
    "make_app_handle",
    "materialize_appdef",
    "parse_args",
    "parse_mounts",
]


class ComponentArgs(NamedTuple):
    """Parsed component function arguments, grouped by how they are passed to the function.

    >>> ComponentArgs({"msg": "hi"}, ["a"], {"n": 2})
    ComponentArgs(positional_args={'msg': 'hi'}, var_args=['a'], kwargs={'n': 2})
    """

    positional_args: dict[str, Any]
    """positional and positional-or-keyword parameters, in signature order"""
    var_args: list[Any]
    """the values of ``*args``"""
    kwargs: dict[str, Any]
    """keyword-only parameters"""


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


class ComponentTypeError(InvalidSpecError, TypeError):
    """A component cannot be called from a command line (``**kwargs``) or did not return an
    AppDef. Also a ``TypeError``, which TorchX raises in these cases.

    >>> isinstance(ComponentTypeError("f", "dict", "must return an AppDef", "return one"), TypeError)
    True
    """


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------


class _FromConfig:
    """argparse default of a parameter that ``config`` supplies (replaced after parsing)."""

    def __repr__(self) -> str:
        return "<from config>"


_FROM_CONFIG = _FromConfig()


class _Unparsable(str):
    """Text given for a parameter whose type cannot be parsed from text."""

    __slots__ = ()


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


def _check_inputs(component_fn: object, cli_args: object, defaults: object, config: object) -> None:
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
    if config is not None:
        check_type(
            "config",
            config,
            Mapping,
            "must be a mapping of parameter name to value",
            "pass a dict, e.g. {'nnodes': 2}",
        )


def _pick_defaults(
    cmpnt_defaults: Mapping[str, str] | None, defaults: Mapping[str, str] | None
) -> Mapping[str, str] | None:
    if cmpnt_defaults is not None and defaults is not None:
        raise InvalidSpecError(
            "defaults",
            "<not shown>",
            "cmpnt_defaults and its older name defaults were both given",
            "pass only cmpnt_defaults",
        )
    return defaults if cmpnt_defaults is None else cmpnt_defaults


def _param_key(what: str, name: str, params: Mapping[str, inspect.Parameter], key: object) -> str:
    """The parameter a ``cmpnt_defaults``/``config`` key names (``param-name`` works too)."""
    if isinstance(key, str):
        param = key if key in params else key.replace("-", "_")
        if param in params:
            return param
    hint = did_you_mean(key, params) if isinstance(key, str) else ""
    raise InvalidSpecError(
        f"{what}[{key!r}] of component {name!r}",
        "<not shown>",
        f"{name} has no such parameter.{hint}",
        f"use one of {', '.join(params) or '(no parameters)'}",
    )


class _Param(NamedTuple):
    param: inspect.Parameter
    annotation: Any  # without Optional
    spec: ValueSpec | None  # None: cannot be parsed from text
    aliases: tuple[str, ...] = ()  # option names from Annotated[T, "-x"] (TorchX's)


#: An option alias a parameter may declare: ``Annotated[str, "-cn"]``.
_ALIAS = re.compile(r"--?[A-Za-z][A-Za-z0-9_-]*")


def _aliases(name: str, component_fn: Callable[..., object]) -> dict[str, tuple[str, ...]]:
    """The option aliases each parameter declares as text metadata starting with ``-`` of its
    ``Annotated`` annotation (``Annotated[str, "-cn"]`` also reads ``-cn VALUE``)."""
    try:
        hints = typing.get_type_hints(component_fn, include_extras=True)
    except Exception:  # _type_hints has said why already
        return {}
    found: dict[str, tuple[str, ...]] = {}
    for param_name, hint in hints.items():
        hint = unwrap_optional(hint)  # Optional[Annotated[T, "-x"]] too
        metadata = getattr(hint, "__metadata__", ())
        aliases = tuple(m for m in metadata if isinstance(m, str) and m.startswith("-"))
        for alias in aliases:
            if not _ALIAS.fullmatch(alias):
                raise ComponentTypeError(
                    f"{name}({param_name})",
                    param_name,
                    f"its option alias {alias!r} is not an option name",
                    "write it as -x or --name (letters, digits, '-' and '_')",
                )
        if aliases:
            found[param_name] = aliases
    return found


def _params(component_fn: Callable[..., object]) -> dict[str, _Param]:
    name = _component_name(component_fn)
    hints = _type_hints(component_fn)
    aliases = _aliases(name, component_fn)
    result: dict[str, _Param] = {}
    for param_name, param in inspect.signature(component_fn).parameters.items():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            raise ComponentTypeError(
                f"{name}(**{param_name})",
                param_name,
                "**kwargs cannot be passed on the command line",
                "declare each parameter, or take a dict[str, str] parameter",
            )
        annotation = unwrap_optional(hints.get(param_name, inspect.Parameter.empty))
        result[param_name] = _Param(
            param, annotation, _value_spec(annotation), aliases.get(param_name, ())
        )
    return result


def _unparsable_error(name: str, param_name: str, p: _Param, where: str) -> InvalidSpecError:
    shown = getattr(p.annotation, "__name__", str(p.annotation))
    return InvalidSpecError(
        f"{name}({param_name})",
        shown,
        f"is a type that cannot be parsed from text, but {where} gave text for it",
        f"pass no value for it (its default is used), or annotate it as {SUPPORTED}",
    )


def _normalized_defaults(
    name: str, params: Mapping[str, _Param], defaults: Mapping[str, str] | None
) -> dict[str, str]:
    result: dict[str, str] = {}
    signature = {k: p.param for k, p in params.items()}
    for key, value in (defaults or {}).items():
        param = _param_key("defaults", name, signature, key)
        if not isinstance(value, str):
            raise InvalidSpecError(
                f"defaults[{key!r}] of component {name!r}",
                value,
                "must be a str, as it would be typed on the command line",
                "quote the value, e.g. '3' or 'a,b' or 'K=v'",
            )
        if params[param].spec is None:
            raise _unparsable_error(name, param, params[param], "cmpnt_defaults")
        result[param] = value
    return result


def _config_values(
    name: str, params: Mapping[str, _Param], config: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``config`` checked against the parameters' types (text parsed as on the command line)."""
    import argparse
    import shlex

    result: dict[str, Any] = {}
    signature = {k: p.param for k, p in params.items()}
    for key, value in (config or {}).items():
        param = _param_key("config", name, signature, key)
        p = params[param]
        field = f"config[{key!r}] of component {name!r}"
        try:
            if p.param.kind is inspect.Parameter.VAR_POSITIONAL:
                items = shlex.split(value) if isinstance(value, str) else value
                if not isinstance(items, (list, tuple)):
                    raise TypeError(f"expected a list for *{param}, got {type(value).__name__}")
                result[param] = [coerce_value(p.annotation, item) for item in items]
            elif value is None:
                result[param] = None
            else:
                result[param] = coerce_value(p.annotation, value)
        except (TypeError, ValueError, argparse.ArgumentTypeError) as e:
            if isinstance(value, str) and p.spec is None:
                raise _unparsable_error(name, param, p, "config") from None
            raise InvalidSpecError(
                field, f"<{type(value).__name__}>", str(e), "give a value of the parameter's type"
            ) from None
    return result


# ---------------------------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------------------------


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
    params: Mapping[str, _Param],
    defaults: Mapping[str, str],
    config: Mapping[str, Any],
    cli_args: Sequence[str],
) -> argparse.ArgumentParser:
    import argparse  # only needed when a component is materialized

    name = _component_name(component_fn)

    class HelpFormatter(argparse.RawDescriptionHelpFormatter):
        def _get_help_string(self, action: argparse.Action) -> str:
            text = action.help or ""
            if action.default is _FROM_CONFIG:
                text += " (default: from config)"
            elif action.default is not argparse.SUPPRESS:  # every option but --help
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
    for param_name, p in params.items():
        help_text = arg_docs.get(param_name) or param_name
        if p.param.kind is inspect.Parameter.VAR_POSITIONAL:
            # parsed after argparse: the remainder may start with a literal "--"
            parser.add_argument(param_name, nargs=argparse.REMAINDER, help=help_text)
            continue
        options = [f"--{param_name}"]
        if "_" in param_name:
            options.append(f"--{param_name.replace('_', '-')}")
        if p.aliases:  # TorchX's rule: declared aliases instead of the one-letter short form
            options[:0] = [a for a in p.aliases if a not in options]
        elif len(param_name) == 1:
            options.insert(0, f"-{param_name}")
        kwargs: dict[str, Any] = {"dest": param_name, "help": help_text}
        if p.spec is None:
            kwargs.update(type=_Unparsable, metavar="VALUE")
            kwargs["help"] = f"{help_text} [its type cannot be parsed from text: use its default]"
        else:
            kwargs.update(type=p.spec.parse, metavar=p.spec.metavar)
        if p.annotation is bool:
            # a bare --flag means True; --flag=false (or no/0) turns it off
            kwargs.update(nargs="?", const=True, metavar="{true,false}")
        if param_name in config:
            kwargs["default"] = _FROM_CONFIG
        elif param_name in defaults and p.spec is not None:
            try:
                kwargs["default"] = p.spec.parse(defaults[param_name])
            except (argparse.ArgumentTypeError, ValueError, TypeError) as e:
                raise InvalidSpecError(
                    f"defaults[{param_name!r}] of component {name!r}",
                    defaults[param_name],
                    str(e),
                    f"give a {p.spec.metavar} value",
                ) from None
        elif p.param.default is not inspect.Parameter.empty:
            kwargs["default"] = p.param.default
        else:
            kwargs["required"] = True
        parser.add_argument(*options, **kwargs)
        known_options.extend(options)
    return parser


def _varargs(
    parser: argparse.ArgumentParser,
    param_name: str,
    p: _Param,
    raw: list[str],
    defaults: Mapping[str, str],
    config: Mapping[str, Any],
    name: str,
) -> list[Any]:
    """The values of ``*args``: the command line's, else config's, else the default text's."""
    explicit = raw[:1] == ["--"]
    if explicit:
        raw = raw[1:]
    if not raw and not explicit and param_name in config:
        return list(config[param_name])
    if not raw and not explicit and param_name in defaults:
        import shlex

        raw = shlex.split(defaults[param_name])
    if raw and p.spec is None:
        raise _unparsable_error(name, f"*{param_name}", p, "the command line")
    values = []
    for item in raw:
        try:
            values.append(p.spec.parse(item) if p.spec is not None else item)
        except Exception as e:  # the value parsers raise argparse.ArgumentTypeError
            parser.error(f"argument *{param_name}: {e}")
    return values


def parse_args(
    component_fn: Callable[..., object],
    cli_args: Sequence[str],
    cmpnt_defaults: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
    *,
    defaults: Mapping[str, str] | None = None,
) -> argparse.Namespace:
    """Parses ``cli_args`` into the component's parameters (one attribute per parameter).

    Precedence (high to low): ``cli_args`` > ``config`` > ``cmpnt_defaults`` > the
    function's own defaults.

    >>> def echo(msg: str, *args: str, n: int = 1) -> AppDef: ...
    >>> parse_args(echo, ["--msg", "hi", "--", "a", "--b"], cmpnt_defaults={"n": "2"})
    Namespace(msg='hi', args=['a', '--b'], n=2)
    >>> parse_args(echo, ["--n", "3"], {"n": "2"}, config={"msg": "from config", "n": 5})
    Namespace(msg='from config', args=[], n=3)

    Args:
        component_fn: the component function
        cli_args: the component's command-line arguments (``--help`` prints help and exits)
        cmpnt_defaults: parameter name to value as typed on the command line (e.g. from
            ``.anylaunchconfig``); overrides the function's own defaults
        config: parameter name to value (typed, e.g. ``2`` or ``["a"]``, or text as typed
            on the command line), e.g. from a JSON file; overrides ``cmpnt_defaults`` and
            can supply required parameters and ``*args`` (a list, or a str split like a shell)
        defaults: the older name of ``cmpnt_defaults``

    Returns:
        the parsed values, typed by the parameters' annotations

    Raises:
        ComponentArgsError: if the arguments do not match the component's parameters
        InvalidSpecError: if the component's signature, ``cmpnt_defaults`` or ``config``
            cannot work (naming the parameter)
    """
    cmpnt_defaults = _pick_defaults(cmpnt_defaults, defaults)
    _check_inputs(component_fn, cli_args, cmpnt_defaults, config)
    name = _component_name(component_fn)
    params = _params(component_fn)
    normalized = _normalized_defaults(name, params, cmpnt_defaults)
    typed_config = _config_values(name, params, config)
    parser = _build_parser(component_fn, params, normalized, typed_config, cli_args)
    namespace = parser.parse_args(list(cli_args))
    for param_name, p in params.items():
        value = getattr(namespace, param_name)
        if p.param.kind is inspect.Parameter.VAR_POSITIONAL:
            raw = list(value or [])
            value = _varargs(parser, param_name, p, raw, normalized, typed_config, name)
        elif value is _FROM_CONFIG:
            value = typed_config[param_name]
        elif isinstance(value, _Unparsable):
            raise _unparsable_error(name, param_name, p, "the command line")
        setattr(namespace, param_name, value)
    return namespace


def component_args_from_str(
    cmpnt_fn: Callable[..., object],
    cmpnt_args: Sequence[str],
    cmpnt_args_defaults: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
    *,
    cmpnt_defaults: Mapping[str, str] | None = None,
) -> ComponentArgs:
    """Parses a component's command-line arguments and groups them by how they are passed.

    Same inputs and precedence as :func:`parse_args`; both ``--opt value`` and
    ``--opt=value`` work.

    >>> def example(foo: str, *args: str, bar: str = "asdf") -> AppDef: ...
    >>> component_args_from_str(example, ["--foo", "fooval", "--bar=barval", "arg1", "arg2"])
    ComponentArgs(positional_args={'foo': 'fooval'}, var_args=['arg1', 'arg2'], kwargs={'bar': 'barval'})

    Args:
        cmpnt_fn: the component function
        cmpnt_args: the component's command-line arguments
        cmpnt_args_defaults: parameter name to value as typed on the command line
            (``cmpnt_defaults`` is accepted as another name for it)
        config: parameter name to value (typed or text), overriding the defaults
        cmpnt_defaults: the same as ``cmpnt_args_defaults``

    Returns:
        positional (and positional-or-keyword) arguments, the ``*args`` values and the
        keyword-only arguments

    Raises:
        ComponentArgsError: if the arguments do not match the component's parameters
        InvalidSpecError: if the component's signature, defaults or ``config`` cannot work
    """
    if cmpnt_args_defaults is not None and cmpnt_defaults is not None:
        raise InvalidSpecError(
            "cmpnt_defaults",
            "<not shown>",
            "cmpnt_args_defaults and cmpnt_defaults were both given",
            "pass only one of them",
        )
    defaults = cmpnt_args_defaults if cmpnt_defaults is None else cmpnt_defaults
    namespace = parse_args(cmpnt_fn, cmpnt_args, defaults, config)
    positional: dict[str, Any] = {}
    var_args: list[Any] = []
    keyword: dict[str, Any] = {}
    for param_name, param in inspect.signature(cmpnt_fn).parameters.items():
        value = getattr(namespace, param_name)
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            var_args = list(value)
        elif param.kind is inspect.Parameter.KEYWORD_ONLY:
            keyword[param_name] = value
        else:
            positional[param_name] = value
    return ComponentArgs(positional, var_args, keyword)


def materialize_appdef(
    component_fn: Callable[..., object],
    cli_args: Sequence[str],
    cmpnt_defaults: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
    *,
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
    >>> materialize_appdef(echo, [], config={"msg": "from config"}).roles[0].args
    ['from config']
    >>> materialize_appdef(echo, ["--replicas", "two"])
    Traceback (most recent call last):
    ...
    anylaunch.specs.builders.ComponentArgsError: invalid arguments for component echo: argument --replicas: invalid int value: 'two'. Fix: ...

    Args:
        component_fn: the component function (returns an AppDef)
        cli_args: the component's command-line arguments
        cmpnt_defaults: parameter name to value as typed on the command line (e.g. from
            ``.anylaunchconfig``); overrides the function's own defaults
        config: parameter name to value (typed or text), e.g. from a JSON file; overrides
            ``cmpnt_defaults``, loses to ``cli_args``
        defaults: the older name of ``cmpnt_defaults``

    Returns:
        the AppDef the component built

    Raises:
        ComponentArgsError: if the arguments do not match the component's parameters
        ComponentTypeError: if the component takes ``**kwargs`` or does not return an
            AppDef (also a TypeError)
        ComponentRaisedError: if the component's body raised (naming the line that raised)
        InvalidSpecError: if the component's signature, ``cmpnt_defaults`` or ``config``
            cannot work
    """
    cmpnt_defaults = _pick_defaults(cmpnt_defaults, defaults)
    args = component_args_from_str(component_fn, cli_args, cmpnt_defaults, config)
    try:
        app = component_fn(*args.positional_args.values(), *args.var_args, **args.kwargs)
    except AnylaunchError:
        raise  # already names its field and the fix (e.g. a Role the component built)
    except Exception as e:
        given = {**args.positional_args, **args.kwargs}
        raise ComponentRaisedError(component_fn, e, secret_arguments(given)) from e
    if not isinstance(app, AppDef):
        name = _component_name(component_fn)
        raise ComponentTypeError(
            f"return value of component {name!r}",
            type(app).__name__,
            "a component must return an AppDef",
            f"make {name} return anylaunch.specs.AppDef(name=..., roles=[...])",
        )
    return app
