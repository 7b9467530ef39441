"""The arguments of one ``anylaunch run``, from its flags or as JSON (``run --stdin``).

``anylaunch run --stdin`` reads one JSON object from standard input instead of flags, with
the fields of TorchX's ``torchx run --stdin``:

=====================  ==============  ========  =============================================
field                  JSON type       required  meaning
=====================  ==============  ========  =============================================
``component_name``     string          yes       component to run (``utils.echo``, ``f.py:fn``)
``scheduler``          string          yes       scheduler to run on
``scheduler_args``     object          yes       run options, ``{"log_dir": "/tmp/x"}``
``component_args``     object          no        ``{param: value}`` for the component
``component_args_str`` array of str    no        CLI-style arguments; win when not empty
``dryrun``             boolean         no        print the request, submit nothing
``wait``               boolean         no        wait for the app to end
``log``                boolean         no        stream the logs while waiting
``tee_logs``           boolean         no        as ``--tee_logs``
``workspace``          string          no        as ``--workspace`` (``""``: none)
``parent_run_id``      string or null  no        as ``--parent_run_id``
=====================  ==============  ========  =============================================

>>> args = run_args_from_json('{"component_name": "utils.echo", "scheduler": "local_cwd",'
...                           ' "scheduler_args": {}, "component_args": {"msg": "hi"}}')
>>> args.component_name, args.component_args, args.wait
('utils.echo', {'msg': 'hi'}, False)
>>> run_args_from_json('{"component_name": "utils.echo", "scheduler": "local_cwd"}')
Traceback (most recent call last):
...
anylaunch.cli.run_args.RunArgsError: run --stdin: scheduler_args=<missing> is invalid: ...
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from anylaunch.specs.errors import InvalidSpecError, did_you_mean

__all__ = ["AnylaunchRunArgs", "RunArgsError", "run_args_from_json"]

_EXAMPLE = '{"component_name": "utils.echo", "scheduler": "local_cwd", "scheduler_args": {}}'


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


class RunArgsError(InvalidSpecError):
    """The JSON given to ``anylaunch run --stdin`` is malformed, or a field is missing, unknown
    or of the wrong type (a ``ValueError``)."""

    def __init__(self, field: str, value: object, problem: str, fix: str) -> None:
        name = "run --stdin" if not field else f"run --stdin: {field}"
        super().__init__(name, value, problem, fix)


@dataclasses.dataclass
class AnylaunchRunArgs:
    """What ``anylaunch run`` runs and how (TorchX's ``TorchXRunArgs``).

    Attributes:
        component_name: the component (``utils.echo`` or ``path/file.py:fn``)
        scheduler: the scheduler's name
        scheduler_args: run options as given (JSON values)
        dryrun: print the app and request only
        wait: wait for the app to end
        log: stream the logs while waiting
        workspace: the workspace (None: the component's own)
        parent_run_id: the run this one belongs to
        tee_logs: prefix each log line with its replica, colored on a terminal
        component_args: ``{param: value}`` for the component
        component_args_str: CLI-style arguments; used instead when not empty
    """

    component_name: str
    scheduler: str
    scheduler_args: dict[str, Any]
    dryrun: bool = False
    wait: bool = False
    log: bool = False
    workspace: str | None = None
    parent_run_id: str | None = None
    tee_logs: bool = False
    component_args: dict[str, Any] = dataclasses.field(default_factory=dict)
    component_args_str: list[str] = dataclasses.field(default_factory=list)

    def arguments(self) -> list[str] | dict[str, Any]:
        """The component's arguments: the CLI-style ones when given, else the mapping.

        >>> AnylaunchRunArgs("utils.echo", "local_cwd", {}, component_args={"msg": "a"},
        ...                  component_args_str=["--msg", "b"]).arguments()
        ['--msg', 'b']
        """
        return list(self.component_args_str) if self.component_args_str else self.component_args


_FIELDS = [f.name for f in dataclasses.fields(AnylaunchRunArgs)]
_REQUIRED = [
    f.name
    for f in dataclasses.fields(AnylaunchRunArgs)
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
]
_BOOLS = ("dryrun", "wait", "log", "tee_logs")


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _shown(value: object) -> object:
    # scalars are shown as given; containers only by type (they may hold secrets)
    return value if not isinstance(value, list | dict) else f"<a JSON {_json_type(value)}>"


def _check(name: str, value: object, ok: bool, expected: str, fix: str) -> None:
    if not ok:
        raise RunArgsError(
            name, _shown(value), f"must be {expected}, not a JSON {_json_type(value)}", fix
        )


def load_json_object(text: str) -> dict[str, Any]:
    """Parses ``text`` (standard input) as one JSON object.

    >>> load_json_object('{"a": 1}')
    {'a': 1}
    >>> load_json_object('[1]')
    Traceback (most recent call last):
    ...
    anylaunch.cli.run_args.RunArgsError: run --stdin='<a JSON array>' is invalid: ...

    Raises:
        RunArgsError: the text is empty, not JSON, or not an object.
    """
    fix = f"pipe one JSON object of run arguments, e.g. echo '{_EXAMPLE}' | anylaunch run --stdin"
    if not text.strip():
        raise RunArgsError("", "", "standard input is empty", fix)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        # the input is not echoed: it may hold secrets
        problem = f"not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})"
        raise RunArgsError("", f"<{len(text)} characters>", problem, fix) from None
    if not isinstance(data, dict):
        raise RunArgsError("", _shown(data), "must be a JSON object of run arguments", fix)
    return data


def run_args_from_json(text: str) -> AnylaunchRunArgs:
    """Parses and checks the run arguments ``anylaunch run --stdin`` read.

    Raises:
        RunArgsError: malformed JSON, or a missing, unknown or wrongly typed field; the message
            names the field and the fix.
    """
    data = load_json_object(text)
    for key in data:
        if key not in _FIELDS:
            hint = did_you_mean(key, _FIELDS)
            raise RunArgsError(
                key,
                _shown(data[key]),
                f"is not a run argument.{hint}",
                f"remove it; the fields are {', '.join(_FIELDS)}",
            )
    for key in _REQUIRED:
        if key not in data:
            example = {"scheduler": '"local_cwd"', "scheduler_args": "{}"}.get(key, '"utils.echo"')
            raise RunArgsError(key, _MISSING, "the field is required", f'add "{key}": {example}')
    for key in ("component_name", "scheduler"):
        value = data[key]
        ok = isinstance(value, str) and bool(value.strip())
        _check(key, value, ok, "a non-empty string", f'set "{key}" to a name, e.g. {_EXAMPLE}')
    for key in ("scheduler_args", "component_args"):
        value = data.get(key, {})
        ok = isinstance(value, dict)
        _check(key, value, ok, "an object", f'set "{key}" to {{"name": value, ...}} or {{}}')
    for key in _BOOLS:
        value = data.get(key, False)
        _check(key, value, isinstance(value, bool), "a boolean", f'set "{key}" to true or false')
    for key in ("workspace", "parent_run_id"):
        value = data.get(key)
        ok = value is None or isinstance(value, str)
        _check(key, value, ok, "a string or null", f'set "{key}" to a string, or leave it out')
    strs = data.get("component_args_str", [])
    ok = isinstance(strs, list) and all(isinstance(s, str) for s in strs)
    _check(
        "component_args_str",
        strs,
        ok,
        "an array of strings",
        'set it to CLI-style arguments, e.g. ["--msg", "hi"]',
    )
    args = AnylaunchRunArgs(**data)
    if args.workspace == "":
        args.workspace = None
    return args
