"""The ``slurm`` scheduler: an app becomes one ``sbatch`` script on a Slurm cluster.

Each role is one component of a heterogeneous job (``#SBATCH hetjob`` between them; a
single-role app is a plain job) with one task per replica, so the replicas of a role may share
a node while different roles land on different nodes. One ``srun`` starts every replica; each
replica runs its own command line, with ``${replica_id}`` and ``${app_id}`` (the Slurm job id)
expanded in the replica, and ``$ANYLAUNCH_RANK0_HOST`` naming the first node of the first role.
Arguments and env values are single-quoted into the script, so they reach the program byte
for byte.

Each replica's stdout and stderr are copied into ``{workdir}/slurm-{job id}/{role}-{k}.out``
and ``.err``, and both, interleaved line by line, into ``.log`` (what ``log_iter`` reads by
default); the batch script's own output is ``{workdir}/slurm-{job id}.out``. ``workdir`` is
``job_dir`` when given, else the directory the app was dry-run in; the compute nodes must see
it (a shared filesystem). When a replica fails, srun stops the others (``--kill-on-bad-exit``)
and the app fails with the exit code of the replica that failed first.

``max_retries`` > 0 submits with ``--requeue``: when a replica fails, the batch script
requeues the job (``scontrol requeue``) until the retries are used up. Slurm starts a requeued
job again after its credential lifetime (``AuthInfo=cred_expire``, 120 s by default) and the
next scheduling pass.

States come from ``squeue --json`` (``scontrol show job`` on Slurm versions without it) and,
for jobs the controller has forgotten, from ``sacct``; one snapshot serves every app described
within ``squeue_ttl`` seconds (see :mod:`anylaunch.schedulers.slurm_query`).
"""

from __future__ import annotations

import logging
import math
import os
import re
import shlex
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from anylaunch.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    LogQuery,
    Scheduler,
    Stream,
)
from anylaunch.schedulers.shared import (
    RANK0_ENV,
    aggregate_replica_states,
    check_no_nul,
    is_secret_env_name,
)
from anylaunch.schedulers.slurm_query import (
    SlurmCommandError,
    SlurmJob,
    SlurmQuery,
    app_state,
    expand_hostlist,
    get_query,
    run_slurm,
)
from anylaunch.specs.api import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    ReplicaStatus,
    Resource,
    RetryPolicy,
    Role,
    RoleStatus,
    macros,
    make_app_handle,
)
from anylaunch.specs.errors import (
    InvalidRunConfigException,
    InvalidSpecError,
)
from anylaunch.specs.runopts import CfgVal, runopts
from anylaunch.specs.structured_opts import StructuredOpts
from anylaunch.workspace.dir_workspace import DirWorkspaceMixin

__all__ = [
    "RANK0_ENV",
    "SlurmBatchRequest",
    "SlurmCommandError",
    "SlurmOpts",
    "SlurmRoleGroup",
    "SlurmScheduler",
    "create_scheduler",
    "gpu_opts",
    "parse_slurm_version",
]

log: logging.Logger = logging.getLogger(__name__)

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
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


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
        f"# anylaunch app {_CONTROL.sub('_', request.app_name)!r}: {len(groups)} role(s), "
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
        lines.append("")
        functions = f'"$(declare -f anylaunch_replica anylaunch_lines anylaunch_role_{i}); anylaunch_role_{i}"'
        part = ["srun"] if i == 0 else [":"]
        if het:
            part.append(f"--het-group={i}")
        part += ["--kill-on-bad-exit=1", f"--chdir={_shell_word(group.chdir)}"]
        part += ["bash", "-c", functions]
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
    return f"$ {shlex.join(request.sbatch_cmd())} <<'EOF'\n{request.materialize(True)}EOF"


def _image_dir(image: str, workdir: str) -> str:
    """Where a role's replicas run: its image when that is a path, else the job's workdir."""
    if image.startswith("/"):
        return os.path.normpath(image)
    if image.startswith("~"):
        return os.path.expanduser(image)
    if image in (".", "..") or image.startswith(("./", "../")):
        return os.path.normpath(os.path.join(workdir, image))
    return workdir  # "", or a container image name: Slurm runs on the nodes' filesystem


