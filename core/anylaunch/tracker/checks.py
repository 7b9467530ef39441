"""Checks of what a job hands the tracker: run ids, names, paths and JSON metadata.

Every check raises :class:`~anylaunch.specs.errors.InvalidSpecError` naming the field and the
fix. Names and ids are shown (shortened); metadata values never are, only their type: they
are the user's data and may be large.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any

from anylaunch.specs.errors import InvalidSpecError

__all__ = ["check_json", "check_metadata", "check_name", "check_path", "check_run_id"]

#: Longest run id, artifact name or metadata key accepted (a handle is far shorter).
MAX_ID_CHARS = 1024
_CONTROL = frozenset(chr(c) for c in range(32)) | {"\x7f"}


def _shown(value: str) -> str:
    return value if len(value) <= 80 else f"{value[:60]}...<{len(value)} characters>"


def _check_text(field: str, value: object, what: str, example: str) -> str:
    if not isinstance(value, str):
        raise InvalidSpecError(field, type(value).__name__, f"{what} must be a str", example)
    if not value.strip():
        raise InvalidSpecError(field, value, f"{what} must not be empty", example)
    if len(value) > MAX_ID_CHARS:
        raise InvalidSpecError(
            field,
            _shown(value),
            f"{what} is longer than {MAX_ID_CHARS} characters",
            f"use a shorter {what}",
        )
    if _CONTROL & set(value):
        raise InvalidSpecError(
            field,
            _shown(value),
            f"{what} holds a control character (NUL, newline, tab...)",
            "remove it",
        )
    return value


def check_run_id(field: str, value: object) -> str:
    """Returns ``value`` if it can be a run id: a non-empty str without control characters.

    >>> check_run_id("run_id", "local_cwd://s/train-1")
    'local_cwd://s/train-1'
    >>> check_run_id("run_id", "a\\x00b")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: run_id='a\\x00b' is invalid: a run id holds a control character (NUL, newline, tab...). Fix: remove it
    """
    return _check_text(field, value, "a run id", "pass the job's handle, e.g. 'local_cwd://s/a-1'")


def check_name(field: str, value: object) -> str:
    """Returns ``value`` if it can be an artifact name or a metadata key.

    >>> check_name("add_artifact.name", "model")
    'model'
    >>> check_name("add_artifact.name", "")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: add_artifact.name='' is invalid: a name must not be empty. Fix: pass a name such as 'model'
    """
    return _check_text(field, value, "a name", "pass a name such as 'model'")


def check_path(field: str, value: object) -> str:
    """Returns ``value`` (a str or ``os.PathLike``) as a str if it can be an artifact's path
    or URL.

    >>> from pathlib import Path
    >>> check_path("add_artifact.path", Path("/tmp/model.pt"))
    '/tmp/model.pt'
    >>> check_path("add_artifact.path", 3)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: add_artifact.path='int' is invalid: a path must be a str or a path. Fix: pass where the artifact is, e.g. 's3://bucket/model.pt'
    """
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    fix = "pass where the artifact is, e.g. 's3://bucket/model.pt'"
    if not isinstance(value, str):
        raise InvalidSpecError(field, type(value).__name__, "a path must be a str or a path", fix)
    return _check_text(field, value, "a path", fix)


def _check_tree(field: str, value: object, depth: int) -> None:
    fix = "pass a str, a finite number, a bool, None, or a list or dict of those"
    if depth > 32:
        raise InvalidSpecError(field, "<deeply nested>", "is nested more than 32 levels", fix)
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidSpecError(field, value, "numbers must be finite (JSON has no NaN)", fix)
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_tree(f"{field}[{i}]", item, depth + 1)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidSpecError(
                    f"{field}.<key>", type(key).__name__, "dict keys must be str", "use str keys"
                )
            _check_tree(f"{field}.{key}", item, depth + 1)
        return
    raise InvalidSpecError(field, type(value).__name__, "is not JSON-serializable", fix)


def check_json(field: str, value: object) -> Any:
    """Returns ``value`` as plain JSON data (tuples become lists) if it can be stored:
    str, finite numbers, bools, None, and lists and str-keyed dicts of those.

    >>> check_json("add_metadata.lr", (0.1, {"warmup": 10}))
    [0.1, {'warmup': 10}]
    >>> check_json("add_metadata.loss", float("nan"))
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: add_metadata.loss=nan is invalid: numbers must be finite (JSON has no NaN). Fix: pass a str, a finite number, a bool, None, or a list or dict of those
    >>> check_json("add_metadata.model", object())
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: add_metadata.model='object' is invalid: is not JSON-serializable. Fix: pass a str, a finite number, a bool, None, or a list or dict of those
    """
    _check_tree(field, value, 0)
    return json.loads(json.dumps(value, allow_nan=False))


def check_metadata(field: str, values: object) -> dict[str, Any]:
    """Returns ``values`` (a mapping of names to JSON data) checked, as a plain dict.

    >>> check_metadata("add_metadata", {"lr": 0.1, "layers": [1, 2]})
    {'lr': 0.1, 'layers': [1, 2]}
    """
    if not isinstance(values, Mapping):
        raise InvalidSpecError(
            field, type(values).__name__, "must be a mapping of names to values", "pass a dict"
        )
    return {
        check_name(f"{field}.<key>", k): check_json(f"{field}.{k}", v) for k, v in values.items()
    }
