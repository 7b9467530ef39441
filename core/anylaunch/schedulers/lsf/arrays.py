"""Job arrays on LSF: an array app is ONE ``bsub -J "{app_id}-{role}[1-N]%K"``.

LSF array indices are 1-based: the element with ``LSB_JOBINDEX=i+1`` runs array index ``i``
(a retry of index 7 is the element ``[8]``). Every element runs the same job script, which
sets the index's env (:func:`~anylaunch.schedulers.common.arrays.index_script`) and writes the
index's logs to ``{jobdir}/{app_id}/{role}/{index}/{stdout,stderr,combined}.log`` (LSF's own
report to ``lsf-%I.out``/``.err`` beside them). The array's facts
(:func:`~anylaunch.schedulers.common.arrays.array_meta`) end the job description
(``... array=size%3D20...``), so the one ``bjobs`` query that lists the app's elements
(``JOBID`` with ``JOBINDEX``, or ``JOBID[IDX]`` under ``LSB_BJOBS_DISPLAY_ENH``) describes
it. The request is kept in ``{app_dir}/anylaunch-array.json`` for retries. Roles with a
container image are refused (the array runs on the shared filesystem).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from anylaunch.schedulers.api import DescribeAppResponse
from anylaunch.schedulers.common.app_ids import make_app_id
from anylaunch.schedulers.common.arrays import (
    IndexFacts,
    array_meta,
    array_response,
    index_script,
    read_array_meta,
)
from anylaunch.schedulers.common.job_metadata import job_metadata, owner_metadata
from anylaunch.schedulers.common.roles import RANK0_ENV
from anylaunch.schedulers.lsf.names import (
    BACKEND,
    LsfJob,
    LsfOpts,
    LsfRequest,
    _encode,
    job_description,
)
from anylaunch.schedulers.lsf.state import _Record
from anylaunch.specs.api import NONE, AppDef, AppState, Role, macros
from anylaunch.specs.array_status import index_ranges
from anylaunch.specs.arrays import ArraySpec, shell_role
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.secrets import is_secret_env_name

__all__ = ["REQUEST_FILE", "build_array_request", "describe_array", "lsf_indices", "retry_request"]

REQUEST_FILE = "anylaunch-array.json"
_REF = re.compile(r"\$\{ANYLAUNCH_[A-Z0-9_]+\}")
_SHELL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ARRAY_DESC = re.compile(r" array=\S*$")
_BRACKETS = re.compile(r"\[[^\]]*\](%\d+)?$")


def lsf_indices(array: ArraySpec) -> str:
    """The bracket and limit of the ``-J`` of an array: 1-based, ``%K`` unless K covers all.

    >>> lsf_indices(ArraySpec(20, parallelism=4)), lsf_indices(ArraySpec(20, indices=[7]))
    ('[1-20]%4', '[8]')
    """
    picked = array.selected
    text = f"[{index_ranges(i + 1 for i in picked)}]"
    return text + (f"%{array.limit}" if array.limit < len(picked) else "")


def _body(role: Role, array: ArraySpec, mask: bool) -> str:
    """The lines that run one element (in a subshell of the job script)."""
    whole = replace(array, indices=None)  # the position is the index: LSB_JOBINDEX - 1
    if mask:
        role = replace(
            role, env={k: "***" if is_secret_env_name(k) else v for k, v in role.env.items()}
        )
    shelled = shell_role(role)
    lines = [f'export {RANK0_ENV}="$h" PYTHONUNBUFFERED=1']
    prefix: list[str] = []
    for name, value in role.env.items():
        if shelled.env[name] != value or _REF.search(value):
            continue  # index_script exports it with the array macros expanded
        if _SHELL_NAME.match(name):
            lines.append(f"export {name}={shlex.quote(value)}")
        else:
            prefix.append(shlex.quote(f"{name}={value}"))
    run = "exec env " + " ".join(prefix) if prefix else "exec"
    lines.append(index_script(role, whole, "$((LSB_JOBINDEX - 1))", run=run).rstrip("\n"))
    return "\n".join(lines)


def build_array_request(
    app: AppDef,
    opts: LsfOpts,
    session: str,
    jobdir: str,
    options_of: Mapping[str, list[str]],
    job_script: Callable[..., str],
) -> LsfRequest:
    """The one-job request of an array app (``options_of``: queue/project/resources)."""
    assert app.array is not None
    role = app.roles[0]
    if role.image and not role.image.startswith(("/", ".", "~")):
        raise InvalidSpecError(
            f"Role[{role.name}].image",
            role.image,
            "lsf arrays run on the shared filesystem, not in containers",
            "give the role a directory image (e.g. '.' or /shared/project)",
        )
    app_id = make_app_id(app.name)
    app_dir = os.path.join(jobdir, app_id)
    role_dir = os.path.join(app_dir, role.name)
    workdir = os.path.abspath(os.path.expanduser(role.image or "."))
    values = macros.Values(
        img_root=workdir,
        app_id=app_id,
        replica_id="${ANYLAUNCH_ARRAY_INDEX}",
        rank0_env=RANK0_ENV,
    )
    applied = values.apply(role)
    name = f"{app_id}-{role.name}"
    metadata = {**job_metadata(app, BACKEND), **owner_metadata(app)}
    description = job_description(app_id, role.name, 0, 1, session, app.name, metadata)
    options = ["-J", name + lsf_indices(app.array), "-Jd", f"{description} array="]
    options[-1] += _encode(array_meta(app.array))
    options += options_of["common"]
    options += [
        "-o",
        os.path.join(role_dir, "lsf-%I.out"),
        "-e",
        os.path.join(role_dir, "lsf-%I.err"),
    ]
    options += ["-cwd", workdir]
    render = job_script  # jobs._job_script, passed in (jobs imports this module)
    args = {
        "app_id": app_id,
        "job_name": name,
        "role": role,
        "replica_id": 0,
        "app_dir": app_dir,
        "log_dir": role_dir,
        "workdir": workdir,
        "rank0_name": None,
        "env": {},
        "command": [],
        "in_container": False,
    }
    job = LsfJob(
        role=role.name,
        replica_id=0,
        name=name,
        options=options,
        log_dir=role_dir,
        script=render(**args, mask=False, array_body=_body(applied, app.array, False)),
        display_script=render(**args, mask=True, array_body=_body(applied, app.array, True)),
        indices=app.array.selected,
    )
    return LsfRequest(
        app_id=app_id, app_name=app.name, session=session, app_dir=app_dir, jobs=[job]
    )


def save_request(request: LsfRequest) -> None:
    """Keeps the array's bsub options and script for :func:`retry_request`."""
    job = request.jobs[0]
    data = {"app_id": request.app_id, "options": job.options, "script": job.script}
    path = os.path.join(request.app_dir, REQUEST_FILE)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # the env may hold secrets
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)