class SlurmScheduler(DirWorkspaceMixin, Scheduler[Mapping[str, CfgVal]]):
    """Runs apps as (heterogeneous) Slurm batch jobs.

    Args:
        session_name: goes into app handles (``slurm://{session_name}/{job id}``)
        squeue_ttl: seconds one controller snapshot serves describe calls (shared by every
            scheduler of the process that uses the same ``$SLURM_CONF`` and ttl)
        slurm_version: pin the Slurm version the script is written for (e.g. ``"18.08"``);
            by default ``sbatch --version`` is asked (a current version if it is missing)
    """

    log_timestamps = False  # Slurm's log files carry no timestamps

    def __init__(
        self, session_name: str, squeue_ttl: float = 2.0, slurm_version: str | None = None
    ) -> None:
        super().__init__(BACKEND, session_name)
        if isinstance(squeue_ttl, bool) or not isinstance(squeue_ttl, (int, float)):
            raise InvalidSpecError(
                "squeue_ttl", squeue_ttl, "must be a number of seconds >= 0", "e.g. 2"
            )
        if squeue_ttl < 0:
            raise InvalidSpecError("squeue_ttl", squeue_ttl, "must be >= 0", "e.g. 2")
        self.squeue_ttl = float(squeue_ttl)
        self._version: tuple[int, int] | None = None
        if slurm_version is not None:
            parsed = parse_slurm_version(str(slurm_version))
            if parsed is None:
                raise InvalidSpecError(
                    "slurm_version", slurm_version, "is not a Slurm version", "e.g. '22.05'"
                )
            self._version = parsed
        self._pinned = slurm_version is not None
        # what this process submitted: when (to refresh snapshots taken before) and where
        # (accounting may not know a short job's workdir for a minute)
        self._submitted: dict[str, float] = {}
        self._workdirs: dict[str, str] = {}

    @property
    def query(self) -> SlurmQuery:
        """The shared job-state reader of the cluster ``$SLURM_CONF`` points at."""
        return get_query(self.squeue_ttl)

    def slurm_version(self) -> tuple[int, int] | None:
        """The Slurm version scripts are written for (None: unknown, assumed current)."""
        if self._pinned:
            return self._version
        return _installed_slurm_version(os.environ.get("SLURM_CONF", ""))

    # --- dryrun and schedule --------------------------------------------------------------

    def _run_opts(self) -> runopts:
        return SlurmOpts.as_runopts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        super()._validate(app, scheduler, cfg)
        for role in app.roles:
            if role.mounts:
                raise InvalidSpecError(
                    f"Role[{role.name}].mounts",
                    role.mounts,
                    "Slurm jobs run on the cluster's shared filesystem and cannot mount",
                    "drop the mounts and use paths the compute nodes see",
                )

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        opts = SlurmOpts.from_cfg(cfg)
        self._check_opts(opts)
        workdir = os.path.abspath(os.path.expanduser(opts.job_dir or os.getcwd()))
        version = self.slurm_version()

        common: dict[str, str | None] = {}
        for flag in ("partition", "time", "account", "qos", "constraint"):
            value = getattr(opts, flag)
            if value:
                common[flag] = value
        if opts.exclusive:
            common["exclusive"] = None
        for extra in opts.sbatch_args or []:  # the escape hatch: wins over the options above
            if extra.startswith("--"):
                name, eq, value = extra[2:].partition("=")
                common[name] = value if eq else None
            else:  # a short flag, kept whole
                common[extra] = None

        max_retries = max(role.max_retries for role in app.roles)
        job_opts: dict[str, str | None] = {
            "chdir": workdir,
            # %% is a literal % in sbatch's file name patterns
            "output": os.path.join(workdir.replace("%", "%%"), "slurm-%j.out"),
            "open-mode": "append",
            "requeue" if max_retries > 0 else "no-requeue": None,
        }
        for flag in ("comment", "mail_user", "mail_type"):
            value = getattr(opts, flag)
            if value:
                job_opts[flag.replace("_", "-")] = value

        groups: list[SlurmRoleGroup] = []
        offset = 0
        for role in app.roles:
            if role.max_retries > 0 and role.retry_policy != RetryPolicy.APPLICATION:
                log.warning(
                    "role %s: Slurm restarts the whole app on a retry (retry_policy %s is "
                    "treated as APPLICATION)",
                    role.name,
                    role.retry_policy,
                )
            check_no_nul(f"Role[{role.name}].entrypoint", role.entrypoint)
            for j, arg in enumerate(role.args):
                check_no_nul(f"Role[{role.name}].args[{j}]", arg)
            for key, value in role.env.items():
                check_no_nul(
                    f"Role[{role.name}].env[{key!r}]", value, secret=is_secret_env_name(key)
                )
            if "=" in role.entrypoint and any(not _SHELL_NAME.match(k) for k in role.env):
                raise InvalidSpecError(
                    f"Role[{role.name}].entrypoint",
                    role.entrypoint,
                    "contains '=' while an env var name is not a shell name (env(1) would "
                    "read the entrypoint as a variable)",
                    "use a path without '=' or env var names like MY_VAR",
                )
            if role.resource.devices:
                log.warning(
                    "role %s: Slurm does not get Resource.devices %s; request them with "
                    "sbatch_args (e.g. --gres=NAME:COUNT)",
                    role.name,
                    role.resource.devices,
                )
            sbatch_opts: dict[str, str | None] = {
                # describe and log_iter read the role back from the component's job name
                "job-name": f"{_CONTROL.sub('_', app.name)}:{role.name}",
                "ntasks": str(role.num_replicas),
                **_resource_opts(role.resource, version),
                **common,
            }
            groups.append(
                SlurmRoleGroup(
                    role=role.name,
                    num_replicas=role.num_replicas,
                    rank_offset=offset,
                    sbatch_opts=sbatch_opts,
                    chdir=_image_dir(role.image, workdir),
                    entrypoint=role.entrypoint,
                    args=list(role.args),
                    env=dict(role.env),
                )
            )
            offset += role.num_replicas
        request = SlurmBatchRequest(
            app_name=app.name,
            workdir=workdir,
            job_opts=job_opts,
            groups=groups,
            max_retries=max_retries,
            create_workdir=bool(opts.job_dir),
        )
        request.materialize()  # every value must render (e.g. no newline in a flag value)
        return AppDryRunInfo(request, format_request)

    @staticmethod
    def _check_opts(opts: SlurmOpts) -> None:
        if opts.job_dir is not None and (not opts.job_dir.strip() or _CONTROL.search(opts.job_dir)):
            raise InvalidRunConfigException(
                "job_dir",
                opts.job_dir,
                "must be a non-empty path without newlines or control characters",
                "pass e.g. /shared/jobs/run1",
            )
        if opts.time and not _TIME.match(opts.time.strip()):
            raise InvalidRunConfigException(
                "time",
                opts.time,
                "is not a Slurm time limit",
                "use minutes, [D-]HH:MM:SS or MM:SS, e.g. 30 or 1:30:00 or 2-00:00:00",
            )
        if opts.mail_type:
            bad = [t for t in opts.mail_type.upper().split(",") if t.strip() not in _MAIL_TYPES]
            if bad:
                raise InvalidRunConfigException(
                    "mail_type",
                    opts.mail_type,
                    f"unknown mail type(s) {', '.join(bad)}",
                    f"use a comma-separated list of {', '.join(sorted(_MAIL_TYPES))}",
                )
        for extra in opts.sbatch_args or []:
            if not extra.startswith("-") or "\n" in extra or "\r" in extra:
                raise InvalidRunConfigException(
                    "sbatch_args",
                    extra,
                    "each entry must be one sbatch flag on one line",
                    "pass flags like --nice=10 or --reservation=r1",
                )

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Submits the script with ``sbatch --parsable`` and returns the Slurm job id.

        Raises:
            SlurmCommandError: sbatch is missing or refused the job (its error is quoted).
        """
        request = dryrun_info.request
        if not isinstance(request, SlurmBatchRequest):
            raise InvalidSpecError(
                "dryrun_info.request",
                type(request).__name__,
                "is not a slurm request",
                "create it with the slurm scheduler's submit_dryrun",
            )
        if request.create_workdir:
            os.makedirs(request.workdir, exist_ok=True)
        out = run_slurm(request.sbatch_cmd(), timeout=120, stdin=request.materialize())
        job_id = out.strip().split(";", 1)[0]
        if not job_id.isdigit():
            raise SlurmCommandError(
                f"sbatch --parsable printed {out.strip()!r} instead of a job id. Fix: check the "
                "cluster's job_submit plugins and sbatch defaults (SBATCH_* env vars)"
            )
        self._submitted[job_id] = time.monotonic()
        self._workdirs[job_id] = request.workdir
        return job_id

    # --- queries --------------------------------------------------------------------------

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """The app's state, restarts and per-role replica states; None if Slurm forgot it."""
        return self.describe_many([app_id])[app_id]

    def describe_many(self, app_ids: Sequence[str]) -> dict[str, DescribeAppResponse | None]:
        """Describes many apps with one controller query (plus one sacct for old jobs).

        If the controller cannot be reached, every app is UNKNOWN (with the error as msg).
        """
        ids = [str(a) for a in app_ids]
        try:
            records = self.query.jobs(ids, self._submitted)
        except SlurmCommandError as e:
            return {
                app_id: DescribeAppResponse(app_id=app_id, state=AppState.UNKNOWN, msg=str(e))
                for app_id in ids
            }
        return {
            app_id: _describe(app_id, jobs) if jobs else None for app_id, jobs in records.items()
        }

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """This user's jobs that the controller knows (``cfg`` is ignored)."""
        snapshot = self.query.snapshot()
        uid = os.getuid()
        found = []
        for app_id, jobs in snapshot.items():
            if jobs[0].user_id not in (None, uid):
                continue
            name = jobs[0].name.rsplit(":", 1)[0] if ":" in jobs[0].name else jobs[0].name
            found.append(
                ListAppResponse(
                    app_id=app_id,
                    state=_app_state(jobs),
                    app_handle=make_app_handle(self.backend, self.session_name, app_id),
                    name=name,
                )
            )
        return sorted(found, key=lambda r: int(r.app_id) if r.app_id.isdigit() else 0)

    # --- control --------------------------------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        run_slurm(["scancel", app_id], timeout=60)

    # --- logs -----------------------------------------------------------------------------

    def _log_replicas(self, app_id: str) -> dict[str, dict[int, Any] | None] | None:
        jobs = self.query.jobs([str(app_id)], self._submitted).get(str(app_id))
        if not jobs:
            return None
        workdir = jobs[0].workdir or self._workdirs.get(str(app_id), "")
        replicas: dict[str, dict[int, Any] | None] = {}
        for job in jobs:
            n = job.num_tasks
            # Slurm may not report a role's task count yet: any replica index is then accepted
            replicas[_role_of(job)] = None if n is None else {k: workdir for k in range(n)}
        return replicas

    def _replica_log_lines(
        self, app_id: str, role_name: str, k: int, replica: Any, query: LogQuery
    ) -> Iterable[str]:
        """Lines of one replica's log file: combined (default), stdout or stderr. With
        ``should_tail`` it follows the log until the app ended and the log is drained."""
        jobs = self.query.jobs([str(app_id)], self._submitted).get(str(app_id)) or []
        workdir = replica or (jobs[0].workdir if jobs else "") or self._workdirs.get(str(app_id))
        if not workdir:
            raise SlurmCommandError(
                f"Slurm has not recorded where app {app_id} ran yet (its accounting record is "
                "incomplete), so its logs cannot be found. Fix: retry in a minute"
            )
        ext = {Stream.STDOUT: "out", Stream.STDERR: "err", Stream.COMBINED: "log"}[query.stream]
        path = os.path.join(workdir, f"slurm-{app_id}", f"{role_name}-{k}.{ext}")
        return self._read(str(app_id), path, query.should_tail)

    def _read(self, app_id: str, path: str, should_tail: bool) -> Iterator[str]:
        from anylaunch.schedulers.file_tail import follow, iter_lines

        def is_done() -> bool:
            desc = self.describe(app_id)
            return desc is None or desc.state.is_terminal()

        chunks = follow(path, 0, is_done if should_tail else None, check_every=1.0)
        for _, raw in iter_lines(chunks):
            yield raw.decode("utf-8", "replace")


