"""Job arrays on Slurm: an array app is ONE ``sbatch --array=<indices>%K``.

Every task of the array runs the same batch script; Slurm's task id is the array index
(``$SLURM_ARRAY_TASK_ID``), so a retry of some indices is the same script with
``--array=7`` (or ``--array=3,17,42``), and the script needs no position-to-index mapping.
The array's facts (:func:`~anylaunch.schedulers.common.arrays.array_meta`) travel in the job
name (``app:role [anylaunch-array size=20;ratio=1.0]``), which squeue, scontrol and sacct all
return, so any process can describe the array from the one query it already makes. Each
index's logs go to ``{workdir}/slurm-{array job id}/{role}-{index}.{out,err,log}`` (the
batch script's own output to ``{workdir}/slurm-{array job id}_{index}.out``).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from anylaunch.schedulers.api import DescribeAppResponse
from anylaunch.schedulers.common.arrays import (
    IndexFacts,
    array_meta,
    array_response,
    index_script,
    read_array_meta,
)
from anylaunch.schedulers.common.roles import CONTROL_CHAR, RANK0_ENV
from anylaunch.schedulers.slurm.query import (
    SlurmCommandError,
    SlurmJob,
    array_task_indices,
    expand_hostlist,
    failure_error,
    run_slurm,
    split_array_name,
)
from anylaunch.schedulers.slurm.request import (
    _REPLICA_FN,
    _SHELL_NAME,
    SlurmBatchRequest,
    _sbatch_lines,
    _shell_word,
)
from anylaunch.specs.api import NONE, AppState, Role, macros
from anylaunch.specs.array_status import index_ranges
from anylaunch.specs.arrays import ArraySpec, retry_spec, shell_role
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.secrets import is_secret_env_name

__all__ = [
    "APP_ID_ENV",
    "SCRIPT_NAME",
    "SlurmArrayRequest",
    "array_option",
    "array_records",
    "describe_array",
    "log_indices",
    "retry_script",
    "tagged",
]

#: The env var the batch script sets to the array's job id (what ``${app_id}`` becomes).
APP_ID_ENV = "ANYLAUNCH_APP_ID"
#: The batch script is kept beside the logs (``slurm-{id}/SCRIPT_NAME``) for retries.
SCRIPT_NAME = "anylaunch-array.sbatch"
_REF = re.compile(r"\$\{ANYLAUNCH_[A-Z0-9_]+\}")
_ARRAY_LINE = re.compile(r"^#SBATCH --array=.*$", re.MULTILINE)
_NAME_LINE = re.compile(r"^#SBATCH --job-name=.*$", re.MULTILINE)


def array_option(array: ArraySpec) -> str:
    """The ``--array`` value: the selected indices, ``%K`` unless K covers them all.

    >>> array_option(ArraySpec(20, parallelism=4)), array_option(ArraySpec(20))
    ('0-19%4', '0-19')
    >>> array_option(ArraySpec(20, parallelism=2, indices=[3, 17, 18]))
    '3,17-18%2'
    """
    picked = array.selected
    text = index_ranges(picked)
    return text + (f"%{array.limit}" if array.limit < len(picked) else "")


def job_name(app_name: str, role: str, array: ArraySpec) -> str:
    """The array's job name: ``app:role`` and the array's facts.

    >>> job_name("a", "r", ArraySpec(4, indices=[1]))
    'a:r [anylaunch-array size=4;ratio=1.0;selected=1]'
    """
    return f"{CONTROL_CHAR.sub('_', app_name)}:{role} [anylaunch-array {array_meta(array)}]"


@dataclass
class SlurmArrayRequest(SlurmBatchRequest):
    """An array app's sbatch script: one role, one task per index (``--array``)."""

    array: ArraySpec = field(default_factory=lambda: ArraySpec(1))
    role: Role | None = field(default=None, repr=False)
    """The role with the scheduler macros applied (array macros left for the script)."""

    def materialize(self, mask_secrets: bool = False) -> str:
        """Renders the array's sbatch script (``mask_secrets`` hides secret env values)."""
        return _render_array_script(self, mask_secrets)


