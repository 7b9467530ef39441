"""Names, run options and the batch script of the ``slurm`` scheduler (no I/O): one
heterogeneous job per app, one component per role."""

from __future__ import annotations

import math
import os
import re
import shlex
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from anylaunch.schedulers.common.roles import CONTROL_CHAR, RANK0_ENV
from anylaunch.schedulers.common.shell import heredoc
from anylaunch.schedulers.slurm.query import (
    SlurmCommandError,
    run_slurm,
)
from anylaunch.specs.api import (
    Resource,
    macros,
)
from anylaunch.specs.errors import InvalidRunConfigException
from anylaunch.specs.secrets import is_secret_env_name
from anylaunch.specs.structured_opts import StructuredOpts

BACKEND = "slurm"
#: Slurm versions before this have no ``--gpus-per-task`` (GPUs are ``--gres=gpu:N`` per node).
GPUS_PER_TASK_SINCE = (19, 5)
# Placeholders for the values only the running replica knows. No argument or env value can
# hold a NUL byte (they are rejected), so these never collide with user text.
_APP_ID = "\x00anylaunch-app-id\x00"
_REPLICA_ID = "\x00anylaunch-replica-id\x00"
_PLACEHOLDERS = re.compile(f"({re.escape(_APP_ID)}|{re.escape(_REPLICA_ID)})")
_SHELL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TIME = re.compile(r"^(\d+-\d+(:\d+){0,2}|\d+(:\d+){0,2}|UNLIMITED|INFINITE)$", re.IGNORECASE)
#: A partition, account or qos value: comma-separated names, no space or control character.
_SLURM_NAMES = re.compile(r"^[^\x00-\x20\x7f,]+(,[^\x00-\x20\x7f,]+)*$")
_MAIL_TYPES = frozenset(
    [
        "NONE",
        "BEGIN",
        "END",
        "FAIL",
        "REQUEUE",
        "ALL",
        "INVALID_DEPEND",
        "STAGE_OUT",
        "TIME_LIMIT",
        "TIME_LIMIT_90",
        "TIME_LIMIT_80",
        "TIME_LIMIT_50",
        "ARRAY_TASKS",
    ]
)
_SBATCH_PLAIN = re.compile(r"^[A-Za-z0-9_.,:/=@%+-]+$")


@dataclass
class SlurmOpts(StructuredOpts):
    """Run options of the ``slurm`` scheduler."""

    partition: str | None = None
    """Partition to run in (default: the cluster's default partition)."""

    time: str | None = None
    """Time limit of the job, e.g. 30 (minutes), 1:30:00 or 2-00:00:00."""

    account: str | None = None
    """Account to charge the job to."""

    qos: str | None = None
    """Quality of service of the job."""

    constraint: str | None = None
    """Node features the job needs, e.g. 'gpu&a100' (sbatch --constraint)."""

    comment: str | None = None
    """Comment attached to the job (shown by squeue and sacct)."""

    mail_user: str | None = None
    """Who Slurm mails about the job's state changes."""

    mail_type: str | None = None
    """Which state changes are mailed: comma-separated NONE, BEGIN, END, FAIL, REQUEUE, ALL, TIME_LIMIT, ..."""

    job_dir: str | None = None
    """Directory on the shared filesystem for the job: the workspace is copied into it (it must not exist yet) and the job runs and writes its logs there (default: the current directory)."""

    exclusive: bool = False
    """Give every role's nodes to this job alone (sbatch --exclusive)."""

    sbatch_args: list[str] | None = None
    """Extra sbatch flags for every role, e.g. --nice=10;--reservation=r1 (an escape hatch)."""


@dataclass
class SlurmRoleGroup:
    """One role: one component of the heterogeneous job, one task per replica."""

    role: str
    num_replicas: int
    rank_offset: int
    """Global rank (``SLURM_PROCID``) of the role's replica 0 in the job's one ``srun``."""
    sbatch_opts: dict[str, str | None]
    """``#SBATCH`` flags of the component (None: a flag without a value)."""
    chdir: str
    """Directory the replicas run in (the value of ``${img_root}``)."""
    entrypoint: str
    args: list[str]
    env: dict[str, str] = field(repr=False)
    """Set in each replica; may hold secrets, so it is masked in dryruns."""