def _role_of(job: SlurmJob) -> str:
    return job.name.rsplit(":", 1)[1] if ":" in job.name else job.name


def _app_state(jobs: Sequence[SlurmJob]) -> AppState:
    """The app's state from its components' states.

    The app ends only when every component ended (the batch script, in the first one, may
    still requeue the job): until then the components still going decide. Then the shared
    rule (:func:`aggregate_replica_states`): a failure wins over a cancel.
    """
    states = [job.app_state for job in jobs]
    going = [s for s in states if not s.is_terminal()]
    return aggregate_replica_states(going or states)


def _exit_text(job: SlurmJob) -> str:
    if job.signal:
        return f"killed by signal {job.signal}"
    if job.exit_code:
        return f"exit code {job.exit_code}"
    return ""


def _describe(app_id: str, jobs: Sequence[SlurmJob]) -> DescribeAppResponse:
    state = _app_state(jobs)
    msg = NONE
    if state in (AppState.FAILED, AppState.CANCELLED, AppState.PENDING, AppState.UNKNOWN):
        culprit = next((j for j in jobs if j.app_state == state), jobs[0])
        details = [culprit.state]
        if culprit.reason and culprit.reason != "None":
            details.append(f"reason: {culprit.reason}")
        if state != AppState.PENDING and _exit_text(culprit):
            details.append(_exit_text(culprit))
        msg = f"{_role_of(culprit)}: " + ", ".join(details)
    statuses = []
    roles = []
    for job in jobs:
        role = _role_of(job)
        hosts = expand_hostlist(job.nodes)
        n = job.num_tasks or 1
        replicas = [
            ReplicaStatus(
                id=i,
                state=app_state(job.state),
                role=role,
                hostname=hosts[i] if len(hosts) == n else job.nodes,
            )
            for i in range(n)
        ]
        statuses.append(RoleStatus(role, replicas))
        roles.append(Role(name=role, image=job.workdir, num_replicas=n))
    restarts = jobs[0].restarts
    return DescribeAppResponse(
        app_id=app_id,
        state=state,
        num_restarts=restarts if restarts is not None else -1,
        msg=msg,
        ui_url=f"file://{jobs[0].workdir}" if jobs[0].workdir else None,
        metadata={
            "app_name": jobs[0].name.rsplit(":", 1)[0],
            "slurm_state": ",".join(j.state for j in jobs),
            "source": jobs[0].source,
            "workdir": jobs[0].workdir,
            "log_dir": os.path.join(jobs[0].workdir, f"slurm-{app_id}") if jobs[0].workdir else "",
        },
        roles_statuses=statuses,
        roles=roles,
    )


def create_scheduler(session_name: str, **kwargs: Any) -> SlurmScheduler:
    """Creates the ``slurm`` scheduler (the registry's factory).

    Accepts ``squeue_ttl`` and ``slurm_version``; other keyword arguments are ignored.

    >>> create_scheduler("demo").backend
    'slurm'
    """
    return SlurmScheduler(
        session_name,
        squeue_ttl=kwargs.get("squeue_ttl", 2.0),
        slurm_version=kwargs.get("slurm_version"),
    )
