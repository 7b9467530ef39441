"""Array apps (job arrays and sweeps) in Prefect: the per-index part of a task's result, the
table artifact of an app's end, and the failure message naming the failed indices. The
per-index policy (what is listed, how large arrays are bounded) is the core's
(:mod:`anylaunch.runner.array_results`); nothing here imports Prefect.

>>> from anylaunch.specs.api import AppState, AppStatus
>>> from anylaunch.specs.array_status import ArrayStatus
>>> array = ArrayStatus(3, {0: AppState.SUCCEEDED, 1: AppState.FAILED, 2: AppState.SUCCEEDED},
...                     {1: 1}, min_success_ratio=0.6)
>>> result = array_result({"state": "SUCCEEDED"}, AppStatus(AppState.SUCCEEDED, array=array))
>>> result["indices"][1], result["failed_indices"]
({'state': 'FAILED', 'exit_code': 1}, '1')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from anylaunch.runner.array_results import (
    FULL_RESULTS,
    failed_indices_text,
    index_results,
    index_rows,
)
from anylaunch.specs.api import AppDef, AppStatus
from prefect_anylaunch import _prefect

__all__ = ["array_result", "end_table", "sweep_params"]


def sweep_params(app: AppDef | None) -> Sequence[Mapping[str, str]]:
    """The per-index parameters of a sweep (empty for any other app)."""
    return app.array.params if app is not None and app.array is not None else ()


def array_result(result: dict[str, Any], status: AppStatus) -> dict[str, Any]:
    """``result`` (a status dict) with the per-index view of an array app added: ``indices``
    (``index -> {state, exit_code}``, see :func:`~anylaunch.runner.array_results.index_results`)
    and ``failed_indices`` (ranges, e.g. ``"3,7-9"``); past ``FULL_RESULTS`` indices the
    ``roles`` keep only the replicas (indices) that did not succeed. Unchanged for other apps.

    >>> from anylaunch.specs.api import AppState, ReplicaStatus, RoleStatus
    >>> from anylaunch.specs.array_status import ArrayStatus
    >>> big = ArrayStatus(2000, {i: AppState.SUCCEEDED for i in range(2000)}, {5: 1})
    >>> big.states[5] = AppState.FAILED
    >>> reps = [ReplicaStatus(i, big.state_of(i), "w", "") for i in range(2000)]
    >>> status = AppStatus(AppState.SUCCEEDED, roles=[RoleStatus("w", reps)], array=big)
    >>> compact = array_result(status.to_dict(), status)
    >>> compact["indices"], [r["id"] for r in compact["roles"][0]["replicas"]]
    ({5: {'state': 'FAILED', 'exit_code': 1}}, [5])
    >>> compact["array"]["indices"]
    {'SUCCEEDED': '0-4,6-1999', 'FAILED': '5'}
    """
    array = status.array
    if array is None:
        return result
    out = {**result, "indices": index_results(array), "failed_indices": failed_indices_text(array)}
    if len(array.indices()) > FULL_RESULTS:
        out["roles"] = [
            {**role, "replicas": [r for r in role["replicas"] if r.get("state") != "SUCCEEDED"]}
            for role in result.get("roles", [])
        ]
    return out


def end_table(
    status: AppStatus,
    app_name: str,
    app_handle: str,
    redact: Callable[[str], str],
    params: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """The keyword arguments of the table artifact an app's end creates: one row per replica,
    or for an array one row per index (with its sweep parameters), bounded for large arrays
    with the array's summary in the description.

    >>> from anylaunch.specs.api import AppState
    >>> from anylaunch.specs.array_status import ArrayStatus
    >>> s = AppStatus(AppState.FAILED, array=ArrayStatus(1, {0: AppState.FAILED}, {0: 1}))
    >>> t = end_table(s, "sweep", "local_cwd://s/x", str, [{"lr": "0.1"}])
    >>> t["key"], t["table"], t["description"]
    ('anylaunch-sweep-indices', [{'index': 0, 'state': 'FAILED', 'exit_code': 1, 'lr': '0.1'}], 'indices of local_cwd://s/x: FAILED; array: 0/1 succeeded (1 required); failed indices: 0 (exit 1)')
    """
    if status.array is None:
        return {
            "table": _prefect.replica_rows(status, redact),
            "key": _prefect.artifact_key(app_name, "replicas"),
            "description": f"replicas of {app_handle}: {status.state.name}",
        }
    rows, note = index_rows(status.array, params)
    masked = [{k: redact(v) if isinstance(v, str) else v for k, v in row.items()} for row in rows]
    return {
        "table": masked,
        "key": _prefect.artifact_key(app_name, "indices"),
        "description": f"indices of {app_handle}: {status.state.name}; {redact(note)}",
    }
