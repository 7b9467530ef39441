"""The arguments of a session checked where they enter, and how a caller names its options.

An :class:`~anylaunch.runner.session.AppSession` checks everything it is given once, naming
the caller's own field and the fix (:func:`check_session_arguments`); its timeout and interval
errors name the caller's options (:class:`OptionNames`: Prefect's and Dagster's settings end in
``_s``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from anylaunch.specs.api import AppState
from anylaunch.specs.checks import check_type
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.secrets import Redactor

__all__ = [
    "DEFAULT_OPTION_NAMES",
    "SECONDS_OPTION_NAMES",
    "OptionNames",
    "check_session_arguments",
    "is_index",
]


class OptionNames(NamedTuple):
    """How a caller names its poll interval and its startup and run timeouts: the session's
    errors and timeout messages name the caller's own options (the fix a user can apply).

    >>> OptionNames(interval="wait_interval").startup
    'startup_timeout'
    """

    interval: str = "poll_interval"
    startup: str = "startup_timeout"
    run: str = "run_timeout"


#: The names ``Runner.wait``'s policy knows its options by (also the trigger's but one).
DEFAULT_OPTION_NAMES = OptionNames()
#: The names of engines whose settings end in ``_s`` (Prefect's job block, Dagster's resource).
SECONDS_OPTION_NAMES = OptionNames("poll_interval_s", "startup_timeout_s", "run_timeout_s")


def check_session_arguments(
    *,
    runner: object,
    callbacks: Mapping[str, object],
    flags: Mapping[str, object],
    logs: object,
    names: Mapping[str, object],
    log_replicas: object,
    log_positions: object,
    tail_size: object,
    option_names: object,
    secrets: object,
    cancel_on_failure: object,
    said_state: object,
) -> None:
    """Every argument of :class:`AppSession` checked where it enters, naming the field and the
    fix (the policy's limits are checked by :class:`WatchPolicy`)."""
    from anylaunch.runner.api import Runner

    if runner is not None:
        check_type("runner", runner, Runner, "must be a Runner or None", "pass get_runner()")
    for field_name, fn in callbacks.items():
        if fn is not None and not callable(fn):
            raise InvalidSpecError(
                field_name, type(fn).__name__, "must be callable or None", "pass a function"
            )
    for field_name, flag in flags.items():
        check_type(field_name, flag, bool, "must be True or False", "pass a bool")
    if logs not in ("pump", "cursor", "off"):
        raise InvalidSpecError("logs", logs, "is not a log mode", "use 'pump', 'cursor' or 'off'")
    for field_name, listed in names.items():
        if listed is not None and (
            isinstance(listed, (str, bytes))
            or not isinstance(listed, Iterable)
            or not all(isinstance(n, str) and n for n in listed)
        ):
            raise InvalidSpecError(
                field_name, listed, "must be a list of names", "e.g. ['trainer']"
            )
    if log_replicas is not None and (
        isinstance(log_replicas, (str, bytes))
        or not isinstance(log_replicas, Iterable)
        or not all(is_index(k) for k in log_replicas)
    ):
        raise InvalidSpecError("log_replicas", log_replicas, "must be replica ids >= 0", "e.g. [0]")
    if log_positions is not None and (
        not isinstance(log_positions, Mapping)
        or not all(isinstance(k, str) and is_index(v) for k, v in log_positions.items())
    ):
        raise InvalidSpecError(
            "log_positions",
            log_positions,
            "must map 'role/replica' to a line count >= 0",
            "e.g. {'trainer/0': 12}",
        )
    if not is_index(tail_size):
        raise InvalidSpecError("tail_size", tail_size, "must be a whole number >= 0", "e.g. 20")
    check_type("names", option_names, OptionNames, "must be an OptionNames", "e.g. OptionNames()")
    if secrets is not None:
        check_type(
            "secrets", secrets, Redactor, "must be a Redactor or None", "e.g. Redactor([...])"
        )
    if cancel_on_failure is not None:
        check_type(
            "cancel_on_failure",
            cancel_on_failure,
            bool,
            "must be True, False or None",
            "pass a bool",
        )
    if said_state is not None:
        check_type(
            "said_state",
            said_state,
            AppState,
            "must be an AppState or None",
            "pass e.g. AppState.PENDING",
        )


def is_index(value: object) -> bool:
    """True for a whole number >= 0 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
