"""Array apps (``AppDef.array``, ``specs.sweep``) as ONE Airflow task.

- **XCom**: the per-index outcomes go to XCom as ``ArrayStatus.to_dict()`` (index ranges by
  state, exit codes by index; XCom key :data:`XCOM_ARRAY`, and ``array`` in the status dict),
  bounded in size whatever the array's size (:func:`array_outcomes`); the status dict keeps
  the replica statuses of the first failed indices only (:func:`compact_roles`).
- **Failure**: the app's state is the array rule's (``min_success_ratio``): the task fails
  when the app does, with the failed indices named (:func:`with_array_summary`).
- **Logs**: each index is its role's replica (replica id == index), so its lines come out
  prefixed ``role/index``; the session follows each index from when it starts (a reader per
  running index, not one per index up front).

No Airflow imports: the operator, the sensor and the trigger share these.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anylaunch.specs.api import AppStatus
    from anylaunch.specs.array_status import ArrayStatus

__all__ = [
    "MAX_ARRAY_XCOM_CHARS",
    "XCOM_ARRAY",
    "array_outcomes",
    "compact_roles",
    "push_array",
    "with_array_summary",
]

#: The XCom key of an array app's per-index outcomes (pushed whether the task succeeds or
#: fails, so that a downstream ``trigger_rule="all_done"`` task can read the failed indices).
XCOM_ARRAY = "array"
#: The most characters of JSON the per-index outcomes take (one XCom row stays small).
MAX_ARRAY_XCOM_CHARS = 64_000
#: The most replica statuses (failed indices) an array app's status dict keeps.
MAX_REPLICAS_KEPT = 20


def _chars(value: object) -> int:
    return len(json.dumps(value))  # as XCom stores it (with spaces)


def _cut(ranges: str, budget: int) -> str:
    """``ranges`` (``"0-3,7,9"``) cut to at most ``budget`` characters at a range boundary."""
    if len(ranges) <= budget:
        return ranges
    return ranges[: max(ranges.rfind(",", 0, budget + 1), 0)]


def array_outcomes(array: ArrayStatus, limit: int = MAX_ARRAY_XCOM_CHARS) -> dict[str, Any]:
    """The per-index outcomes for XCom: ``array.to_dict()`` when it fits in ``limit``
    characters of JSON (``ArrayStatus.from_dict`` reads it back), else compacted:

    1. the exit codes grouped by code as index ranges (``exit_code_indices``, ``"1": "3,17"``)
       instead of one entry per index (``exit_codes`` is then empty);
    2. if that is still too long, each index list cut at a range boundary to its share of
       the limit, and ``truncated: true`` (``counts`` stay exact; ``anylaunch status
       <handle>`` lists every index).

    >>> from anylaunch.specs.array_status import ArrayStatus
    >>> from anylaunch.specs.status import AppState
    >>> done = {i: AppState.SUCCEEDED if i % 2 else AppState.FAILED for i in range(100_000)}
    >>> huge = ArrayStatus(100_000, done, {i: 1 for i in range(0, 100_000, 2)})
    >>> out = array_outcomes(huge)
    >>> len(json.dumps(out)) <= MAX_ARRAY_XCOM_CHARS, out["truncated"], out["counts"]
    (True, True, {'SUCCEEDED': 50000, 'FAILED': 50000})
    >>> out["exit_code_indices"]["1"][:12]
    '0,2,4,6,8,10'
    >>> small = ArrayStatus(5, {i: AppState.SUCCEEDED for i in range(5) if i != 3})
    >>> small.states[3] = AppState.FAILED
    >>> array_outcomes(small) == small.to_dict()
    True
    """
    from anylaunch.specs.array_status import index_ranges

    full = array.to_dict()
    if _chars(full) <= limit:
        return full
    by_code: dict[int, list[int]] = {}
    for index, code in array.exit_codes.items():
        by_code.setdefault(code, []).append(index)
    compact = {
        **full,
        "exit_codes": {},
        "exit_code_indices": {str(c): index_ranges(found) for c, found in sorted(by_code.items())},
    }
    if _chars(compact) <= limit:
        return compact
    lists = len(compact["indices"]) + len(compact["exit_code_indices"])
    # what the rest of the dict takes, with every list emptied
    fixed = _chars(
        {
            **compact,
            "indices": dict.fromkeys(compact["indices"], ""),
            "exit_code_indices": dict.fromkeys(compact["exit_code_indices"], ""),
            "truncated": True,
        }
    )
    budget = max((limit - fixed) // max(lists, 1), 0)
    for key in ("indices", "exit_code_indices"):
        compact[key] = {k: _cut(v, budget) for k, v in compact[key].items()}
    compact["truncated"] = True
    return compact


def compact_roles(status: AppStatus) -> list[dict[str, Any]]:
    """The ``roles`` of an array app's status dict: its role with the replica statuses of
    its first :data:`MAX_REPLICAS_KEPT` failed indices only (one per index would grow with
    the array; ``array`` has every index's state)."""
    assert status.array is not None
    failed = set(status.array.failed()[:MAX_REPLICAS_KEPT])
    return [
        {"role": rs.role, "replicas": [r.to_dict() for r in rs.replicas if r.id in failed]}
        for rs in status.roles
    ]


def push_array(context: Any, result: Mapping[str, Any] | None) -> None:
    """Pushes an array app's per-index outcomes (``result["array"]``: bounded) to XCom."""
    if result is not None and isinstance(result.get("array"), dict):
        context["ti"].xcom_push(key=XCOM_ARRAY, value=result["array"])


def with_array_summary(message: str, status: AppStatus | None) -> str:
    """``message`` naming the array's failed indices (the array rule's summary), unless it
    already does (the schedulers put it in the app's ``msg``)."""
    if status is None or status.array is None:
        return message
    summary = status.array.summary()
    return message if summary in message else f"{message}\n{summary}"
