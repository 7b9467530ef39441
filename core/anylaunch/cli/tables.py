"""Aligned plain-text tables for humans (``list``, ``status``): column widths come from the
content; no dependency, no colour, nothing but spaces between columns."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from anylaunch.specs.api import AppStatus

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


def format_status(
    status: AppStatus,
    app_handle: str = "",
    filter_roles: Iterable[str] | None = None,
    redact: Callable[[str], str] | None = None,
) -> str:
    """The status of an app as people read it: a summary (only the fields that say
    something), a table with one row per replica (EXIT ``-``: no reply file), then the
    error of each replica that left one. Everything scheduler-written goes through ``redact``.

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
    parts = [format_table(summary)]

    rows = [["ROLE", "REPLICA", "STATE", "EXIT", "HOSTNAME"]]
    errors: list[str] = []
    for role in select_roles(status.roles, filter_roles):
        for replica in sorted(role.replicas, key=lambda r: r.id):
            reply = parse_error_reply(replica.structured_error_msg)
            exit_text = reply.exitcode_text if reply is not None else "-"
            rows.append(
                [role.role, str(replica.id), state_name(replica.state), exit_text, replica.hostname]
            )
            if reply is not None:
                header = f"{role.role}[{replica.id}] error_msg: "
                errors.append(wrap_error_message(mask(reply.message), header=header))
    if len(rows) > 1:
        parts.append(format_table(rows))
    if errors:
        parts.append("\n".join(errors))
    return "\n\n".join(parts)
