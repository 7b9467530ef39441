"""The one JSON printer of the CLI: what ``--json`` prints on stdout, for scripts.

Documents (``status --json``, ``list --json``, ...) are printed indented, one per command;
streams (``log --json``) are printed as JSON lines, one compact object per line. Both are
flushed at once, so a reader of a pipe sees each as soon as it is written.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["json_line", "print_json", "print_json_line"]


def _default(value: object) -> object:
    # enums (AppState) by name, anything else as its text: --json never fails on a value
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else str(value)


def print_json(
    data: Any, file: TextIO | None = None, redact: Callable[[str], str] | None = None
) -> None:
    """Prints ``data`` as one indented JSON document (stdout unless ``file``); ``redact``
    (e.g. a :class:`~anylaunch.specs.secrets.Redactor`) masks secrets in the JSON text.

    >>> print_json({"app_handle": "local_cwd://s/a", "state": "RUNNING"})
    {
      "app_handle": "local_cwd://s/a",
      "state": "RUNNING"
    }
    >>> from anylaunch.specs.secrets import Redactor
    >>> print_json({"msg": "token s3cr3t-1"}, redact=Redactor(["s3cr3t-1"]))
    {
      "msg": "token ***"
    }
    """
    out = file or sys.stdout
    text = json.dumps(data, indent=2, default=_default)
    out.write((redact(text) if redact is not None else text) + "\n")
    out.flush()


def json_line(data: Any) -> str:
    """``data`` as one line of JSON (no newline in it, whatever the values hold).

    >>> json_line({"role": "echo", "replica": 0, "line": "a\\tb"})
    '{"role": "echo", "replica": 0, "line": "a\\\\tb"}'
    """
    return json.dumps(data, default=_default)


def print_json_line(data: Any, file: TextIO | None = None) -> None:
    """Prints ``data`` as one JSON line (stdout unless ``file``) and flushes it.

    >>> print_json_line({"role": "echo", "replica": 0, "line": "hi"})
    {"role": "echo", "replica": 0, "line": "hi"}
    """
    out = file or sys.stdout
    out.write(json_line(data) + "\n")
    out.flush()
