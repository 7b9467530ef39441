"""Job arrays and sweeps: one app definition run over many indices under one handle.

An app with ``array=ArraySpec(size, parallelism, min_success_ratio)`` runs its whole role once
per index ``0 .. size-1``, at most ``parallelism`` indices at once, as one submission where the
backend has native arrays (Slurm ``--array``, LSF ``name[1-N]``, AWS Batch ``arrayProperties``,
a Kubernetes Indexed Job). Index ``i`` sees ``ANYLAUNCH_ARRAY_INDEX=i`` and the macro
``${array_index}`` in its args and env. :func:`sweep` builds an array from a list of parameter
mappings: index ``i`` also sees its parameters as ``${param.<name>}`` and
``ANYLAUNCH_PARAM_<NAME>``.

>>> from anylaunch.specs import AppDef, Role
>>> app = AppDef("train", [Role("trainer", image=".", entrypoint="python",
...                             args=["train.py", "--lr", "${param.lr}"])])
>>> swept = sweep(app, [{"lr": 0.1}, {"lr": 0.01}], parallelism=1)
>>> swept.array.size, swept.array.limit
(2, 1)
>>> resolve_index(swept.roles[0], swept.array, 1).args
['train.py', '--lr', '0.01']
>>> resolve_index(swept.roles[0], swept.array, 1).env["ANYLAUNCH_PARAM_LR"]
'0.01'
"""

from __future__ import annotations

import copy
import math
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from anylaunch.specs.errors import InvalidSpecError

if TYPE_CHECKING:
    from anylaunch.specs.api import AppDef, Role

ARRAY_INDEX_ENV = "ANYLAUNCH_ARRAY_INDEX"
ARRAY_SIZE_ENV = "ANYLAUNCH_ARRAY_SIZE"
PARAM_ENV_PREFIX = "ANYLAUNCH_PARAM_"
MAX_ARRAY_SIZE = 100_000
#: past this many indices a dryrun shows the first and last few resolved commands only
PREVIEW_INDICES = 24

_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _ArrayTemplate(string.Template):
    # ${array_index} and ${param.name}; every other ${...} is left for the scheduler's macros
    idpattern = r"(?a:array_index|param\.[A-Za-z_][A-Za-z0-9_]*)"
    flags = re.RegexFlag(0)


def _array_error(field_name: str, value: object, problem: str, fix: str) -> InvalidSpecError:
    return InvalidSpecError(field_name, value, problem, fix)


