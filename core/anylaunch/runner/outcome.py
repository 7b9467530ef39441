"""How an app's end is told to a human: one failure summary for every engine and the CLI
(and :func:`state_record`, the record of each new state a session says on the way).

The summary holds the app's end state and message, the exit code and stderr tail that the
scheduler put in its structured error, and the last lines the watcher saw, with every secret
masked. It never raises: a watcher that is failing must always be able to say why.

>>> from anylaunch.specs.api import AppState, AppStatus
>>> status = AppStatus(AppState.FAILED, msg="replica w/0 exited 3",
...     structured_error_msg='{"exit_code": 3, "stderr_tail": ["boom", "token=s3cr3t"]}')
>>> from anylaunch.specs.secrets import Redactor
>>> print(failure_summary("local_cwd://s/x-1", status, ["w/0 started"], Redactor(["s3cr3t"])))
anylaunch app local_cwd://s/x-1 ended FAILED: replica w/0 exited 3
exit code: 3
last stderr:
  boom
  token=***
last log lines:
  w/0 started
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from anylaunch.runner.failures import FailureCategory, decision_category
from anylaunch.runner.watch import Decision, Done, RunTimedOut, StartupTimedOut
from anylaunch.specs.api import NONE, AppStatus

__all__ = [
    "Outcome",
    "error_details",
    "failure_summary",
    "masked_status",
    "state_record",
    "with_tail",
]

#: stderr lines of the structured error kept in a summary.
STDERR_TAIL_LINES = 10
#: Characters of an unstructured error kept in a summary.
MAX_ERROR_CHARS = 1000


def error_details(status: AppStatus | None) -> dict[str, Any]:
    """What the scheduler's structured error says: ``exit_code`` and ``stderr_tail`` when it
    has them, else ``error`` (the raw text, shortened). Empty when there is none.

    >>> error_details(AppStatus(0, structured_error_msg='{"exit_code": 1, "stderr_tail": []}'))
    {'exit_code': 1}
    >>> error_details(AppStatus(0, structured_error_msg="node lost"))
    {'error': 'node lost'}
    """
    raw = status.structured_error_msg if status is not None else NONE
    if not raw or raw == NONE:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {"error": raw[:MAX_ERROR_CHARS]}
    if not isinstance(data, dict):
        return {"error": raw[:MAX_ERROR_CHARS]}
    details: dict[str, Any] = {}
    code = data.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool):
        details["exit_code"] = code
    tail = data.get("stderr_tail")
    if isinstance(tail, list) and tail:
        details["stderr_tail"] = [str(line) for line in tail[-STDERR_TAIL_LINES:]]
    if not details:
        details["error"] = raw[:MAX_ERROR_CHARS]
    return details


def with_tail(text: str, tail: Iterable[str]) -> str:
    """``text`` followed by the last log lines, if there are any.

    >>> with_tail("timed out", ["w/0 a"])
    'timed out\\nlast log lines:\\n  w/0 a'
    """
    lines = list(tail)
    if lines:
        text += "\nlast log lines:\n" + "\n".join(f"  {line}" for line in lines)
    return text


def failure_summary(
    handle: str,
    status: AppStatus | None,
    tail: Iterable[str] = (),
    redact: Callable[[str], str] | None = None,
    headline: str | None = None,
) -> str:
    """Why an app did not succeed, as the failure text of every engine and the CLI.

    Args:
        handle: the app's handle
        status: its last status (None: the scheduler has no record of it)
        tail: the last log lines seen, each ``role/replica text``
        redact: masks secrets (see :class:`anylaunch.specs.secrets.Redactor`)
        headline: the first line instead of "ended STATE: msg" (e.g. a timeout's message)
    """
    if headline is not None:
        text = headline
    elif status is None:
        text = (
            f"anylaunch app {handle} does not exist (the scheduler has no record of it). "
            "Fix: check the handle; finished apps may have been purged by the scheduler"
        )
    else:
        text = f"anylaunch app {handle} ended {status.state.name}"
        if status.msg:
            text += f": {status.msg}"
    details = error_details(status)
    if "exit_code" in details:
        text += f"\nexit code: {details['exit_code']}"
    if "stderr_tail" in details:
        text += "\nlast stderr:\n" + "\n".join(f"  {line}" for line in details["stderr_tail"])
    if "error" in details:
        text += f"\nerror: {details['error']}"
    text = with_tail(text, tail)
    return redact(text) if redact is not None else text


def masked_status(status: AppStatus, redact: Callable[[str], str]) -> AppStatus:
    """A copy of ``status`` with secrets masked in its messages, errors and UI link (what a
    task result, an artifact or an exception may show).

    >>> from anylaunch.specs.api import AppState, ReplicaStatus, RoleStatus
    >>> from anylaunch.specs.secrets import Redactor
    >>> s = AppStatus(AppState.FAILED, msg="bad s3cr3t", roles=[RoleStatus("w", [
    ...     ReplicaStatus(0, AppState.FAILED, "w", "h", '{"stderr_tail": ["s3cr3t"]}')])])
    >>> m = masked_status(s, Redactor(["s3cr3t"]))
    >>> m.msg, m.roles[0].replicas[0].structured_error_msg, s.msg
    ('bad ***', '{"stderr_tail": ["***"]}', 'bad s3cr3t')

    A placed app's history is masked too (a move's reason may quote a backend's error):

    >>> from anylaunch.specs.placement_status import PlacementEntry, PlacementHistory
    >>> entry = PlacementEntry(0, "slurm", None, "skipped", "submission failed: s3cr3t")
    >>> placed = AppStatus(AppState.PENDING, placement=PlacementHistory(0, (entry,), "/c"))
    >>> print(masked_status(placed, Redactor(["s3cr3t"])).placement.describe())
    attempt 0 on slurm: skipped (submission failed: ***)
    """
    placement = status.placement
    if placement is not None:
        placement = dataclasses.replace(
            placement,
            next_move=redact(placement.next_move),
            entries=tuple(
                dataclasses.replace(e, reason=redact(e.reason)) for e in placement.entries
            ),
        )
    return dataclasses.replace(
        status,
        placement=placement,
        msg=redact(status.msg),
        structured_error_msg=redact(status.structured_error_msg),
        ui_url=None if status.ui_url is None else redact(status.ui_url),
        roles=[
            dataclasses.replace(
                role,
                replicas=[
                    dataclasses.replace(rep, structured_error_msg=redact(rep.structured_error_msg))
                    for rep in role.replicas
                ],
            )
            for role in status.roles
        ],
    )


@dataclass(frozen=True)
class Outcome:
    """How a watch ended, for the engine to map onto its own result or exception.

    Args:
        handle: the app
        decision: the policy's final decision
        status: the app's last status (after a cancel, its end status when that was seen;
            None: the scheduler had no record of it), secrets masked
        message: the failure summary, secrets masked ("" for an app that succeeded)
        tail: the last log lines seen (masked)
        cancelled: the session cancelled the app (a timeout, or a watch it gave up)
    """

    handle: str
    decision: Decision = field(repr=False)  # holds the unmasked status the policy saw
    status: AppStatus | None
    message: str
    tail: tuple[str, ...] = ()
    cancelled: bool = False

    @property
    def kind(self) -> Literal["succeeded", "failed", "startup_timeout", "run_timeout", "lost"]:
        """``succeeded``, ``failed`` (FAILED or CANCELLED), ``startup_timeout``,
        ``run_timeout`` or ``lost``."""
        decision = self.decision
        if isinstance(decision, Done):
            return "succeeded" if decision.succeeded else "failed"
        if isinstance(decision, StartupTimedOut):
            return "startup_timeout"
        if isinstance(decision, RunTimedOut):
            return "run_timeout"
        return "lost"

    @property
    def succeeded(self) -> bool:
        """True if the app SUCCEEDED."""
        return self.kind == "succeeded"

    @property
    def category(self) -> FailureCategory | None:
        """The failure category (:mod:`anylaunch.runner.failures`); None on success."""
        return decision_category(self.decision)


def state_record(handle: str, status: AppStatus) -> tuple[int, str]:
    """The record of an app's new state: an array's ends with its summary, a WARNING when it
    succeeded by its ``min_success_ratio`` with failed indices (say which, in every engine).

    >>> from anylaunch.specs import AppState, ArrayStatus
    >>> array = ArrayStatus(4, {i: AppState.SUCCEEDED for i in (0, 1, 3)}, {}, 0.75)
    >>> array.states[2] = AppState.FAILED
    >>> state_record("h", AppStatus(AppState.SUCCEEDED, array=array))
    (30, 'anylaunch app h is SUCCEEDED (array: 3/4 succeeded (3 required); failed indices: 2)')
    """
    text = f"anylaunch app {handle} is {status.state.name}"
    array = status.array
    if array is None or not status.is_terminal():
        return logging.INFO, text
    text += f" ({array.summary()})"
    succeeded_with_failures = status.state.name == "SUCCEEDED" and bool(array.failed())
    return (logging.WARNING if succeeded_with_failures else logging.INFO), text
