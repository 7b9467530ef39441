"""Job arrays on AWS Batch: one ``SubmitJob`` with ``arrayProperties`` (no I/O but the
calls the scheduler hands in).

How an array app maps onto Batch:

- The job definition's command is ``/bin/sh -c SCRIPT anylaunch Ref::anylaunch_selected``:
  Batch substitutes the ``anylaunch_selected`` parameter (``all`` by default in the job
  definition, the selected indices of a retry in its ``SubmitJob``), and SCRIPT turns the
  child's position (``AWS_BATCH_JOB_ARRAY_INDEX``) into the array index, then runs
  :func:`~anylaunch.schedulers.common.arrays.index_script`. So a retry submits the same
  definition again with other parameters: nothing is rebuilt from text.
- Two or more indices are one array job of that many children (Batch's minimum array size
  is 2, its maximum 10,000). A single index (``ArraySpec(1)``, or a retry of one index) is a
  plain job: the script maps its position 0 to the index, and describe reports that one
  index, so the caller sees the same array either way.
- AWS Batch has no per-job limit on how many children run at once (the compute
  environment's capacity is the only one), so a ``parallelism`` below the number of indices
  is refused at dryrun rather than silently ignored.
- The array's facts (:func:`~anylaunch.schedulers.common.arrays.array_meta`) travel in the
  job's ``parameters`` (tag values cannot hold ``;`` or ``,``), so any process can describe
  it.
- Describe costs the one ``DescribeJobs`` of the parent (whose
  ``arrayProperties.statusSummary`` counts the children by status) plus one paginated
  ``ListJobs(arrayJobId=..., jobStatus=S)`` for each of RUNNING, SUCCEEDED and FAILED that
  the summary says is not empty (up to 1,000 children per page): at most 3 calls for up to
  1,000 indices, whatever the array's size below that. Children in no listed status are
  queued (PENDING).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from anylaunch.schedulers.aws.batch_request import _STATES, CANCEL_REASON
from anylaunch.schedulers.common.arrays import (
    ArrayMeta,
    IndexFacts,
    array_meta,
    index_script,
    read_array_meta,
    select_by_position,
)
from anylaunch.specs.api import AppState, Role
from anylaunch.specs.arrays import ArraySpec, substitute_shell_refs
from anylaunch.specs.errors import InvalidSpecError

__all__ = [
    "ARRAY_PARAM",
    "MAX_BATCH_ARRAY",
    "SELECTED_PARAM",
    "array_command",
    "array_submit_fields",
    "check_array",
    "child_facts",
    "list_children",
    "meta_of",
    "position_of",
    "renamed_definition",
]

#: The job parameter that holds :func:`array_meta` of an array app.
ARRAY_PARAM = "anylaunch_array"
#: The job parameter of the indices a submission runs, space separated (``all``: every one).
SELECTED_PARAM = "anylaunch_selected"
#: AWS Batch array jobs hold 2 to 10,000 children.
MAX_BATCH_ARRAY = 10_000
#: The child statuses worth listing; children in any other status are queued.
LISTED_STATUSES = ("RUNNING", "SUCCEEDED", "FAILED")
_PAGE = 1000

# The child's position: AWS_BATCH_JOB_ARRAY_INDEX in an array child; a backend that does not
# set it (moto) still names children JOBID:POSITION in AWS_BATCH_JOB_ID; a plain job is 0.
# Then the position picks the index from the selected list ($1: Ref::anylaunch_selected).
_POSITION = """\
anylaunch_slot=${AWS_BATCH_JOB_ARRAY_INDEX:-}
if [ -z "$anylaunch_slot" ]; then
  case "${AWS_BATCH_JOB_ID:-}" in *:*) anylaunch_slot=${AWS_BATCH_JOB_ID##*:} ;; *) anylaunch_slot=0 ;; esac
fi
""" + select_by_position("$1")


def check_array(array: ArraySpec) -> None:
    """Refuses what a Batch array cannot run: more than 10,000 indices in one submission, or
    a parallelism below the number of indices (Batch cannot cap one job's children).

    >>> check_array(ArraySpec(20, parallelism=4))
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: ArraySpec.parallelism=4 is invalid: AWS Batch cannot limit how many children of one array job run at once (only the compute environment's capacity does). Fix: pass parallelism=None and cap concurrency with the compute environment's maxvCpus, or submit to a scheduler that limits arrays (slurm, lsf, kubernetes, local_cwd)
    """
    count = len(array.selected)
    if count > MAX_BATCH_ARRAY:
        raise InvalidSpecError(
            "ArraySpec.size",
            count,
            f"an AWS Batch array job holds at most {MAX_BATCH_ARRAY} children",
            f"split the work into arrays of at most {MAX_BATCH_ARRAY} indices",
        )
    if array.limit < count:
        raise InvalidSpecError(
            "ArraySpec.parallelism",
            array.parallelism,
            "AWS Batch cannot limit how many children of one array job run at once (only "
            "the compute environment's capacity does)",
            "pass parallelism=None and cap concurrency with the compute environment's "
            "maxvCpus, or submit to a scheduler that limits arrays (slurm, lsf, kubernetes, "
            "local_cwd)",
        )


def array_command(container: dict[str, Any], role: Role, array: ArraySpec) -> dict[str, Any]:
    """Makes ``container`` (from ``container_properties``, macros applied) run the array:
    its command becomes the index script, env values with array macros move into it.

    >>> role = Role("r", image="x", entrypoint="echo", args=["${array_index}"])
    >>> c = array_command({"command": ["echo", "${array_index}"], "environment": []},
    ...                   role, ArraySpec(3))
    >>> c["command"][:2], c["command"][3:]
    (['/bin/sh', '-c'], ['anylaunch', 'Ref::anylaunch_selected'])
    >>> print(c["command"][2].splitlines()[-1])
    exec echo "${ANYLAUNCH_ARRAY_INDEX}"
    """
    command = [str(word) for word in container["command"]]
    env = {str(e["name"]): str(e["value"]) for e in container.get("environment") or []}
    rendered = Role(role.name, image=role.image, entrypoint=command[0], args=command[1:])
    rendered.env = {k: v for k, v in env.items() if substitute_shell_refs(v) != v}
    full = ArraySpec(array.size, None, array.min_success_ratio, array.params)
    script = _POSITION + index_script(rendered, full, "$anylaunch_slot")
    container["command"] = ["/bin/sh", "-c", script, "anylaunch", f"Ref::{SELECTED_PARAM}"]
    container["environment"] = [
        {"name": k, "value": v} for k, v in env.items() if k not in rendered.env
    ]
    return container


def array_submit_fields(array: ArraySpec) -> dict[str, Any]:
    """The ``SubmitJob`` fields of an array: ``arrayProperties`` (two or more indices) and
    the parameters that select its indices and describe it.

    >>> array_submit_fields(ArraySpec(20, indices=[7]))
    {'parameters': {'anylaunch_array': 'size=20;ratio=1.0;selected=7', 'anylaunch_selected': '7'}}
    >>> array_submit_fields(ArraySpec(3))["arrayProperties"]
    {'size': 3}
    """
    picked = array.selected
    selected = "all" if array.indices is None else " ".join(map(str, picked))
    fields: dict[str, Any] = {
        "parameters": {ARRAY_PARAM: array_meta(array), SELECTED_PARAM: selected}
    }
    if len(picked) > 1:
        fields["arrayProperties"] = {"size": len(picked)}
    return fields


def meta_of(job: Mapping[str, Any]) -> ArrayMeta | None:
    """The array facts of a Batch job, or None for a job that is not an array app."""
    text = (job.get("parameters") or {}).get(ARRAY_PARAM)
    return read_array_meta(str(text)) if text else None


def position_of(child_id: str) -> int | None:
    """The position of a child job ``JOBID:POSITION`` (None for any other id)."""
    _, sep, tail = child_id.rpartition(":")
    return int(tail) if sep and tail.isdigit() else None


def list_children(client: Any, parent: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Summaries of the array's children that run or ended, one paginated ``ListJobs`` per
    status the parent's ``statusSummary`` counts (every listed status without one)."""
    summary = (parent.get("arrayProperties") or {}).get("statusSummary") or {}
    statuses = [s for s in LISTED_STATUSES if not summary or summary.get(s)]
    found: list[dict[str, Any]] = []
    for status in statuses:
        pages = client.get_paginator("list_jobs").paginate(
            arrayJobId=parent["jobId"],
            jobStatus=status,
            PaginationConfig={"PageSize": _PAGE},
        )
        found += [s for page in pages for s in page["jobSummaryList"]]
    return found


def _child_state(child: Mapping[str, Any], cancelled: bool) -> tuple[AppState, int | None]:
    status = str(child.get("status", ""))
    exit_code = (child.get("container") or {}).get("exitCode")
    state = _STATES.get(status, AppState.UNKNOWN)
    reason = str(child.get("statusReason") or "")
    if state == AppState.FAILED and (
        reason.startswith(CANCEL_REASON) or (cancelled and exit_code is None)
    ):
        state = AppState.CANCELLED
    return state, int(exit_code) if exit_code is not None else None


def child_facts(
    meta: ArrayMeta, parent: Mapping[str, Any], children: Iterable[Mapping[str, Any]]
) -> dict[int, IndexFacts]:
    """Each index's facts: from the children of an array job, or from the job itself when it
    is a plain job (one index)."""
    picked = meta.selected if meta.selected is not None else tuple(range(meta.size))
    cancelled = str(parent.get("statusReason") or "").startswith(CANCEL_REASON)
    if not (parent.get("arrayProperties") or {}).get("size"):
        state, code = _child_state(parent, cancelled)
        return {picked[0]: IndexFacts(state, code, structured_error_msg=_reason(parent))}
    facts: dict[int, IndexFacts] = {}
    for child in children:
        position = position_of(str(child.get("jobId", "")))
        if position is None or position >= len(picked):
            continue
        state, code = _child_state(child, cancelled)
        facts[picked[position]] = IndexFacts(state, code, structured_error_msg=_reason(child))
    if cancelled and parent.get("status") == "FAILED":  # children stopped before they started
        for index in picked:
            facts.setdefault(index, IndexFacts(AppState.CANCELLED))
    return facts


def _reason(job: Mapping[str, Any]) -> str:
    from anylaunch.specs.markers import NONE

    reason = str(job.get("statusReason") or (job.get("container") or {}).get("reason") or "")
    return reason or NONE


def renamed_definition(job_def: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """``job_def`` whose container's env values and command name job ``new`` where they
    named ``old``: a retry's copy of the definition names its own app (its handle in
    ``ANYLAUNCH_JOB_ID``, a resolved ``${app_id}``), not the one it was copied from.

    >>> renamed_definition({"containerProperties": {"command": ["run", "q:a-x1"],
    ...     "environment": [{"name": "ANYLAUNCH_JOB_ID", "value": "aws_batch://s/q:a-x1"}]}},
    ...     "a-x1", "a-y2")["containerProperties"]
    {'command': ['run', 'q:a-y2'], 'environment': [{'name': 'ANYLAUNCH_JOB_ID', 'value': 'aws_batch://s/q:a-y2'}]}
    """
    container = job_def.get("containerProperties")
    if not isinstance(container, dict):
        return job_def
    container["environment"] = [
        {**var, "value": var["value"].replace(old, new)}
        if isinstance(var.get("value"), str)
        else var
        for var in container.get("environment") or []
    ]
    if isinstance(container.get("command"), list):
        container["command"] = [
            w.replace(old, new) if isinstance(w, str) else w for w in container["command"]
        ]
    return job_def