def _check_count(field_name: str, value: object, low: int, high: int, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _array_error(field_name, value, "must be an int", fix)
    if not low <= value <= high:
        raise _array_error(field_name, value, f"must be between {low} and {high}", fix)
    return value


def param_value(name: str, value: object) -> str:
    """The text form of one sweep parameter value (str, int, finite float or bool).

    >>> param_value("lr", 0.5), param_value("layers", 3), param_value("opt", "adam")
    ('0.5', '3', 'adam')
    >>> param_value("lr", float("nan"))
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: params[].lr=nan is invalid: must be finite. Fix: pass a finite number
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise _array_error(f"params[].{name}", value, "must be finite", "pass a finite number")
    if isinstance(value, (str, int, float)):  # bool is an int
        text = str(value)
        if "\x00" in text:
            raise _array_error(
                f"params[].{name}", value, "contains a NUL byte", "remove the NUL byte"
            )
        return text
    raise _array_error(
        f"params[].{name}",
        value,
        f"is a {type(value).__name__}",
        "pass a str, int, float or bool (encode structured values, e.g. as JSON text)",
    )


def param_env_name(name: str) -> str:
    """The environment variable that carries parameter ``name``.

    >>> param_env_name("learning_rate")
    'ANYLAUNCH_PARAM_LEARNING_RATE'
    """
    return PARAM_ENV_PREFIX + name.upper()


def _check_params(params: object) -> tuple[dict[str, str], ...]:
    if isinstance(params, (str, bytes, Mapping)) or not isinstance(params, Iterable):
        raise _array_error(
            "params",
            params,
            "must be a list of mappings",
            "pass one mapping of parameter name to value per index, e.g. [{'lr': 0.1}]",
        )
    rows = list(params)
    keys: list[str] | None = None
    checked: list[dict[str, str]] = []
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise _array_error(
                f"params[{index}]", row, "is not a mapping", "pass {'name': value, ...}"
            )
        row_keys = list(row)
        for name in row_keys:
            if not isinstance(name, str) or not _PARAM_NAME.fullmatch(name):
                raise _array_error(
                    f"params[{index}]",
                    name,
                    "is not a valid parameter name",
                    "use identifiers such as 'lr' or 'batch_size' (letters, digits, _)",
                )
        if keys is None:
            keys = row_keys
            upper = [k.upper() for k in keys]
            clash = sorted({k for k in keys if upper.count(k.upper()) > 1})
            if clash:
                raise _array_error(
                    "params[0]",
                    clash,
                    "names differ only in case, but share one ANYLAUNCH_PARAM_ variable",
                    "rename one of them",
                )
        elif set(row_keys) != set(keys):
            raise _array_error(
                f"params[{index}]",
                sorted(row_keys),
                f"has other keys than params[0] ({sorted(keys)})",
                "give every index the same parameter names",
            )
        checked.append({k: param_value(k, row[k]) for k in keys})
    return tuple(checked)


@dataclass(frozen=True)
class ArraySpec:
    """How an app runs as an array: ``size`` indices, at most ``parallelism`` at once.

    Args:
        size: number of indices (1..100000); index ``i`` runs with ``ANYLAUNCH_ARRAY_INDEX=i``
        parallelism: at most this many indices run at once (1..size); None: as many as the
            backend allows
        min_success_ratio: the app SUCCEEDED when at least this share of its indices did,
            in (0, 1]
        params: per-index sweep parameters (see :func:`sweep`), as text; empty for a plain
            array
        indices: the indices to run (a retry's failed ones); None runs all of them

    >>> ArraySpec(20, parallelism=4).limit
    4
    >>> ArraySpec(20, min_success_ratio=0.9).required_successes(20)
    18
    >>> ArraySpec(0)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: ArraySpec.size=0 is invalid: must be between 1 and 100000. Fix: pass the number of indices, e.g. ArraySpec(20)
    """

    size: int
    parallelism: int | None = None
    min_success_ratio: float = 1.0
    params: tuple[Mapping[str, str], ...] = field(default=(), repr=False)
    indices: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        _check_count(
            "ArraySpec.size",
            self.size,
            1,
            MAX_ARRAY_SIZE,
            "pass the number of indices, e.g. ArraySpec(20)",
        )
        if self.parallelism is not None:
            _check_count(
                "ArraySpec.parallelism",
                self.parallelism,
                1,
                self.size,
                "pass None (no limit) or at most size indices at once",
            )
        ratio = self.min_success_ratio
        if (
            isinstance(ratio, bool)
            or not isinstance(ratio, (int, float))
            or not math.isfinite(ratio)
            or not 0 < ratio <= 1
        ):
            raise _array_error(
                "ArraySpec.min_success_ratio",
                ratio,
                "must be a number in (0, 1]",
                "pass e.g. 1.0 (every index must succeed) or 0.9",
            )
        params = _check_params(self.params) if self.params else ()
        if params and len(params) != self.size:
            raise _array_error(
                "ArraySpec.params",
                f"{len(params)} rows",
                f"must hold one row per index ({self.size})",
                "build sweeps with anylaunch.specs.sweep(app, params)",
            )
        object.__setattr__(self, "params", params)
        if self.indices is not None:
            object.__setattr__(self, "indices", self._checked_indices(self.indices))

    def _checked_indices(self, indices: object) -> tuple[int, ...]:
        fix = f"pass distinct indices between 0 and {self.size - 1}"
        if isinstance(indices, (str, bytes)) or not isinstance(indices, Iterable):
            raise _array_error("ArraySpec.indices", indices, "must be a list of ints", fix)
        picked = [_check_count("ArraySpec.indices[]", i, 0, self.size - 1, fix) for i in indices]
        if not picked or len(set(picked)) != len(picked):
            raise _array_error("ArraySpec.indices", picked, "must be distinct and not empty", fix)
        return tuple(sorted(picked))

    @property
    def limit(self) -> int:
        """The most indices that run at once."""
        return self.parallelism if self.parallelism is not None else self.size

    @property
    def selected(self) -> tuple[int, ...]:
        """The indices this submission runs, ascending (all of them unless a retry's).

        >>> ArraySpec(4).selected, ArraySpec(4, indices=[3, 1]).selected
        ((0, 1, 2, 3), (1, 3))
        """
        return self.indices if self.indices is not None else tuple(range(self.size))

    def required_successes(self, count: int | None = None) -> int:
        """How many of ``count`` (default: the selected) indices must succeed."""
        total = len(self.selected) if count is None else count
        return max(1, math.ceil(total * self.min_success_ratio - 1e-9))

    def values(self, index: int) -> dict[str, str]:
        """The macro values of ``index``: ``array_index`` and ``param.<name>``."""
        found = {"array_index": str(index)}
        if self.params:
            found.update({f"param.{k}": v for k, v in self.params[index].items()})
        return found

    def env(self, index: int) -> dict[str, str]:
        """The env vars index ``index`` gets.

        >>> ArraySpec(3, params=({"a": "x"}, {"a": "y"}, {"a": "z"})).env(2)
        {'ANYLAUNCH_ARRAY_INDEX': '2', 'ANYLAUNCH_ARRAY_SIZE': '3', 'ANYLAUNCH_PARAM_A': 'z'}
        """
        found = {ARRAY_INDEX_ENV: str(index), ARRAY_SIZE_ENV: str(self.size)}
        if self.params:
            found.update({param_env_name(k): v for k, v in self.params[index].items()})
        return found

    def param_names(self) -> list[str]:
        """The sweep's parameter names (empty for a plain array)."""
        return list(self.params[0]) if self.params else []


def sweep(
    app: AppDef,
    params: Sequence[Mapping[str, object]],
    parallelism: int | None = None,
    min_success_ratio: float = 1.0,
) -> AppDef:
    """Returns a copy of ``app`` that runs once per parameter mapping, as one array.

    Index ``i`` sees ``params[i]`` as ``${param.<name>}`` in args and env and as env vars
    ``ANYLAUNCH_PARAM_<NAME>``; values are str, int, finite float or bool.

    >>> from anylaunch.specs import AppDef, Role
    >>> app = AppDef("a", [Role("r", image=".", entrypoint="echo", args=["${param.n}"])])
    >>> sweep(app, [{"n": 1}, {"n": 2}]).array.params[1]
    {'n': '2'}
    >>> sweep(app, [{"n": 1}, {"m": 2}])
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: params[1]=['m'] is invalid: has other keys than params[0] (['n']). Fix: give every index the same parameter names
    """
    from anylaunch.specs.api import AppDef

    if not isinstance(app, AppDef):
        raise _array_error(
            "app", type(app).__name__, "must be an AppDef", "pass anylaunch.specs.AppDef(...)"
        )
    rows = _check_params(params)
    if not rows:
        raise _array_error("params", [], "is empty", "pass at least one mapping of parameters")
    swept = copy.deepcopy(app)
    swept.array = ArraySpec(
        len(rows), parallelism=parallelism, min_success_ratio=min_success_ratio, params=rows
    )
    swept.validate_array()
    return swept


def substitute_index(text: str, array: ArraySpec, index: int) -> str:
    """``text`` with ``${array_index}`` and ``${param.<name>}`` of ``index`` filled in.

    >>> substitute_index("shard-${array_index}-${app_id}", ArraySpec(8), 3)
    'shard-3-${app_id}'
    """
    return _ArrayTemplate(text).safe_substitute(array.values(index))


def substitute_shell_refs(text: str) -> str:
    """``text`` with the array macros turned into references to their env vars, for
    backends whose one command serves every index (a shell expands them at run time).

    >>> substitute_shell_refs("--lr=${param.lr} --i ${array_index}")
    '--lr=${ANYLAUNCH_PARAM_LR} --i ${ANYLAUNCH_ARRAY_INDEX}'
    """

    def ref(match: re.Match[str]) -> str:
        name = match.group("braced") or match.group("named")
        if name is None:
            return match.group(0)
        if name == "array_index":
            return "${" + ARRAY_INDEX_ENV + "}"
        return "${" + param_env_name(name.split(".", 1)[1]) + "}"

    return _ArrayTemplate.pattern.sub(ref, text)


def uses_array_macros(role: Role) -> bool:
    """True when the role's args or env mention ``${array_index}`` or ``${param.*}``."""
    texts = [*role.args, *role.env.values()]
    return any(_ArrayTemplate.pattern.search(t) for t in texts if isinstance(t, str))


def _map_role(role: Role, substitute: Any) -> Role:
    from anylaunch.specs.substitution import substitute_nested

    role = copy.deepcopy(role)
    role.args = [substitute(arg) for arg in role.args]
    role.env = {k: substitute(v) for k, v in role.env.items()}
    role.metadata = substitute_nested(role.metadata, substitute)
    return role


def resolve_index(role: Role, array: ArraySpec, index: int) -> Role:
    """A copy of ``role`` as index ``index`` runs it: array macros filled in, env added."""
    resolved = _map_role(role, lambda text: substitute_index(text, array, index))
    resolved.env = {**resolved.env, **array.env(index)}
    return resolved


def shell_role(role: Role) -> Role:
    """A copy of ``role`` whose array macros refer to env vars a shell prelude sets."""
    return _map_role(role, substitute_shell_refs)


def retry_spec(array: ArraySpec, indices: Iterable[int]) -> ArraySpec:
    """The spec that reruns only ``indices`` of ``array`` (same size, params and ratio)."""
    return replace(array, indices=tuple(indices))


def preview(app: AppDef, limit: int = PREVIEW_INDICES) -> str:
    """Each index's resolved command, one line each, summarised past ``limit`` indices.

    >>> from anylaunch.specs import AppDef, Role
    >>> app = AppDef("a", [Role("r", image=".", entrypoint="echo", args=["${array_index}"])],
    ...              array=ArraySpec(30, parallelism=2))
    >>> print(preview(app, limit=4))
    array: 30 indices, at most 2 at once, succeeds when 30 of 30 succeed
      [0] echo 0
      [1] echo 1
      ... 26 more ...
      [28] echo 28
      [29] echo 29
    """
    import shlex

    array = app.array
    if array is None:
        return ""
    picked = array.selected
    head = (
        f"array: {array.size} indices"
        + (f" (running {len(picked)}: a retry)" if array.indices is not None else "")
        + f", at most {array.limit} at once, succeeds when "
        + f"{array.required_successes()} of {len(picked)} succeed"
    )
    shown: list[int | None] = list(picked)
    if len(picked) > limit:
        half = limit // 2
        shown = [*picked[:half], None, *picked[-half:]]
    lines = [head]
    for index in shown:
        if index is None:
            lines.append(f"  ... {len(picked) - 2 * (limit // 2)} more ...")
            continue
        for role in app.roles:
            resolved = resolve_index(role, array, index)
            command = shlex.join([resolved.entrypoint, *resolved.args])
            lines.append(f"  [{index}] {command}")
    return "\n".join(lines)
