"""Aligned plain-text tables for humans (``list``, ``status``): column widths come from the
content; no dependency, no colour, nothing but spaces between columns."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from anylaunch.specs.api import AppStatus, ReplicaStatus

__all__ = ["format_status", "format_table"]


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """Formats rows as left-aligned columns two spaces apart (the first row is the header);
    trailing spaces are dropped.

    >>> print(format_table([["A", "BB"], ["ccc", "d"]]))
    A    BB
    ccc  d
    >>> format_table([])
    ''
    """
    if not rows:
        return ""
    ncols = max(len(row) for row in rows)
    padded = [list(row) + [""] * (ncols - len(row)) for row in rows]
    widths = [max(len(row[i]) for row in padded) for i in range(ncols)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in padded
    )


def _keep(text: str) -> str:
    return text


def _pending(role: str, index: int) -> ReplicaStatus:
    """The row of an index the backend has not reported yet."""
    from anylaunch.specs.api import AppState, ReplicaStatus

    return ReplicaStatus(index, AppState.PENDING, role, "")


def format_status(
    status: AppStatus,
    app_handle: str = "",
    filter_roles: Iterable[str] | None = None,
    redact: Callable[[str], str] | None = None,
    indices: Sequence[int] | None = None,
) -> str:
    """The status of an app as people read it: a summary (only the fields that say
    something), a table with one row per replica (EXIT ``-``: no reply file), then the
    error of each replica that left one. Everything scheduler-written goes through ``redact``.

    An array app (``status.array``) adds its summary and a table of index ranges by state;
    its per-index table (an index is a replica) is compact: only the indices that say
    something (see :func:`anylaunch.cli.arrays.array_rows`), or exactly ``indices``.

    >>> from anylaunch.specs.api import AppState, AppStatus, ReplicaStatus, RoleStatus
    >>> print(format_status(AppStatus(AppState.FAILED, roles=[RoleStatus("trainer", [
    ...     ReplicaStatus(0, AppState.FAILED, "trainer", "node-0", '{"message": "boom"}'),
    ...     ReplicaStatus(1, AppState.RUNNING, "trainer", "node-1")])]), "local_cwd://s/t-1"))
    App:           local_cwd://s/t-1
    State:         FAILED
    Num Restarts:  0
    <BLANKLINE>
    ROLE     REPLICA  STATE    EXIT   HOSTNAME
    trainer  0        FAILED   <N/A>  node-0
    trainer  1        RUNNING  -      node-1
    <BLANKLINE>
    trainer[0] error_msg: boom
    """
    from anylaunch.cli.arrays import array_rows, state_ranges_table
    from anylaunch.cli.arrays import exit_text as array_exit_text
    from anylaunch.specs.markers import NONE
    from anylaunch.specs.status_format import (
        parse_error_reply,
        select_roles,
        state_name,
        wrap_error_message,
    )

    mask = redact if redact is not None else _keep
    summary = [["App:", app_handle]] if app_handle else []
    summary += [["State:", state_name(status.state)], ["Num Restarts:", str(status.num_restarts)]]
    if status.msg:
        summary.append(["Msg:", mask(" ".join(status.msg.split()))])
    if status.ui_url:
        summary.append(["UI URL:", mask(status.ui_url)])
    if status.structured_error_msg and status.structured_error_msg != NONE:
        reply = parse_error_reply(status.structured_error_msg)
        text = reply.message if reply is not None else status.structured_error_msg
        summary.append(["Error:", mask(" ".join(text.split()))])
    array = status.array
    if array is not None and array.summary() not in status.msg:
        summary.append(["Array:", array.summary()])
    if status.placement is not None:  # a placed app: where it runs now, then its history
        current = status.placement.current
        summary.append(
            [
                "Placement:",
                f"attempt {status.placement.attempt} on {current.scheduler}"
                f" ({current.handle or 'not placed'})",
            ]
        )
    parts = [format_table(summary)]
    if status.placement is not None and len(status.placement.entries) > 1:
        parts.append(mask(status.placement.describe()))
    if array is not None:
        parts.append(format_table(state_ranges_table(array)))

    shown, left_out = array_rows(status, indices)
    rows = [["ROLE", "INDEX" if array is not None else "REPLICA", "STATE", "EXIT", "HOSTNAME"]]
    errors: list[str] = []
    for role in select_roles(status.roles, filter_roles):
        replicas = sorted(role.replicas, key=lambda r: r.id)
        if array is not None:
            by_id = {r.id: r for r in replicas}
            replicas = [by_id.get(i) or _pending(role.role, i) for i in shown]
        for replica in replicas:
            reply = parse_error_reply(replica.structured_error_msg)
            exit_text = reply.exitcode_text if reply is not None else "-"
            if array is not None:
                exit_text = array_exit_text(array, replica.id, exit_text)
            rows.append(
                [role.role, str(replica.id), state_name(replica.state), exit_text, replica.hostname]
            )
            if reply is not None:
                header = f"{role.role}[{replica.id}] error_msg: "
                errors.append(wrap_error_message(mask(reply.message), header=header))
    if len(rows) > 1:
        parts.append(format_table(rows))
    if left_out:
        last = array.size - 1 if array is not None else 0
        parts.append(
            f"({left_out} more indices not shown: `anylaunch status {app_handle or 'HANDLE'} "
            f"--indices 0-{last}` lists them, or name the ones you want)"
        )
    if errors:
        parts.append("\n".join(errors))
    return "\n\n".join(parts)
