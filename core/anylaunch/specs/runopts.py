"""Scheduler run configuration: the schema (``runopts``) and its parsing rules.

A run config (``cfg``) is a flat mapping of option name to :data:`CfgVal`. Each scheduler
declares the options it accepts as a :class:`runopts`; :meth:`runopts.resolve` validates a
cfg against it and fills defaults.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from anylaunch.specs.cases import camel_to_snake, snake_to_camel
from anylaunch.specs.checks import check_type
from anylaunch.specs.errors import InvalidRunConfigException, did_you_mean

#: Type of a run config value.
CfgVal = Union[str, int, float, bool, list[str], dict[str, str], None]  # noqa: UP007 (a runtime alias)

__all__ = [
    "CfgVal",
    "camel_to_snake",
    "cfg_str_to_pairs",
    "get_type_name",
    "runopt",
    "runopts",
    "snake_to_camel",
]

_TRUE = frozenset({"true", "1", "yes", "y", "on"})
_FALSE = frozenset({"false", "0", "no", "n", "off"})


def get_type_name(tp: Any) -> str:
    """A readable name of a run option type: ``__name__`` for a plain class, else ``str(tp)``.

    >>> get_type_name(int), get_type_name(list[str]), get_type_name(dict[str, str])
    ('int', 'list[str]', 'dict[str, str]')
    """
    if get_origin(tp) is None and isinstance(getattr(tp, "__name__", None), str):
        return str(tp.__name__)
    return str(tp)


def _is_list_type(tp: Any) -> bool:
    return tp is list or get_origin(tp) is list


def _is_dict_type(tp: Any) -> bool:
    return tp is dict or get_origin(tp) is dict


def _split_items(value: str) -> list[str]:
    return [item for item in re.split(r"[,;]", value) if item != ""]


@dataclass(frozen=True)
class runopt:
    """Metadata for a single scheduler run option."""

    default: CfgVal
    opt_type: Any
    is_required: bool
    help: str

    def cast_to_type(self, value: str) -> CfgVal:
        """Casts ``value`` (a string from the CLI or a config file) to this option's type.

        ``bool`` takes true/false (any case, also 1/0, yes/no); ``list[str]`` takes ``a,b,c`` or
        ``a;b;c``; ``dict[str, str]`` takes ``a:1,b:2`` or ``a:1;b:2`` (``:`` because ``=`` separates
        options at the top level).

        >>> runopt(None, int, False, "").cast_to_type("1")
        1
        >>> runopt(None, bool, False, "").cast_to_type("False")
        False
        >>> runopt(None, list[str], False, "").cast_to_type("a;b;c")
        ['a', 'b', 'c']
        >>> runopt(None, dict[str, str], False, "").cast_to_type("a:1,b:2")
        {'a': '1', 'b': '2'}
        """
        if not isinstance(value, str):
            raise TypeError(f"cast_to_type takes the option's string form, got {value!r}")
        tp = self.opt_type
        if tp is str:
            return value
        if tp is bool:
            lowered = value.strip().lower()
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
            raise ValueError(f"{value!r} is not a bool: use True or False")
        if tp is int:
            return int(value)
        if tp is float:
            number = float(value)
            if not math.isfinite(number):
                raise ValueError(
                    f"{value!r} is not a finite number (NaN and infinities cannot work)"
                )
            return number
        if _is_list_type(tp):
            return _split_items(value)
        if _is_dict_type(tp):
            parsed: dict[str, str] = {}
            for item in _split_items(value):
                key, sep, val = item.partition(":")
                if not sep:
                    raise ValueError(f"{item!r} in {value!r} is not KEY:VALUE: write a:1,b:2")
                parsed[key] = val
            return parsed
        raise TypeError(f"unsupported run option type {tp!r}")


def cfg_str_to_pairs(cfg_str: str) -> dict[str, str]:
    """Splits ``K1=V1,K2=V2`` into pairs; the last ``,``/``;`` before a ``=`` ends the value.

    >>> cfg_str_to_pairs("queue=default,args=a,b;prio=2")
    {'queue': 'default', 'args': 'a,b', 'prio': '2'}
    """
    segments = cfg_str.split("=")
    if len(segments) < 2:
        raise InvalidRunConfigException(
            "cfg",
            cfg_str,
            "expected at least one KEY=VALUE pair",
            "write options as KEY=VALUE pairs joined by ',' or ';', e.g. queue=default,priority=2",
        )
    pairs: dict[str, str] = {}
    key = segments[0].strip()
    for middle in segments[1:-1]:
        cut = max(middle.rfind(","), middle.rfind(";"))
        if cut == -1:
            raise InvalidRunConfigException(
                "cfg",
                cfg_str,
                f"cannot tell where the value of {key!r} ends",
                "separate KEY=VALUE pairs with ',' or ';'",
            )
        pairs[key] = middle[:cut]
        key = middle[cut + 1 :].strip()
    last = segments[-1]
    pairs[key] = last[:-1] if last.endswith((",", ";")) else last
    for name in pairs:
        if not name:
            raise InvalidRunConfigException(
                "cfg", cfg_str, "an option has an empty name", "write KEY=VALUE"
            )
    return pairs


def _shown(name: str, value: object) -> object:
    """How an option's value appears in an error: hidden when the name says it is a secret."""
    from anylaunch.specs.secrets import MASK, is_secret_env_name

    return MASK if is_secret_env_name(name) else value


