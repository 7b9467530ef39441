"""Per-index results of an array app, as the engines show them: a mapping ``index -> {state,
exit_code}`` (a task's result), table rows (an artifact, a metadata table) and a markdown
table, each bounded for large arrays. One policy for every engine.

Small arrays list every index; past :data:`FULL_RESULTS` indices a result lists only the
indices that did not succeed (the compact :meth:`ArrayStatus.to_dict` carries the rest), and
past :data:`TABLE_ROWS` indices a table holds only those rows, at most :data:`TABLE_ROWS` of
them, under a one-line summary.

>>> from anylaunch.specs.api import AppState
>>> from anylaunch.specs.array_status import ArrayStatus
>>> status = ArrayStatus(3, {0: AppState.SUCCEEDED, 1: AppState.FAILED, 2: AppState.SUCCEEDED},
...                      {1: 2}, min_success_ratio=0.6)
>>> index_results(status)
{0: {'state': 'SUCCEEDED', 'exit_code': 0}, 1: {'state': 'FAILED', 'exit_code': 2}, 2: {'state': 'SUCCEEDED', 'exit_code': 0}}
>>> rows, note = index_rows(status, params=[{"lr": "0.1"}, {"lr": "0.2"}, {"lr": "0.3"}])
>>> rows[1], note
({'index': 1, 'state': 'FAILED', 'exit_code': 2, 'lr': '0.2'}, 'array: 2/3 succeeded (2 required); failed indices: 1 (exit 2)')
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from anylaunch.specs.api import AppDef
from anylaunch.specs.array_status import ArrayStatus, index_ranges
from anylaunch.specs.arrays import ArraySpec
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.status import AppState, AppStatus

if TYPE_CHECKING:
    from anylaunch.schedulers.api import DescribeAppResponse

__all__ = [
    "FULL_RESULTS",
    "TABLE_ROWS",
    "described_app",
    "failed_indices_text",
    "index_markdown",
    "index_results",
    "index_rows",
    "indices_to_retry",
    "with_failed_indices",
]

#: up to this many indices a result maps every index; past it, only those that did not succeed
FULL_RESULTS = 1000
#: up to this many indices a table has a row per index; past it, the rows of the indices that
#: did not succeed (at most this many) under a summary
TABLE_ROWS = 300


def _exit_code(status: ArrayStatus, index: int) -> int | None:
    code = status.exit_codes.get(index)
    if code is None and status.state_of(index) == AppState.SUCCEEDED:
        return 0  # an index succeeds by exiting 0; a backend may not report the code
    return code


def _listed(status: ArrayStatus, limit: int) -> list[int]:
    """The indices a bounded view lists: all up to ``limit``, else those that did not succeed."""
    picked = status.indices()
    if len(picked) <= limit:
        return list(picked)
    return [i for i in picked if status.state_of(i) != AppState.SUCCEEDED]


def index_results(status: ArrayStatus, limit: int = FULL_RESULTS) -> dict[int, dict[str, Any]]:
    """``index -> {"state": NAME, "exit_code": int | None}``: every selected index up to
    ``limit`` indices, else only the indices that did not succeed.

    >>> big = ArrayStatus(5000, {i: AppState.SUCCEEDED for i in range(5000)})
    >>> big.states[42] = AppState.FAILED
    >>> index_results(big)
    {42: {'state': 'FAILED', 'exit_code': None}}
    """
    return {
        i: {"state": status.state_of(i).name, "exit_code": _exit_code(status, i)}
        for i in _listed(status, limit)
    }


def index_rows(
    status: ArrayStatus,
    params: Sequence[Mapping[str, str]] = (),
    limit: int = TABLE_ROWS,
) -> tuple[list[dict[str, Any]], str]:
    """Table rows ``{index, state, exit_code, <param>...}`` and the note to show above them
    (the array's summary, and which rows are left out past ``limit`` indices).

    >>> many = ArrayStatus(400, {i: AppState.SUCCEEDED for i in range(400)})
    >>> many.states[7] = AppState.FAILED
    >>> rows, note = index_rows(many)
    >>> [r["index"] for r in rows], note
    ([7], 'array: 399/400 succeeded (400 required); failed indices: 7; showing the 1 of 400 indices that did not succeed')
    """
    listed = _listed(status, limit)
    rows: list[dict[str, Any]] = []
    for i in listed[:limit]:
        row: dict[str, Any] = {
            "index": i,
            "state": status.state_of(i).name,
            "exit_code": _exit_code(status, i),
        }
        if i < len(params):
            row.update({k: v for k, v in params[i].items() if k not in row})
        rows.append(row)
    note = status.summary()
    total = len(status.indices())
    if len(listed) < total:
        note += f"; showing the {len(rows)} of {total} indices that did not succeed"
        if len(listed) > len(rows):
            note += f" (the first {len(rows)} of {len(listed)})"
    return rows, note


def index_markdown(
    status: ArrayStatus,
    params: Sequence[Mapping[str, str]] = (),
    limit: int = TABLE_ROWS,
) -> str:
    """:func:`index_rows` as a markdown table under its note (``|`` in values escaped).

    >>> print(index_markdown(ArrayStatus(2, {0: AppState.SUCCEEDED, 1: AppState.RUNNING})))
    array: 1/2 succeeded, 1 running
    <BLANKLINE>
    | index | state | exit_code |
    |---|---|---|
    | 0 | SUCCEEDED | 0 |
    | 1 | RUNNING |  |
    """
    rows, note = index_rows(status, params, limit)
    if not rows:
        return note
    columns = list(dict.fromkeys(k for row in rows for k in row))

    def cell(value: object) -> str:
        return "" if value is None else str(value).replace("|", "\\|").replace("\n", " ")

    lines = [note, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def failed_indices_text(status: ArrayStatus) -> str:
    """The failed (or cancelled) indices in range form, e.g. ``3,7-9`` (empty: none).

    >>> failed_indices_text(ArrayStatus(4, {1: AppState.FAILED, 2: AppState.CANCELLED}))
    '1-2'
    """
    return index_ranges(status.failed())


def with_failed_indices(message: str, status: ArrayStatus | None) -> str:
    """``message``, followed by the array's summary (which names the failed indices) unless
    it already holds it.

    >>> s = ArrayStatus(2, {0: AppState.SUCCEEDED, 1: AppState.FAILED}, {1: 1})
    >>> with_failed_indices("app x ended FAILED", s)
    'app x ended FAILED (array: 1/2 succeeded (2 required); failed indices: 1 (exit 1))'
    >>> with_failed_indices("app x ended FAILED: " + s.summary(), s) == "app x ended FAILED: " + s.summary()
    True
    """
    if status is None:
        return message
    summary = status.summary()
    if summary in message:
        return message
    first, sep, rest = message.partition("\n")
    return f"{first} ({summary}){sep}{rest}"


def indices_to_retry(app_handle: str, status: AppStatus) -> list[int]:
    """The failed (or cancelled) indices ``Runner.retry_failed`` relaunches.

    Raises:
        InvalidSpecError: the app is not an array, is still running, or no index failed.
    """
    if status.array is None:
        raise InvalidSpecError("app_handle", app_handle, "is not an array app", "retry arrays only")
    if not status.is_terminal():
        raise InvalidSpecError(
            "app_handle",
            app_handle,
            f"is still {status.state.name} ({status.array.summary()})",
            "wait for the array to end (Runner.wait) before retrying its failed indices",
        )
    failed = status.array.failed()
    if not failed:
        raise InvalidSpecError(
            "app_handle",
            app_handle,
            f"has no failed index ({status.array.summary()})",
            "retry arrays whose indices failed",
        )
    return failed


def described_app(desc: DescribeAppResponse, cached: AppDef | None, app_id: str) -> AppDef:
    """The app ``Runner.describe`` rebuilds from a describe response and what this process
    submitted (``cached``): an array's roles are one replica, its spec from its status."""
    if desc.roles:
        name = cached.name if cached is not None else app_id
        roles = list(desc.roles)
        array = None
        if desc.array is not None:  # an array: what its status says of its spec
            roles = [dataclasses.replace(role, num_replicas=1) for role in roles]
            array = cached.array if cached is not None else None
            if array is None:
                array = ArraySpec(
                    desc.array.size,
                    min_success_ratio=desc.array.min_success_ratio,
                    indices=desc.array.selected,
                )
        return AppDef(name=name, roles=roles, metadata=dict(desc.metadata), array=array)
    if cached is not None:  # the scheduler cannot describe roles: what we submitted
        return copy.deepcopy(cached)
    return AppDef(name=app_id, roles=[], metadata=dict(desc.metadata))
