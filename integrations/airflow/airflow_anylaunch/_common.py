"""Helpers shared by the operator, the sensor and the trigger (no Airflow imports).

anylaunch itself is imported inside the functions so that importing the operator module stays
cheap; everything here works on the public ``anylaunch.runner`` / ``anylaunch.specs`` API.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from anylaunch.runner import Runner
    from anylaunch.specs.api import AppStatus

#: The connection the operator reads default settings from when none is named.
DEFAULT_CONN_ID = "anylaunch_default"
#: XCom keys pushed by the operator as soon as the app is scheduled.
XCOM_APP_HANDLE = "app_handle"
XCOM_UI_URL = "ui_url"
#: Log lines kept for the failure text (the core ``LineBuffer``'s default).
TAIL_LINES = 20
#: What ``on_kill_action`` accepts.
ON_KILL_ACTIONS = ("cancel", "keep")


def ui_url_xcom(url: object) -> str:
    """The value of the ``ui_url`` XCom: the app's UI, or ``""`` when it has none (yet).
    Never None: Airflow 3.0's execution API refuses a None XCom value (HTTP 422).

    >>> ui_url_xcom(None), ui_url_xcom("file:///logs")
    ('', 'file:///logs')
    """
    return str(url) if url else ""


def is_template(value: object) -> bool:
    """True if ``value`` is a string Airflow will render (checks on it wait until execute).

    >>> is_template("{{ ti.xcom_pull('launch', key='app_handle') }}"), is_template("local_cwd")
    (True, False)
    """
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def seconds(
    field: str, value: object, allow_none: bool = True, positive: bool = False
) -> float | None:
    """A duration given as seconds or a ``timedelta``, as float seconds (validated).

    >>> seconds("startup_timeout", timedelta(minutes=2)), seconds("poll_interval", 5)
    (120.0, 5.0)
    >>> seconds("poll_interval", -1)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: poll_interval=-1 is invalid: must be a finite number of seconds >= 0 or a timedelta. Fix: pass e.g. 30 or timedelta(minutes=5)
    """
    from anylaunch.specs.errors import InvalidSpecError

    if value is None and allow_none:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    from anylaunch.specs.checks import check_seconds

    try:
        return check_seconds(field, value, positive=positive)
    except InvalidSpecError as e:
        raise InvalidSpecError(
            field, value, f"{e.problem} or a timedelta", "pass e.g. 30 or timedelta(minutes=5)"
        ) from None


def interval(field: str, value: object) -> float:
    """A required duration > 0 (seconds or ``timedelta``), as float seconds.

    >>> interval("poll_interval", 0.5)
    0.5
    """
    result = seconds(field, value, allow_none=False, positive=True)
    assert result is not None
    return result


def check_handle(field: str, handle: object) -> str:
    """Returns ``handle`` if it is a well-formed app handle, else raises naming ``field``.

    >>> check_handle("app_handle", "local_cwd://anylaunch/echo-1")
    'local_cwd://anylaunch/echo-1'
    >>> check_handle("app_handle", "echo-1")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: app_handle='echo-1' is invalid: not of the form {scheduler}://{session_name}/{app_id}. Fix: pass the handle the launching task pushed to XCom (key 'app_handle'), e.g. "{{ ti.xcom_pull(task_ids='launch', key='app_handle') }}"
    """
    from anylaunch.specs.api import parse_app_handle
    from anylaunch.specs.errors import InvalidSpecError, MalformedAppHandleException

    try:
        parse_app_handle(handle)  # type: ignore[arg-type]
    except MalformedAppHandleException:
        raise InvalidSpecError(
            field,
            handle,
            "not of the form {scheduler}://{session_name}/{app_id}",
            f"pass the handle the launching task pushed to XCom (key {XCOM_APP_HANDLE!r}), e.g. "
            f"\"{{{{ ti.xcom_pull(task_ids='launch', key='{XCOM_APP_HANDLE}') }}}}\"",
        ) from None
    return str(handle)


def _masked(value: Any, redact: Callable[[str], str]) -> Any:
    """``value`` (JSON-like) with every string masked; a string holding JSON is masked inside
    (so that a secret escaped in it cannot slip past) and stays the same JSON."""
    if isinstance(value, str):
        if value[:1] in ("{", "["):
            try:
                return json.dumps(_masked(json.loads(value), redact))
            except ValueError:
                pass
        return redact(value)
    if isinstance(value, dict):
        return {k: _masked(v, redact) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_masked(v, redact) for v in value]
    return value


def status_dict(
    handle: str, status: AppStatus | None, redact: Callable[[str], str] | None = None
) -> dict[str, Any]:
    """The JSON-friendly result of a task: the handle plus ``AppStatus.to_dict()``, with every
    secret masked by ``redact`` (the dict goes to XCom, exceptions and trigger events).

    >>> from anylaunch.specs.api import AppState, AppStatus
    >>> d = status_dict("local_cwd://s/x-1", AppStatus(AppState.SUCCEEDED))
    >>> d["app_handle"], d["state"]
    ('local_cwd://s/x-1', 'SUCCEEDED')
    >>> status_dict("local_cwd://s/x-1", None)["state"]
    'UNKNOWN'
    >>> from anylaunch.specs.secrets import Redactor
    >>> failed = AppStatus(AppState.FAILED, msg="bad pw hunter22",
    ...     structured_error_msg='{"exit_code": 1, "stderr_tail": ["pw=hunter22"]}')
    >>> masked = status_dict("local_cwd://s/x-1", failed, Redactor(["hunter22"]))
    >>> masked["msg"], masked["structured_error_msg"]
    ('bad pw ***', '{"exit_code": 1, "stderr_tail": ["pw=***"]}')
    """
    from anylaunch.runner.failures import failure_category

    if status is None:
        return {
            "app_handle": handle,
            "state": "UNKNOWN",
            "msg": "the scheduler has no record of it",
        }
    category = failure_category(status)
    result = {
        "app_handle": handle,
        **status.to_dict(),
        "failure_category": category.value if category is not None else None,
    }
    return result if redact is None else cast("dict[str, Any]", _masked(result, redact))


def cancel_app(handle: str, wait_s: float = 0.0) -> AppStatus | None:
    """Cancels the app (unless it already ended) with a runner of its own, safe from a signal
    handler mid-poll, by the core cancel rule (``runner.driver.cancel_and_wait``: a failing
    status call never stops the cancel); waits up to ``wait_s`` for its end and returns its
    last known status.

    Raises:
        Exception: what the cancel call raised (the app may still run)
    """
    from anylaunch.runner import get_runner
    from anylaunch.runner.driver import cancel_and_wait
    from anylaunch.specs.api import parse_app_handle

    with get_runner(parse_app_handle(handle).session_name or None) as runner:
        return cancel_and_wait(runner, handle, wait_s)


def _close(iterable: Iterable[str]) -> None:
    close = getattr(iterable, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):
            close()


class LogFollower:
    """Reads the lines an app's replicas wrote since the last call, each ``role/replica text``
    (core ``format_line``), masked by ``redact``.

    The cursor (:attr:`positions`: lines already read per ``role/replica``) is JSON-friendly so
    a trigger can carry it across triggerer restarts. Each call re-reads the logs from the start
    through ``Runner.log_lines`` (portable across schedulers) and skips what was already read.
    A line still being written (no newline yet) is held back until the app ends. The lines go
    through a core ``LineBuffer``, which masks them and keeps the :attr:`tail`.

    Args:
        positions: the cursor to start from (default: the beginning of every log)
        roles: only these roles (default: all)
        replicas: only these replica ids (default: all)
        tail_size: how many of the latest lines :attr:`tail` keeps
        redact: masks secrets in every line (and so in the tail)
    """

    def __init__(
        self,
        positions: Mapping[str, int] | None = None,
        roles: Sequence[str] | None = None,
        replicas: Sequence[int] | None = None,
        tail_size: int = TAIL_LINES,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        from anylaunch.runner.lines import LineBuffer

        self.positions: dict[str, int] = {str(k): int(v) for k, v in (positions or {}).items()}
        self.roles = None if roles is None else set(roles)
        self.replicas = None if replicas is None else set(replicas)
        self._redact = redact
        self._lines = LineBuffer(redact, tail_size=tail_size)
        self._broken: set[str] = set()
        self._warned: set[str] = set()
        self._described: list[tuple[str, int]] | None = None

    @property
    def tail(self) -> list[str]:
        """The latest lines read (masked), oldest first."""
        return self._lines.tail

    def _mask(self, text: str) -> str:
        return self._redact(text) if self._redact is not None else text

    def _targets(self, runner: Runner, handle: str, status: AppStatus) -> list[tuple[str, int]]:
        found = [(rs.role, rep.id) for rs in status.roles for rep in rs.replicas]
        if not found:  # the scheduler reports no replica statuses: use the app's roles
            if self._described is None:
                app = runner.describe(handle)
                self._described = [
                    (role.name, i)
                    for role in (app.roles if app else [])
                    for i in range(role.num_replicas)
                ]
            found = self._described
        return [
            (role, k)
            for role, k in found
            if (self.roles is None or role in self.roles)
            and (self.replicas is None or k in self.replicas)
        ]

    def poll(
        self,
        runner: Runner,
        handle: str,
        status: AppStatus,
        warn: Callable[[str], None] | None = None,
    ) -> list[str]:
        """New lines of the selected replicas, masked, without their newlines.

        A scheduler that cannot iterate logs is reported once through ``warn`` (masked) and
        skipped from then on; other read errors are reported once and retried on the next call.
        """
        from anylaunch.runner.lines import format_line

        final = status.is_terminal()
        try:
            targets = self._targets(runner, handle, status)
        except Exception as e:  # logs are a convenience: never fail the wait for them
            if warn is not None and "" not in self._warned:
                self._warned.add("")
                warn(self._mask(f"cannot tell the replicas of {handle} yet: {e}"))
            return []
        for role, k in targets:
            key = f"{role}/{k}"
            if key in self._broken:
                continue
            start = self.positions.get(key, 0)
            read = 0
            lines: Iterable[str] = ()
            try:
                lines = runner.log_lines(handle, role, k)
                for i, line in enumerate(lines):
                    if i < start:
                        continue
                    if not line.endswith("\n") and not final:
                        break  # still being written: read it whole next time
                    self._lines.add(format_line(role, k, line))
                    read += 1
            except NotImplementedError as e:  # the scheduler cannot iterate logs at all
                self._broken.add(key)
                if warn is not None:
                    warn(self._mask(f"not streaming the logs of {key} of {handle}: {e}"))
            except Exception as e:  # logs are a convenience: never fail the wait for them
                if warn is not None and key not in self._warned:
                    self._warned.add(key)
                    warn(self._mask(f"cannot read the logs of {key} of {handle} yet: {e}"))
            finally:
                _close(lines)
                self.positions[key] = start + read
        return self._lines.take()
