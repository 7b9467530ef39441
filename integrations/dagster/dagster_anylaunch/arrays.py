"""Array apps (job arrays and sweeps) in Dagster: the per-index metadata an op output, an asset
materialization or a step failure carries. The per-index policy (what is listed, how large
arrays are bounded) is the core's (:mod:`anylaunch.runner.array_results`).

>>> from anylaunch.specs.api import AppState
>>> from anylaunch.specs.array_status import ArrayStatus
>>> array = ArrayStatus(3, {0: AppState.SUCCEEDED, 1: AppState.FAILED, 2: AppState.SUCCEEDED},
...                     {1: 1}, min_success_ratio=0.6)
>>> meta = array_metadata(array, [{"lr": "0.1"}, {"lr": "0.2"}, {"lr": "0.3"}])
>>> meta["array_counts"].data, meta["failed_indices"].value
({'SUCCEEDED': 2, 'FAILED': 1}, '1')
>>> meta["indices"].records[1].data
{'index': 1, 'state': 'FAILED', 'exit_code': 1, 'lr': '0.2'}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import dagster as dg

from anylaunch.runner.array_results import failed_indices_text, index_markdown, index_rows
from anylaunch.specs.array_status import ArrayStatus
from anylaunch.specs.status import AppState

__all__ = ["array_metadata"]

_INT_COLUMNS = ("index", "exit_code")


def array_metadata(
    array: ArrayStatus,
    params: Sequence[Mapping[str, str]] = (),
    mask: Callable[[str], str] = str,
) -> dict[str, dg.MetadataValue]:
    """Per-index metadata of an array app: ``array_size``, ``array_succeeded`` (an int),
    ``array_counts`` (indices by state), ``failed_indices`` (ranges, e.g. ``3,7-9``),
    ``array_summary`` (one line), ``indices`` (a table: index, state, exit code and the
    sweep's parameters) and ``indices_markdown`` (the same as markdown); past a few hundred
    indices the tables hold only the indices that did not succeed. Text is masked by
    ``mask``."""
    rows, note = index_rows(array, params)
    columns = list(dict.fromkeys(k for row in rows for k in row)) or ["index", "state"]
    schema = dg.TableSchema(
        columns=[dg.TableColumn(c, "int" if c in _INT_COLUMNS else "string") for c in columns]
    )
    records = [
        dg.TableRecord({k: mask(v) if isinstance(v, str) else v for k, v in row.items()})
        for row in rows
    ]
    return {
        "array_size": dg.MetadataValue.int(array.size),
        "array_succeeded": dg.MetadataValue.int(len(array.in_state(AppState.SUCCEEDED))),
        "array_counts": dg.MetadataValue.json(array.counts()),
        "failed_indices": dg.MetadataValue.text(failed_indices_text(array)),
        "array_summary": dg.MetadataValue.text(mask(note)),
        "indices": dg.MetadataValue.table(records=records, schema=schema),
        "indices_markdown": dg.MetadataValue.md(mask(index_markdown(array, params))),
    }