@dataclass
class SlurmBatchRequest:
    """The native request of the ``slurm`` scheduler: an sbatch script in structured form.

    Edit it between ``dryrun`` and ``schedule`` if needed; :meth:`materialize` renders it.
    """

    app_name: str
    workdir: str
    """The job's working directory: its logs go to ``{workdir}/slurm-{job id}*``."""
    job_opts: dict[str, str | None]
    """Job-wide ``#SBATCH`` flags (in the first component)."""
    groups: list[SlurmRoleGroup]
    max_retries: int = 0
    create_workdir: bool = False
    """Create ``workdir`` at schedule time (a ``job_dir`` without a workspace)."""

    def sbatch_cmd(self) -> list[str]:
        """The command that submits :meth:`materialize` (the script goes to its stdin)."""
        return ["sbatch", "--parsable"]

    def materialize(self, mask_secrets: bool = False) -> str:
        """Renders the sbatch script (``mask_secrets`` hides secret-looking env values)."""
        return _render_script(self, mask_secrets)


def parse_slurm_version(text: str) -> tuple[int, int] | None:
    """(major, minor) from ``sbatch --version`` output.

    >>> parse_slurm_version("slurm-wlm 22.05.8"), parse_slurm_version("slurm 24.11.0-1")
    ((22, 5), (24, 11))
    >>> parse_slurm_version("nonsense") is None
    True
    """
    match = re.search(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


@lru_cache(maxsize=8)
def _installed_slurm_version(conf: str) -> tuple[int, int] | None:
    del conf  # a cache key: another cluster may run another version
    try:
        return parse_slurm_version(run_slurm(["sbatch", "--version"], timeout=30))
    except SlurmCommandError:
        return None  # no Slurm here (an offline dryrun): assume a current one


def gpu_opts(gpus: int, version: tuple[int, int] | None) -> dict[str, str | None]:
    """The sbatch flags giving each replica (task) ``gpus`` GPUs on this Slurm version.

    >>> gpu_opts(2, (22, 5))
    {'gpus-per-task': '2'}
    >>> gpu_opts(2, (18, 8))  # no --gpus-per-task yet: GRES per node, one replica per node
    {'gres': 'gpu:2', 'ntasks-per-node': '1'}
    >>> gpu_opts(0, (22, 5))
    {}
    """
    if gpus <= 0:
        return {}
    if version is not None and version < GPUS_PER_TASK_SINCE:
        return {"gres": f"gpu:{gpus}", "ntasks-per-node": "1"}
    return {"gpus-per-task": str(gpus)}


def _resource_opts(resource: Resource, version: tuple[int, int] | None) -> dict[str, str | None]:
    opts: dict[str, str | None] = {}
    if resource.cpu > 0:
        opts["cpus-per-task"] = str(resource.cpu)
    if resource.memMB > 0:
        # memory per CPU: the role's tasks may share a node, and --mem is per node
        opts["mem-per-cpu"] = f"{math.ceil(resource.memMB / max(resource.cpu, 1))}M"
    opts.update(gpu_opts(resource.gpu, version))
    return opts


def metadata_comment(comment: str | None, metadata: Mapping[str, str]) -> str:
    """The job's ``--comment``: the user's ``comment`` (if any), then the job's ``metadata``
    as ``key=value`` words (values percent-encoded, so a word never holds a space or quote).

    >>> metadata_comment("nightly run", {"anylaunch/context": "<<NA>>", "anylaunch/scheduler": "slurm"})
    'nightly run anylaunch/context=%3C%3CNA%3E%3E anylaunch/scheduler=slurm'
    """
    words = [f"{k}={urllib.parse.quote(v, safe='')}" for k, v in metadata.items()]
    return " ".join([comment, *words] if comment else words)


def _sbatch_value(flag: str, value: str) -> str:
    """A value as an ``#SBATCH`` line reads it (double quotes with ``\\`` escapes)."""
    if "\n" in value or "\r" in value or "\x00" in value:
        raise InvalidRunConfigException(
            flag, value, "contains a newline or NUL byte", "pass a single-line value"
        )
    if _SBATCH_PLAIN.match(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _sbatch_lines(opts: Mapping[str, str | None]) -> list[str]:
    lines = []
    for flag, value in opts.items():
        if flag.startswith("-"):  # an escape-hatch flag, given whole
            lines.append(f"#SBATCH {flag}")
        elif value is None:
            lines.append(f"#SBATCH --{flag}")
        else:
            lines.append(f"#SBATCH --{flag}={_sbatch_value(flag, value)}")
    return lines


def _shell_word(value: str) -> str:
    """``value`` single-quoted for bash, with the replica's job id and replica id expanded.

    >>> print(_shell_word("it's $(x)"))
    'it'"'"'s $(x)'
    >>> print(_shell_word("--out=/o/" + _APP_ID + "-" + _REPLICA_ID + ".txt"))
    --out=/o/"$SLURM_JOB_ID"-"$rid".txt
    """
    words = []
    for part in _PLACEHOLDERS.split(value):
        if part == _APP_ID:
            words.append('"$SLURM_JOB_ID"')
        elif part == _REPLICA_ID:
            words.append('"$rid"')
        elif part:
            words.append(_quote(part))
    return "".join(words) or "''"


def _quote(text: str) -> str:
    """shlex.quote without the empty ``''`` it leaves around a leading or trailing quote.

    >>> print(_quote("it's"), _quote("'x'"), _quote("plain"))
    'it'"'"'s' "'"'x'"'" plain
    """
    quoted = shlex.quote(text)
    if quoted.startswith("''") and len(quoted) > 2:
        quoted = quoted[2:]
    if quoted.endswith("''") and len(quoted) > 2:
        quoted = quoted[:-2]
    return quoted


_REPLICA_FN = """\
# anylaunch_replica ROLE REPLICA CMD...: runs one replica. Its stdout and stderr are copied to
# $ANYLAUNCH_LOG_DIR/ROLE-REPLICA.out and .err byte for byte, and both to .log line by line
# (whole lines, so the two streams interleave without splitting lines); its exit code to .exit
anylaunch_replica() {
  local log="$ANYLAUNCH_LOG_DIR/$1-$2" rc
  shift 2
  mkdir -p "$ANYLAUNCH_LOG_DIR"
  set -o pipefail
  { "$@" 2>&1 1>&3 3>&- | tee -a "$log.err" | anylaunch_lines >>"$log.log"; } 3>&1 |
    tee -a "$log.out" | anylaunch_lines >>"$log.log"
  rc=$?
  echo "$rc" >"$log.exit"
  return "$rc"
}
anylaunch_lines() { grep -a --line-buffered '' || :; }  # one write per line, no buffering"""

# After srun: the exit code of the replica that failed first, not of those that
# --kill-on-bad-exit stopped because of it (they are killed before writing their .exit).
_FIRST_FAILURE = """\
if [ "$rc" -ne 0 ]; then
  while IFS= read -r exit_file; do
    code="$(cat "$exit_file")"
    if [ "$code" != 0 ]; then
      echo "anylaunch: replica $(basename "$exit_file" .exit) failed first (exit code $code)" >&2
      rc=$code
      break
    fi
  done < <(ls -1tr "$ANYLAUNCH_LOG_DIR"/*.exit 2>/dev/null)
fi"""


def _role_function(index: int, group: SlurmRoleGroup, mask_secrets: bool) -> list[str]:
    values = macros.Values(
        img_root=group.chdir, app_id=_APP_ID, replica_id=_REPLICA_ID, rank0_env=RANK0_ENV
    )
    lines = [
        f"# role {group.role}: {group.num_replicas} replica(s), global ranks "
        f"{group.rank_offset}-{group.rank_offset + group.num_replicas - 1}",
        f"anylaunch_role_{index}() {{",
        f"  local rid=$((SLURM_PROCID - {group.rank_offset}))",
    ]
    prefix: list[str] = []
    for name, raw in group.env.items():
        value = (
            "'***'"
            if mask_secrets and is_secret_env_name(name)
            else _shell_word(values.substitute(raw))
        )
        if _SHELL_NAME.match(name):
            lines.append(f"  export {name}={value}")
        else:  # not a shell variable name: only env(1) can set it
            prefix.append(_shell_word(name + "=") + value)
    cmd = [_shell_word(values.substitute(w)) for w in [group.entrypoint, *group.args]]
    if prefix:
        cmd = ["env", *prefix, *cmd]
    lines.append(f'  anylaunch_replica {shlex.quote(group.role)} "$rid" {" ".join(cmd)}')
    lines.append("}")
    return lines


def _render_script(request: SlurmBatchRequest, mask_secrets: bool) -> str:
    groups = request.groups
    het = len(groups) > 1
    total = sum(g.num_replicas for g in groups)
    lines = [
        "#!/bin/bash",
        f"# anylaunch app {CONTROL_CHAR.sub('_', request.app_name)!r}: {len(groups)} role(s), "
        f"{total} replica(s)" + (", one het job component per role" if het else ""),
    ]
    for i, group in enumerate(groups):
        if i:
            lines.append("#SBATCH hetjob")
        opts = {**request.job_opts, **group.sbatch_opts} if i == 0 else group.sbatch_opts
        lines += _sbatch_lines(opts)
    log_dir = _shell_word(os.path.join(request.workdir, "slurm-")) + '"$SLURM_JOB_ID"'
    first_nodes = '"${SLURM_JOB_NODELIST_HET_GROUP_0:-$SLURM_JOB_NODELIST}"'
    lines += [
        "",
        f"export ANYLAUNCH_LOG_DIR={log_dir}",
        f'export {RANK0_ENV}="$(scontrol show hostnames {first_nodes} | head -n 1)"',
        "export PYTHONUNBUFFERED=1",
        "",
        _REPLICA_FN,
        "",
    ]
    srun: list[str] = []
    for i, group in enumerate(groups):
        lines += _role_function(i, group, mask_secrets)
        # srun's tasks read the role's function from a file in the (shared) log dir: passed
        # as one `bash -c` argument, large args or env would exceed the kernel's 128 KiB limit
        # on a single argument ("Argument list too long")
        role_file = f'"$ANYLAUNCH_LOG_DIR/role-{i}.sh"'
        lines += [
            'mkdir -p "$ANYLAUNCH_LOG_DIR"',
            f"{{ declare -f anylaunch_replica anylaunch_lines anylaunch_role_{i}; "
            f"echo anylaunch_role_{i}; }} > {role_file}",
            "",
        ]
        part = ["srun"] if i == 0 else [":"]
        if het:
            part.append(f"--het-group={i}")
        part += ["--kill-on-bad-exit=1", f"--chdir={_shell_word(group.chdir)}"]
        part += ["bash", role_file]
        srun.append(" ".join(part))
    retries = request.max_retries
    lines += [
        'rm -f "$ANYLAUNCH_LOG_DIR"/*.exit  # from an earlier attempt',
        "set +e",
        " \\\n  ".join(srun),
        "rc=$?",
        _FIRST_FAILURE,
    ]
    if retries > 0:
        lines += [
            f'if [ "$rc" -ne 0 ] && [ "${{SLURM_RESTART_COUNT:-0}}" -lt {retries} ]; then',
            f'  echo "anylaunch: exit code $rc; retry $((${{SLURM_RESTART_COUNT:-0}} + 1)) of '
            f'{retries}: requeueing job $SLURM_JOB_ID" >&2',
            '  scontrol requeue "$SLURM_JOB_ID"',
            "fi",
        ]
    lines.append('exit "$rc"')
    return "\n".join(lines) + "\n"


def format_request(request: SlurmBatchRequest) -> str:
    """The dryrun's readable form: the sbatch command and the script, secrets masked."""
    return heredoc(f"$ {shlex.join(request.sbatch_cmd())}", request.materialize(True))


def _image_dir(image: str, workdir: str) -> str:
    """Where a role's replicas run: its image when that is a path, else the job's workdir."""
    if image.startswith("/"):
        return os.path.normpath(image)
    if image.startswith("~"):
        return os.path.expanduser(image)
    if image in (".", "..") or image.startswith(("./", "../")):
        return os.path.normpath(os.path.join(workdir, image))
    return workdir  # "", or a container image name: Slurm runs on the nodes' filesystem
