"""Helpers shared by the operator, the sensor and the trigger (no Airflow imports).

anylaunch itself is imported inside the functions so that importing the operator module stays
cheap; everything here works on the public ``anylaunch.runner`` / ``anylaunch.specs`` API.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from anylaunch.specs.api import AppStatus

#: The connection the operator reads default settings from when none is named.
DEFAULT_CONN_ID = "anylaunch_default"
#: XCom keys pushed by the operator as soon as the app is scheduled.
XCOM_APP_HANDLE = "app_handle"
XCOM_UI_URL = "ui_url"
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
    secret masked by ``redact`` (the dict goes to XCom, exceptions and trigger events). For an
    array app, ``array`` holds the per-index outcomes and ``roles`` the failed indices' replica
    statuses only, both bounded in size (see ``_arrays``); for a placed app, ``placement`` holds
    its history, bounded too (see ``_placement``).

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
    if status.array is not None:  # bounded, whatever the array's size
        from airflow_anylaunch._arrays import array_outcomes, compact_roles

        result["roles"] = compact_roles(status)
        result["array"] = array_outcomes(status.array)
    if status.placement is not None:  # bounded, however often the app moved
        from airflow_anylaunch._placement import placement_outcomes

        result["placement"] = placement_outcomes(status.placement)
    return result if redact is None else cast("dict[str, Any]", _masked(result, redact))


def register_secrets(values: Sequence[str]) -> None:
    """Tells Airflow's own masker the app's secret values (its task log masks them too)."""
    from airflow_anylaunch._compat import mask_secret

    for value in values:
        mask_secret(value)