class runopts:
    """Schema for scheduler run configuration.

    Holds accepted config keys, defaults, and help strings.

    >>> from anylaunch.specs import runopts
    >>> opts = runopts()
    >>> opts.add("cluster_id", type_=int, help="cluster to submit the job", required=True)
    >>> opts.add("priority", type_=float, default=0.5, help="job priority")
    >>> opts.add("preemptible", type_=bool, default=False, help="is the job preemptible")
    >>> opts.resolve({"clusterId": 3})
    {'cluster_id': 3, 'priority': 0.5, 'preemptible': False}
    """

    def __init__(self) -> None:
        self._opts: dict[str, runopt] = {}
        # other spellings of an option (e.g. the field name of a StructuredOpts field whose
        # cfg_key is "mail-user"): alias -> (registered name, rank: lower wins a clash)
        self._aliases: dict[str, tuple[str, int]] = {}

    def __iter__(self) -> Iterator[tuple[str, runopt]]:
        return iter(self._opts.items())

    def __len__(self) -> int:
        return len(self._opts)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._canonical(name) is not None

    @staticmethod
    def is_type(obj: CfgVal, tp: Any) -> bool:
        """Like ``isinstance`` but supports generic types (e.g. ``list[str]``).

        >>> runopts.is_type(["a"], list[str]), runopts.is_type([1], list[str])
        (True, False)
        >>> runopts.is_type(True, int)
        False
        """
        if _is_list_type(tp):
            args = get_args(tp) or (str,)
            return isinstance(obj, list) and all(isinstance(v, args[0]) for v in obj)
        if _is_dict_type(tp):
            args = get_args(tp) or (str, str)
            return isinstance(obj, dict) and all(
                isinstance(k, args[0]) and isinstance(v, args[1]) for k, v in obj.items()
            )
        if tp in (int, float) and isinstance(obj, bool):
            return False  # bool is an int subclass, never a valid int/float option value
        if tp is float and isinstance(obj, int):
            return True
        return isinstance(obj, tp)

    def add(
        self,
        cfg_key: str,
        type_: Any,
        help: str,
        default: CfgVal = None,
        required: bool = False,
    ) -> None:
        """Registers a config option. Required options must not have a default."""
        if required and default is not None:
            raise ValueError(
                f"run option {cfg_key!r} is required and has default {default!r}: "
                "a required option cannot have a default; drop one of them"
            )
        if default is not None and not runopts.is_type(default, type_):
            raise TypeError(
                f"run option {cfg_key!r}: default {default!r} is not of type {get_type_name(type_)}"
            )
        self._opts[cfg_key] = runopt(default, type_, required, help)

    def update(self, other: runopts) -> None:
        """Adds every option of ``other`` (its options win on a name clash)."""
        self._opts.update(other._opts)
        self._aliases.update(other._aliases)

    def __or__(self, other: runopts) -> runopts:
        """A new runopts with the options of both; ``other``'s win on a name clash.

        >>> first, second = runopts(), runopts()
        >>> first.add("foo", type_=str, default="a", help="foo option")
        >>> second.add("bar", type_=int, default=1, help="bar option")
        >>> sorted(name for name, _ in first | second)
        ['bar', 'foo']
        """
        if not isinstance(other, runopts):
            return NotImplemented
        merged = runopts()
        merged.update(self)
        merged.update(other)
        return merged

    def _add_alias(self, alias: str, name: str, rank: int) -> None:
        """Lets ``alias`` also name the registered option ``name``; when one option is given
        under several spellings, its own name wins, then the alias of lowest ``rank`` (>= 1)."""
        if alias != name:
            self._aliases[alias] = (name, rank)

    # rank of a camelCase spelling matched through its snake_case: after every declared alias
    _SNAKE_OF_CAMEL_RANK = 1000

    def _ranked(self, name: str) -> tuple[str, int] | None:
        """The registered option ``name`` spells and how exact the spelling is (lower wins):
        0 the name itself, then declared aliases, then the snake_case of a camelCase name."""
        if name in self._opts:
            return name, 0
        if name in self._aliases:
            return self._aliases[name]
        snake = camel_to_snake(name)
        if snake in self._opts:
            return snake, self._SNAKE_OF_CAMEL_RANK
        if snake in self._aliases:
            return self._aliases[snake][0], self._SNAKE_OF_CAMEL_RANK
        return None

    def _canonical(self, name: str) -> str | None:
        ranked = self._ranked(name)
        return ranked[0] if ranked is not None else None

    def _by_option(self, cfg: Mapping[str, CfgVal]) -> dict[str, tuple[str, CfgVal]]:
        """Maps each option named in ``cfg`` to the (key, value) that sets it.

        When one option is spelled twice (``cluster_name`` and ``clusterName``), the most
        exact spelling wins whatever the order of the keys.

        Raises:
            InvalidRunConfigException: a key that is not a str or names no option.
        """
        chosen: dict[str, tuple[str, CfgVal, int]] = {}
        for key, value in cfg.items():
            if not isinstance(key, str):
                raise InvalidRunConfigException(
                    "cfg",
                    key,
                    "run option names must be str",
                    f"use one of: {', '.join(sorted(self._opts)) or '(this scheduler has none)'}",
                )
            ranked = self._ranked(key)
            if ranked is None:
                # the value of a misspelt option may be a credential: name its type only
                raise InvalidRunConfigException(
                    key,
                    f"<{type(value).__name__}>",
                    f"unknown run option{did_you_mean(key, self._opts)}",
                    f"use one of: {', '.join(sorted(self._opts)) or '(this scheduler has none)'}",
                )
            name, rank = ranked
            if name not in chosen or rank < chosen[name][2]:
                chosen[name] = (key, value, rank)
        return {name: (key, value) for name, (key, value, _) in chosen.items()}

    def get(self, name: str) -> runopt | None:
        """Returns the registered option, or None. Accepts camelCase names."""
        canonical = self._canonical(name)
        return self._opts[canonical] if canonical is not None else None

    def resolve(self, cfg: Mapping[str, CfgVal]) -> dict[str, CfgVal]:
        """Validates ``cfg`` against the registered options and fills in defaults.

        Keys may be camelCase; when one option is given under two spellings, the exact name
        wins over its camelCase twin.

        Raises:
            InvalidRunConfigException: an unknown option (with a did-you-mean), a missing
                required option, or a value of the wrong type.
        """
        check_type(
            "cfg",
            cfg,
            Mapping,
            "must be a mapping of run option names to values",
            "pass e.g. {'log_dir': '/tmp/logs'} (or -cfg log_dir=/tmp/logs)",
            error=InvalidRunConfigException,
        )
        resolved = {name: value for name, (_, value) in self._by_option(cfg).items()}
        for name, opt in self._opts.items():
            value = resolved.get(name)
            if value is None:
                if opt.is_required:
                    raise InvalidRunConfigException(
                        name,
                        None,
                        f"required run option is missing ({opt.help})",
                        f"pass it, e.g. -cfg {name}=VALUE or cfg={{'{name}': ...}}",
                    )
                resolved[name] = opt.default
            elif not runopts.is_type(value, opt.opt_type):
                raise InvalidRunConfigException(
                    name,
                    _shown(name, value),
                    f"expected {get_type_name(opt.opt_type)}, got {type(value).__name__}",
                    f"pass a {get_type_name(opt.opt_type)} value",
                )
            elif isinstance(value, float) and not math.isfinite(value):
                raise InvalidRunConfigException(
                    name,
                    _shown(name, value),
                    "must be a finite number (NaN and infinities cannot work)",
                    "pass a finite number, e.g. 30.0",
                )
        return resolved

    def cfg_from_str(self, cfg_str: str) -> dict[str, CfgVal]:
        """Parses ``K1=V1,K2=V2`` into a cfg, casting each value to its option's type.

        Pairs are joined by ``,`` or ``;``. Because list values use the same delimiters, the
        last delimiter before a ``=`` separates pairs. Unknown keys are ignored; required and
        default options are not checked (call :meth:`resolve` for that).

        >>> opts = runopts()
        >>> opts.add("FOO", type_=list[str], default=["a"], help="an optional list option")
        >>> opts.add("BAR", type_=str, required=True, help="a required str option")
        >>> opts.cfg_from_str("")
        {}
        >>> opts.cfg_from_str("UNKNOWN=VALUE")
        {}
        >>> opts.cfg_from_str("FOO=v1")
        {'FOO': ['v1']}
        >>> opts.cfg_from_str("FOO=v1;v2;BAR=v3")
        {'FOO': ['v1', 'v2'], 'BAR': 'v3'}

        Raises:
            InvalidRunConfigException: ``cfg_str`` is not a str, is not ``K=V`` pairs, or a
                value does not cast to its option's type (floats must be finite).
        """
        check_type(
            "cfg",
            cfg_str,
            str,
            "must be the options as one str of KEY=VALUE pairs",
            "pass e.g. 'log_dir=/tmp/logs,priority=2' (or '' for none)",
            error=InvalidRunConfigException,
        )
        if not cfg_str.strip():
            return {}
        cfg: dict[str, CfgVal] = {}
        for key, raw in cfg_str_to_pairs(cfg_str).items():
            canonical = self._canonical(key)
            if canonical is None:
                continue
            try:
                cfg[canonical] = self._opts[canonical].cast_to_type(raw)
            except (TypeError, ValueError) as e:
                raise InvalidRunConfigException(
                    canonical,
                    _shown(canonical, raw),
                    str(e),
                    f"pass a {get_type_name(self._opts[canonical].opt_type)}",
                ) from None
        return cfg

    def cfg_from_json_repr(self, json_repr: str) -> dict[str, CfgVal]:
        """Converts a JSON object to a cfg for these options (unknown keys are ignored).

        >>> opts = runopts()
        >>> opts.add("tags", type_=list[str], help="tags")
        >>> opts.cfg_from_json_repr('{"tags": ["a", 1], "other": 2}')
        {'tags': ['a', '1']}
        """
        import json

        try:
            loaded = json.loads(json_repr)
        except json.JSONDecodeError as e:
            raise InvalidRunConfigException(
                "cfg", json_repr, f"not valid JSON ({e})", "pass a JSON object"
            ) from None
        if not isinstance(loaded, dict):
            raise InvalidRunConfigException(
                "cfg", json_repr, "not a JSON object", 'pass {"option": value, ...}'
            )
        cfg: dict[str, CfgVal] = {}
        for key, value in loaded.items():
            canonical = self._canonical(key)
            if canonical is None:
                continue
            tp = self._opts[canonical].opt_type
            if _is_list_type(tp) and isinstance(value, list):
                cfg[canonical] = [str(v) for v in value]
            elif _is_dict_type(tp) and isinstance(value, dict):
                cfg[canonical] = {str(k): str(v) for k, v in value.items()}
            else:
                cfg[canonical] = value
        return cfg

    def __repr__(self) -> str:
        required = [(k, v) for k, v in self._opts.items() if v.is_required]
        optional = [(k, v) for k, v in self._opts.items() if not v.is_required]
        lines = []
        for name, opt in required + optional:
            default = "(required)" if opt.is_required else f"(default: {opt.default})"
            lines.append(
                f"    {name} ({get_type_name(opt.opt_type)}, {default})\n        {opt.help}"
            )
        return "\n".join(lines) if lines else "    (no run options)"