def _render_array_script(request: SlurmArrayRequest, mask_secrets: bool) -> str:
    group = request.groups[0]
    role = request.role
    assert role is not None
    array = request.array
    opts = {
        **request.job_opts,
        **group.sbatch_opts,
        "job-name": job_name(request.app_name, group.role, array),
        "array": array_option(array),
    }
    lines = [
        "#!/bin/bash",
        f"# anylaunch array app {CONTROL_CHAR.sub('_', request.app_name)!r}: role "
        f"{group.role}, {len(array.selected)} of {array.size} indices, at most "
        f"{array.limit} at once; the task id is the index",
        *_sbatch_lines(opts),
        "",
        f'export {APP_ID_ENV}="$SLURM_ARRAY_JOB_ID"',
        "export ANYLAUNCH_LOG_DIR="
        + _shell_word(os.path.join(request.workdir, "slurm-"))
        + '"$SLURM_ARRAY_JOB_ID"',
        f'export {RANK0_ENV}="$(hostname)"',
        "export PYTHONUNBUFFERED=1",
        "",
        _REPLICA_FN,
        "",
        f"cd {_shell_word(group.chdir)} || exit 1",
    ]
    # the script runs every index: the prelude maps the task id (the index) to the index's
    # env; positions are indices, so the script is built for the whole array (a retry's
    # subset is chosen by --array alone)
    whole = replace(array, indices=None)
    if mask_secrets:
        role = replace(
            role, env={k: "***" if is_secret_env_name(k) else v for k, v in role.env.items()}
        )
    shelled = shell_role(role)
    prefix: list[str] = []
    for name, value in role.env.items():
        if shelled.env[name] != value or _REF.search(value):
            continue  # index_script exports it, with the array macros expanded
        shown = _shell_word(value)
        if _SHELL_NAME.match(name):
            lines.append(f"export {name}={shown}")
        else:  # not a shell variable name: only env(1) can set it
            prefix.append(_shell_word(name + "=") + shown)
    run = [f"anylaunch_replica {shlex.quote(group.role)}", '"$ANYLAUNCH_ARRAY_INDEX"']
    if prefix:
        run += ["env", *prefix]
    lines += [
        "set +e",
        index_script(role, whole, "$SLURM_ARRAY_TASK_ID", env=True, run=" ".join(run)).rstrip(),
        "rc=$?",
        'exit "$rc"',
    ]
    return "\n".join(lines) + "\n"


def array_request(request: SlurmBatchRequest, role: Role, array: ArraySpec) -> SlurmArrayRequest:
    """The array form of the app's request (one role, one replica: checked by the spec)."""
    group = request.groups[0]
    values = macros.Values(
        img_root=group.chdir,
        app_id="${" + APP_ID_ENV + "}",
        replica_id="${ANYLAUNCH_ARRAY_INDEX}",
        rank0_env=RANK0_ENV,
    )
    job_opts = {k: v for k, v in request.job_opts.items() if k != "requeue"}
    job_opts["no-requeue"] = None  # a retry reruns the failed indices (retry_failed)
    # %A: the array's job id, %a: the task id (the index); %% is a literal %
    job_opts["output"] = os.path.join(request.workdir.replace("%", "%%"), "slurm-%A_%a.out")
    return SlurmArrayRequest(
        app_name=request.app_name,
        workdir=request.workdir,
        job_opts=job_opts,
        groups=request.groups,
        max_retries=0,
        create_workdir=request.create_workdir,
        array=array,
        role=values.apply(role),
    )


def save_script(request: SlurmArrayRequest, job_id: str) -> None:
    """Keeps the submitted script beside the array's logs, for :func:`retry_script`."""
    log_dir = os.path.join(request.workdir, f"slurm-{job_id}")
    os.makedirs(log_dir, exist_ok=True)
    path = os.path.join(log_dir, SCRIPT_NAME)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it may hold secrets
    with os.fdopen(fd, "w") as f:
        f.write(request.materialize())