def retry_request(
    request_file: str, app_name: str, session: str, indices: Iterable[int]
) -> LsfRequest:
    """The request that reruns ``indices`` of a stored array as a new app (new app id,
    same script, the elements ``[i+1]`` only)."""
    with open(request_file) as f:
        data = json.load(f)
    old: str = data["app_id"]
    new = make_app_id(app_name)
    options = [str(o).replace(old, new) for o in data["options"]]
    script = str(data["script"]).replace(old, new)
    j, jd = options.index("-J") + 1, options.index("-Jd") + 1
    meta = read_array_meta(_decode_meta(options[jd]))
    spec = ArraySpec(meta.size, min_success_ratio=meta.min_success_ratio, indices=tuple(indices))
    limit = re.search(r"%(\d+)$", options[j])
    bracket = lsf_indices(spec)
    if limit and int(limit.group(1)) < len(spec.selected):
        bracket += f"%{limit.group(1)}"
    options[j] = _BRACKETS.sub("", options[j]) + bracket
    options[jd] = _ARRAY_DESC.sub("", options[jd]) + " array=" + _encode(array_meta(spec))
    app_dir = os.path.join(os.path.dirname(os.path.dirname(request_file)), new)
    log_dir = options[options.index("-o") + 1].rsplit("/", 1)[0]
    job = LsfJob(
        role=os.path.basename(log_dir),
        replica_id=0,
        name=options[j],
        options=options,
        log_dir=log_dir,
        script=script,
        indices=spec.selected,
    )
    return LsfRequest(app_id=new, app_name=app_name, session=session, app_dir=app_dir, jobs=[job])


def _decode_meta(description: str) -> str:
    from anylaunch.schedulers.lsf.names import parse_job_description

    fields = parse_job_description(description) or {}
    return fields.get("array", "")


def describe_array(app_id: str, records: list[_Record]) -> DescribeAppResponse:
    """The describe response of an array app from its elements' records."""
    meta = read_array_meta(records[0].array)
    facts: dict[int, IndexFacts] = {}
    for rec in records:
        state = rec.state
        code = rec.exit_code.strip()
        exit_code = int(code) if code.isdigit() else (0 if state == AppState.SUCCEEDED else None)
        facts[rec.replica_id] = IndexFacts(
            state=state,
            exit_code=exit_code if state.is_terminal() else None,
            hostname=rec.host,
            structured_error_msg=(
                f"exit code {code or '?'}" + (f" ({rec.exit_reason})" if rec.exit_reason else "")
                if state == AppState.FAILED
                else NONE
            ),
        )
    found = array_response(meta, records[0].role, facts)
    app_dir = os.path.dirname(os.path.dirname(records[0].output_file))
    return DescribeAppResponse(
        app_id=app_id,
        state=found.state,
        num_restarts=0,
        msg=found.msg,
        metadata={"app_dir": app_dir, "lsf_job": records[0].job_id, **records[0].metadata},
        roles_statuses=found.roles_statuses,
        array=found.array,
    )
