"""How an app status reads: the text of ``AppStatus.format()`` and the YAML of its ``repr()``,
in TorchX's layouts.

A replica that failed may carry a *reply file* in its ``structured_error_msg``: the JSON error
file torchelastic writes, in one of two layouts. The nested one holds the error under
``message``::

    {"message": {"message": "RuntimeError: boom", "errorCode": 1,
                 "extraInfo": {"py_callstack": "...", "timestamp": "1700000000"}}}

and the flat one holds it beside the other fields::

    {"message": "RuntimeError: boom", "errorCode": 1, "timestamp": 1700000000}

(anylaunch's own schedulers write the flat layout with ``exit_code`` for ``errorCode``).
Any other text is shown as the error message itself, with ``<N/A>`` for what it cannot tell.

>>> from anylaunch.specs.status import AppState, AppStatus, ReplicaStatus, RoleStatus
>>> reply = '{"message": {"message": "RuntimeError: boom", "errorCode": 1}}'
>>> print(format_status(AppStatus(AppState.FAILED, roles=[RoleStatus("worker", [
...     ReplicaStatus(0, AppState.FAILED, "worker", "node-0", reply),
...     ReplicaStatus(1, AppState.CANCELLED, "worker", "node-1")])])))
AppStatus:
    State: FAILED
    Num Restarts: 0
    Roles:
 *worker[0]:FAILED (exitcode: 1)
        timestamp: <N/A>
        hostname: node-0
        error_msg: RuntimeError: boom
  worker[1]:CANCELLED (no reply file)
    Msg:
    Structured Error Msg: <NONE>
    UI URL: None
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.markers import NONE
from anylaunch.specs.status import AppState

if TYPE_CHECKING:
    from anylaunch.specs.status import AppStatus, ReplicaStatus, RoleStatus

__all__ = [
    "ERROR_MSG_HEADER",
    "NOT_AVAILABLE",
    "WRAP_WIDTH",
    "ErrorReply",
    "format_status",
    "parse_error_reply",
    "select_roles",
    "state_name",
    "state_repr",
    "status_yaml",
    "wrap_error_message",
]

#: What ``format()`` shows for a field the reply does not have.
NOT_AVAILABLE = "<N/A>"
#: The label of a replica's error message in ``format()``.
ERROR_MSG_HEADER = "    error_msg: "
#: A line of an error message is broken at the first space after this many characters.
WRAP_WIDTH = 80

# An error raised on an RPC worker and re-raised by its caller, e.g.
#   RuntimeError('On WorkerInfo(id=1, name=trainer:0:0):\n<traceback>\n')
# only that part of the message is shown.
_RPC_ERROR = re.compile(r"\w*\('On WorkerInfo\([^\n]+\):\n(?:[^\n]*\n)*'\)")
# An error nested in the text of another one (no exception chaining), e.g.
#   c10::Error: CUDA error: an illegal memory access was encountered\nException raised from ...
# only the line before "Exception" is shown.
_EMBEDDED_ERROR = re.compile(r"(?P<msg>[^\n]+)\nException")


def _keep(text: str) -> str:
    return text


class ErrorReply(NamedTuple):
    """What a replica's reply file says: the error message, the exit code and the time the
    error was recorded (seconds since the epoch), each as written (None when absent)."""

    message: str
    exitcode: object = None
    timestamp: object = None

    @property
    def exitcode_text(self) -> str:
        """The exit code as shown, ``<N/A>`` when the reply has none.

        >>> ErrorReply("boom", 3).exitcode_text, ErrorReply("boom").exitcode_text
        ('3', '<N/A>')
        """
        if self.exitcode is None or self.exitcode == "":
            return NOT_AVAILABLE
        return str(self.exitcode)

    @property
    def timestamp_text(self) -> str:
        """The time of the error in local time (``YYYY-MM-DD HH:MM:SS``), ``<N/A>`` when the
        reply has none or it is not a number of seconds.

        >>> ErrorReply("boom", timestamp="1700000000").timestamp_text  # doctest: +ELLIPSIS
        '2023-11-1... ...:...:20'
        >>> ErrorReply("boom", timestamp="yesterday").timestamp_text
        '<N/A>'
        """
        seconds = _seconds(self.timestamp)
        if seconds is None:
            return NOT_AVAILABLE
        try:
            return str(datetime.fromtimestamp(seconds))
        except (OverflowError, OSError, ValueError):
            return NOT_AVAILABLE


def _seconds(value: object) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        number: float = value
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    try:
        return int(number)
    except (OverflowError, ValueError):  # inf, nan
        return None


def _first_of(data: Mapping[str, Any], *keys: str) -> object:
    for key in keys:
        if data.get(key) is not None:
            return data[key]
    return None


def parse_error_reply(structured_error_msg: str) -> ErrorReply | None:
    """Reads a replica's reply file (see the module docstring for the layouts); None when
    there is none (``<NONE>`` or empty). Text in no known layout is the message itself.

    >>> parse_error_reply('{"message": {"message": "boom", "errorCode": 7,'
    ...                   ' "extraInfo": {"timestamp": "1700000000"}}}')
    ErrorReply(message='boom', exitcode=7, timestamp='1700000000')
    >>> parse_error_reply('{"message": "boom", "errorCode": 7, "timestamp": 1700000000}')
    ErrorReply(message='boom', exitcode=7, timestamp=1700000000)
    >>> parse_error_reply('{"message": "could not start", "exit_code": 127}')
    ErrorReply(message='could not start', exitcode=127, timestamp=None)
    >>> parse_error_reply("node lost")
    ErrorReply(message='node lost', exitcode=None, timestamp=None)
    >>> parse_error_reply("<NONE>") is None
    True
    """
    if not isinstance(structured_error_msg, str):
        return None if structured_error_msg is None else ErrorReply(str(structured_error_msg))
    if not structured_error_msg or structured_error_msg == NONE:
        return None
    try:
        data = json.loads(structured_error_msg)
    except ValueError:
        return ErrorReply(structured_error_msg)
    if not isinstance(data, dict):
        return ErrorReply(structured_error_msg)
    error = data.get("message")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        # torchelastic's nested layout
        extra = error.get("extraInfo")
        code = _first_of(error, "errorCode", "exit_code")
        return ErrorReply(
            error["message"],
            code if code is not None else _first_of(data, "errorCode", "exit_code"),
            extra.get("timestamp") if isinstance(extra, dict) else data.get("timestamp"),
        )
    # the flat layout; a reply without a message shows its own text
    return ErrorReply(
        error if isinstance(error, str) else structured_error_msg,
        _first_of(data, "errorCode", "exit_code"),
        data.get("timestamp"),
    )


def wrap_error_message(msg: str, header: str = ERROR_MSG_HEADER, width: int = WRAP_WIDTH) -> str:
    """``header`` then ``msg``, broken at the first space after every ``width`` characters
    of the message; each further line is indented under the header and starts with the
    space it was broken at (TorchX's layout). An RPC worker's error or an error embedded in
    another is first cut down to the error itself.

    >>> print(wrap_error_message("aaaa bbbb cccc dddd", header="msg: ", width=8))
    msg: aaaa bbbb
          cccc dddd
    >>> wrap_error_message("c10::Error: CUDA error\\nException raised from f at x.cpp:7")
    '    error_msg: c10::Error: CUDA error'
    >>> wrap_error_message("boom", width=0)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: width=0 is invalid: must be a whole number of characters >= 1. Fix: pass e.g. 80
    """
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise InvalidSpecError(
            "width", width, "must be a whole number of characters >= 1", "pass e.g. 80"
        )
    msg = str(msg)
    rpc = _RPC_ERROR.search(msg)
    if rpc:
        msg = rpc.group(0)
    embedded = _EMBEDDED_ERROR.search(msg)
    if embedded:
        msg = embedded.group("msg")
    pieces: list[str] = []
    start = 0
    for i, char in enumerate(msg):
        if char == " " and i - start >= width:
            pieces.append(msg[start:i])
            start = i
    pieces.append(msg[start:])
    indent = " " * len(header)
    return "\n".join((header if n == 0 else indent) + piece for n, piece in enumerate(pieces))


def state_name(state: object) -> str:
    """The name of a state, also when it is given as its value (anything else as its text).

    >>> state_name(AppState.FAILED), state_name(3), state_name("odd")
    ('FAILED', 'RUNNING', 'odd')
    """
    if isinstance(state, AppState):
        return state.name
    if isinstance(state, int) and not isinstance(state, bool) and state in set(AppState):
        return AppState(state).name
    return str(state)


def state_repr(state: object) -> str:
    """A state as TorchX's repr shows it: name and value.

    >>> state_repr(AppState.FAILED), state_repr(3)
    ('FAILED (5)', 'RUNNING (3)')
    """
    name = state_name(state)
    member = AppState.__members__.get(name)
    return name if member is None else f"{name} ({member.value})"


def select_roles(roles: list[RoleStatus], filter_roles: Iterable[str] | None) -> list[RoleStatus]:
    """The statuses of the roles named in ``filter_roles`` (all of them when it is None or
    empty), in their order.

    >>> from anylaunch.specs.status import RoleStatus
    >>> [r.role for r in select_roles([RoleStatus("a"), RoleStatus("b")], ["b"])]
    ['b']
    >>> select_roles([RoleStatus("a")], "a")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: filter_roles='a' is invalid: must be a list of role names, not a single string. Fix: pass e.g. ['a']
    """
    if filter_roles is None:
        return roles
    if isinstance(filter_roles, str) or not isinstance(filter_roles, Iterable):
        raise InvalidSpecError(
            "filter_roles",
            filter_roles,
            "must be a list of role names"
            + (", not a single string" if isinstance(filter_roles, str) else ""),
            f"pass e.g. [{filter_roles!r}]"
            if isinstance(filter_roles, str)
            else "pass e.g. ['trainer']",
        )
    wanted = list(filter_roles)
    bad = [name for name in wanted if not isinstance(name, str)]
    if bad:
        raise InvalidSpecError(
            "filter_roles",
            bad[0],
            "is not a role name (a str)",
            "pass role names, e.g. ['trainer']",
        )
    if not wanted:
        return roles
    return [role for role in roles if role.role in wanted]


def _replica_text(replica: ReplicaStatus, redact: Callable[[str], str]) -> str:
    mark = "*" if replica.id == 0 else " "  # a star on replica 0 marks where a role starts
    head = f" {mark}{replica.role}[{replica.id}]:{state_name(replica.state)}"
    reply = parse_error_reply(replica.structured_error_msg)
    if reply is None:
        ended_badly = replica.state in (AppState.FAILED, AppState.CANCELLED)
        return head + (" (no reply file)" if ended_badly else "")
    return "\n".join(
        [
            f"{head} (exitcode: {reply.exitcode_text})",
            f"        timestamp: {reply.timestamp_text}",
            f"        hostname: {replica.hostname or NOT_AVAILABLE}",
            "    " + wrap_error_message(redact(reply.message)),
        ]
    )


def format_status(
    status: AppStatus,
    filter_roles: Iterable[str] | None = None,
    redact: Callable[[str], str] | None = None,
) -> str:
    """The text of :meth:`AppStatus.format <anylaunch.specs.status.AppStatus.format>`: one
    line per replica (replica 0 starred, replicas in id order), then the time, host and
    message of each reply file. ``redact`` masks secrets in every message before it is laid
    out (a secret is never split across lines first).

    >>> from anylaunch.specs.secrets import Redactor
    >>> from anylaunch.specs.status import AppState, AppStatus
    >>> text = format_status(AppStatus(AppState.FAILED, msg="login s3cr3t"), None,
    ...                      Redactor(["s3cr3t"]))
    >>> [line for line in text.splitlines() if "Msg:" in line]
    ['    Msg: login ***', '    Structured Error Msg: <NONE>']
    """
    mask = redact if redact is not None else _keep
    replicas = "".join(
        "\n" + _replica_text(replica, mask)
        for role in select_roles(status.roles, filter_roles)
        for replica in sorted(role.replicas, key=lambda r: r.id)
    )
    url = None if status.ui_url is None else mask(status.ui_url)
    return (
        "AppStatus:\n"
        f"    State: {state_name(status.state)}\n"
        f"    Num Restarts: {status.num_restarts}\n"
        f"    Roles: {replicas}\n"
        f"    Msg: {mask(status.msg)}\n"
        f"    Structured Error Msg: {mask(status.structured_error_msg)}\n"
        f"    UI URL: {url}\n"
        "    "
    )


def _plain(value: object) -> object:
    """``value`` as types YAML can write safely (anything else as its text)."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    return str(value)


def _parsed(structured_error_msg: object) -> object:
    if not isinstance(structured_error_msg, str) or structured_error_msg == NONE:
        return structured_error_msg
    try:
        return json.loads(structured_error_msg)
    except ValueError:  # reply files are written by the job: not always JSON
        return structured_error_msg


def status_yaml(status: AppStatus) -> str:
    """The ``repr()`` of an AppStatus: a YAML block under ``AppStatus`` with sorted keys,
    states as ``NAME (value)`` and the app's structured error parsed when it is JSON.

    >>> from anylaunch.specs.status import AppState, AppStatus
    >>> print(status_yaml(AppStatus(AppState.FAILED, structured_error_msg='{"exit_code": 3}')))
    AppStatus:
      msg: ''
      num_restarts: 0
      roles: []
      state: FAILED (5)
      structured_error_msg:
        exit_code: 3
      ui_url: null
    <BLANKLINE>
    """
    import yaml

    data = {
        "state": state_repr(status.state),
        "num_restarts": status.num_restarts,
        "msg": status.msg,
        "structured_error_msg": _parsed(status.structured_error_msg),
        "ui_url": status.ui_url,
        "roles": [
            {
                "role": role.role,
                "replicas": [
                    {
                        "id": replica.id,
                        "state": state_repr(replica.state),
                        "role": replica.role,
                        "hostname": replica.hostname,
                        "structured_error_msg": replica.structured_error_msg,
                        "hostaddr": replica.hostaddr,
                    }
                    for replica in role.replicas
                ],
            }
            for role in status.roles
        ],
        **({"array": status.array.to_dict()} if status.array is not None else {}),
        **({"placement": status.placement.to_dict()} if status.placement is not None else {}),
    }
    return str(yaml.safe_dump({"AppStatus": _plain(data)}, sort_keys=True))