def retry_script(
    app_id: str, jobs: Sequence[SlurmJob], workdir: str, indices: Sequence[int]
) -> str:
    """The batch script that reruns ``indices`` of array ``app_id``: its own script with
    ``--array`` (and the stored selection) replaced.

    Raises:
        InvalidSpecError: the app is not an array, or an index is outside it.
        SlurmCommandError: neither the stored script nor the controller has the script.
    """
    job = tagged(jobs)
    name, meta_text = split_array_name(job.name) if job is not None else ("", None)
    if meta_text is None:
        raise InvalidSpecError(
            "app_id", app_id, "is not an array app", "retry the indices of an array app"
        )
    meta = read_array_meta(meta_text)
    spec = retry_spec(ArraySpec(meta.size, min_success_ratio=meta.min_success_ratio), indices)
    path = os.path.join(workdir, f"slurm-{app_id}", SCRIPT_NAME)
    try:
        with open(path) as f:
            script = f.read()
    except OSError:
        # the controller keeps the script while it knows the job
        script = run_slurm(["scontrol", "write", "batch_script", app_id, "-"], timeout=60)
    if not _ARRAY_LINE.search(script) or not _NAME_LINE.search(script):
        raise SlurmCommandError(
            f"the batch script of array {app_id} has no #SBATCH --array/--job-name line. "
            "Fix: resubmit the array"
        )
    limit = _limit_of(script)
    option = index_ranges(spec.selected)
    if limit is not None and limit < len(spec.selected):
        option += f"%{limit}"
    app_name, _, role = name.rpartition(":")
    new_name = job_name(app_name, role, spec)
    script = _ARRAY_LINE.sub(lambda _: f"#SBATCH --array={option}", script, count=1)
    return _NAME_LINE.sub(lambda _: _sbatch_lines({"job-name": new_name})[0], script, count=1)


def _limit_of(script: str) -> int | None:
    match = re.search(r"^#SBATCH --array=[^%\n]*%(\d+)\s*$", script, re.MULTILINE)
    return int(match.group(1)) if match else None


def tagged(jobs: Sequence[SlurmJob]) -> SlurmJob | None:
    """The first record that carries the array's facts in its name (slurmdbd may briefly
    hold a placeholder record, without them, for a task that just ended)."""
    return next((j for j in jobs if split_array_name(j.name)[1] is not None), None)


def array_records(jobs: Sequence[SlurmJob]) -> str | None:
    """The stored facts of an array app's records (None: not an array)."""
    job = tagged(jobs)
    return split_array_name(job.name)[1] if job is not None else None


def _facts(jobs: Sequence[SlurmJob]) -> dict[int, IndexFacts]:
    """Each index's facts; the first record naming an index wins (live ones come first)."""
    facts: dict[int, IndexFacts] = {}
    for job in jobs:
        state = job.app_state
        for index in array_task_indices(job.array_task):
            if index in facts:
                continue
            hosts = expand_hostlist(job.nodes)
            error = NONE
            if state == AppState.FAILED:
                error = failure_error(job)
                if error == NONE:
                    error = f"signal {job.signal}" if job.signal else f"exit code {job.exit_code}"
            facts[index] = IndexFacts(
                state=state,
                exit_code=job.exit_code if state.is_terminal() else None,
                hostname=hosts[0] if hosts else "",
                structured_error_msg=error,
            )
    return facts


def log_indices(jobs: Sequence[SlurmJob]) -> list[int]:
    """The indices an array app runs (whose logs can be read)."""
    meta_text = array_records(jobs)
    if meta_text is None:
        return []
    meta = read_array_meta(meta_text)
    return list(meta.selected if meta.selected is not None else range(meta.size))


def describe_array(app_id: str, jobs: Sequence[SlurmJob], meta_text: str) -> DescribeAppResponse:
    """The describe response of an array app from its records (tasks and pending ranges)."""
    meta = read_array_meta(meta_text)
    name = split_array_name(next(j.name for j in jobs if meta_text in j.name))[0]
    app_name, _, role = name.rpartition(":")
    found = array_response(meta, role, _facts(jobs))
    workdir = next((j.workdir for j in jobs if j.workdir), "")
    return DescribeAppResponse(
        app_id=app_id,
        state=found.state,
        num_restarts=0,
        msg=found.msg,
        ui_url=f"file://{workdir}" if workdir else None,
        metadata={
            "app_name": app_name,
            "slurm_state": ",".join(sorted({j.state for j in jobs})),
            "source": ",".join(sorted({j.source for j in jobs})),
            "workdir": workdir,
            "log_dir": os.path.join(workdir, f"slurm-{app_id}") if workdir else "",
        },
        roles_statuses=found.roles_statuses,
        roles=[Role(name=role, image=workdir, num_replicas=1)],
        array=found.array,
    )


def states_by_index(jobs: Sequence[SlurmJob]) -> Mapping[int, AppState]:
    """Each known index's state (for tests and tools)."""
    return {i: f.state for i, f in _facts(jobs).items()}
