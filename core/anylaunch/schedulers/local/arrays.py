"""Job arrays on ``local_cwd``: one app, one supervisor, one replica per index.

An array app's request holds one replica per selected index (replica id == index), each
resolved client-side by :func:`~anylaunch.specs.arrays.resolve_index` (no shell involved),
and an ``array`` record: the limit the supervisor keeps to (it starts the next index as one
ends, in index order), how many must succeed, :func:`~anylaunch.schedulers.common.arrays.array_meta`
for describe, and what a retry needs to rebuild the same definition (the spec with its
parameters, the run options, the working directory). The request file is private to the
user (mode 0600), like the env it already holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from anylaunch.schedulers.common.arrays import (
    IndexFacts,
    array_meta,
    array_response,
    read_array_meta,
)
from anylaunch.schedulers.common.roles import role_from_record
from anylaunch.specs.api import NONE, AppDef, AppState
from anylaunch.specs.array_status import ArrayStatus
from anylaunch.specs.arrays import ArraySpec, retry_spec
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.runopts import CfgVal
from anylaunch.specs.serialize import arrayspec_from_dict, arrayspec_to_dict

__all__ = ["array_record", "describe_array", "retry_app"]


def array_record(array: ArraySpec, cfg: Mapping[str, CfgVal], workdir: str) -> dict[str, Any]:
    """The ``array`` entry of a request: what the supervisor, describe and a retry read.

    >>> record = array_record(ArraySpec(20, parallelism=4), {"cancel_grace_s": 1.0}, "/w")
    >>> record["limit"], record["required"], record["meta"]
    (4, 20, 'size=20;ratio=1.0')
    """
    return {
        "limit": array.limit,
        "required": array.required_successes(),
        "meta": array_meta(array),
        "spec": arrayspec_to_dict(array),
        "cfg": {k: v for k, v in cfg.items() if v is not None},
        "workdir": workdir,
    }


def describe_array(
    record: Mapping[str, Any], role_name: str, state: Mapping[str, Any], recorded: AppState
) -> tuple[AppState, str, list[Any], ArrayStatus]:
    """State, message, role statuses and :class:`ArrayStatus` of an array app from its
    state record (indices not started yet are PENDING). ``recorded`` is the app's state as
    the supervisor decided it: a cancel, a submission not yet claimed, or an end the
    supervisor could not write itself (its crash) stands; otherwise the array rule decides.
    """
    facts: dict[int, IndexFacts] = {}
    for r in state.get("replicas", []):
        code = r.get("exit_code")
        facts[int(r["id"])] = IndexFacts(
            AppState[r["state"]],
            int(code) if code is not None and r["state"] in ("SUCCEEDED", "FAILED") else None,
            "localhost",
            r.get("structured_error_msg", NONE),
        )
    found = array_response(read_array_meta(record["meta"]), role_name, facts)
    assert found.array is not None
    app_state = found.state
    if recorded in (AppState.CANCELLED, AppState.SUBMITTED):
        app_state = recorded
    msg = found.msg
    extra = str(state.get("msg") or "")
    if extra and recorded.is_terminal():
        msg = f"{msg}; {extra}"
    return app_state, msg, found.roles_statuses, found.array


def retry_app(request: Mapping[str, Any], indices: Sequence[int]) -> tuple[AppDef, Any, str]:
    """The app (same definition, only ``indices``), the run options and the working
    directory that rerun ``indices`` of the array app of ``request``.

    Raises:
        InvalidSpecError: the app is not an array, or an index is out of its range.
    """
    record = request.get("array")
    if not record:
        raise InvalidSpecError(
            "app_id", request.get("app_id"), "is not an array app", "retry arrays only"
        )
    original = arrayspec_from_dict(record["spec"])
    assert original is not None
    array = retry_spec(original, indices)
    role = role_from_record(request["roles"][0]["spec"])
    app = AppDef(str(request.get("app_name", "array")), [role], array=array)
    return app, dict(record.get("cfg") or {}), str(record["workdir"])
