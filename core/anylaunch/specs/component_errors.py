"""The error of a component whose body raised while it was being made into an app.

A component is the user's own code: when it raises (a ``KeyError`` on a missing setting, a
``ValueError`` on an argument it refuses), the error names the component and the line of its
source that raised, so that a one-line message at a terminal or in a task log says where to
look. Secret arguments (a parameter or an env key whose name says so) are masked in it.

>>> def train(lr: float = 0.1) -> None:
...     raise ValueError("lr too high")
>>> try:
...     train()
... except ValueError as e:
...     err = ComponentRaisedError(train, e)
>>> err.field, err.value, err.line
("component 'train'", 'ValueError', 2)
"""

from __future__ import annotations

import functools
import inspect
import traceback
from collections.abc import Callable, Iterable, Mapping

from anylaunch.specs.errors import InvalidSpecError

__all__ = ["ComponentRaisedError", "secret_arguments"]

#: Longest excerpt of the component's own error message kept in ours.
MAX_MESSAGE = 300


def _code_file(fn: Callable[..., object]) -> str | None:
    """The source file of ``fn`` (through ``functools.partial`` and decorators), if any."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None and not inspect.isroutine(fn):  # a callable object: its class's __call__
        code = getattr(type(fn).__call__, "__code__", None)
    return None if code is None else str(code.co_filename)


def _raising_frame(fn: Callable[..., object], error: BaseException) -> traceback.FrameSummary:
    """The deepest frame of ``error``'s traceback in the component's own file (else the
    deepest frame at all): the line of the component's source that raised."""
    frames = traceback.extract_tb(error.__traceback__)
    source = _code_file(fn)
    own = [f for f in frames if source is not None and f.filename == source]
    return (own or frames)[-1]


def secret_arguments(arguments: Mapping[str, object]) -> list[str]:
    """The values among a component's arguments that are secret: a str argument whose
    parameter name says it is (``token``, ``api_key``), and the secret entries of a mapping
    argument (``env={"HF_TOKEN": ...}``).

    >>> secret_arguments({"token": "t-123", "msg": "hi", "env": {"HF_TOKEN": "hf-1", "LR": "1"}})
    ['t-123', 'hf-1']
    """
    from anylaunch.specs.secrets import is_secret_env_name

    found: list[str] = []
    for name, value in arguments.items():
        if isinstance(value, str) and is_secret_env_name(name):
            found.append(value)
        elif isinstance(value, Mapping):
            found += [str(v) for k, v in value.items() if is_secret_env_name(str(k))]
    return found


class ComponentRaisedError(InvalidSpecError):
    """The body of a component raised while it was being materialized into an AppDef.

    ``field`` names the component, ``value`` is the type of what it raised, and the message
    gives the file and line of the component's source that raised, that line's text and the
    component's own message (secrets masked). The original exception is ``__cause__``.

    Args:
        component_fn: the component function that raised
        error: what it raised
        secrets: argument values to mask in the message (see :func:`secret_arguments`)
    """

    def __init__(
        self,
        component_fn: Callable[..., object],
        error: BaseException,
        secrets: Iterable[str] = (),
    ) -> None:
        from anylaunch.specs.secrets import Redactor

        redact = Redactor(secrets)
        name = str(getattr(component_fn, "__name__", type(component_fn).__name__))
        frames = traceback.extract_tb(error.__traceback__)
        frame = _raising_frame(component_fn, error) if frames else None
        message = redact(" ".join(str(error).split()))
        if len(message) > MAX_MESSAGE:
            message = message[: MAX_MESSAGE - 3] + "..."
        #: the component's name
        self.component = name
        #: the source file and line that raised (None: no traceback)
        self.filename: str | None = None if frame is None else frame.filename
        self.line: int | None = None if frame is None else frame.lineno
        where = ""
        if frame is not None:
            text = redact((frame.line or "").strip())
            where = f" at {frame.filename}:{frame.lineno}" + (f" (`{text}`)" if text else "")
        said = f": {message}" if message else ""
        super().__init__(
            f"component {name!r}",
            type(error).__name__,
            f"its body raised {type(error).__name__}{said}{where}",
            "fix the component's code at that line, or pass it arguments it accepts "
            "(see `anylaunch run -s SCHEDULER COMPONENT --help`)",
        )
