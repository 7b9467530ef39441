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
within ``squeue_ttl`` seconds (see :mod:`anylaunch.schedulers.slurm.query`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from anylaunch.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    LogQuery,
    Scheduler,
    Stream,
)
from anylaunch.schedulers.common.capacity import CanRun, Capacity
from anylaunch.schedulers.common.job_metadata import job_metadata, owner_metadata
from anylaunch.schedulers.common.roles import CONTROL_CHAR
from anylaunch.schedulers.common.states import aggregate_replica_states
from anylaunch.schedulers.slurm.arrays import (
    SCRIPT_NAME,
    SlurmArrayRequest,
    array_records,
    array_request,
    describe_array,
    log_indices,
    retry_script,
    save_script,
    tagged,
)
from anylaunch.schedulers.slurm.capacity import asked, parse_test_only, run_test_only
from anylaunch.schedulers.slurm.limits import check_partition_limits, read_partitions
from anylaunch.schedulers.slurm.query import (
    SlurmCommandError,
    SlurmJob,
    SlurmQuery,
    app_state,
    expand_hostlist,
    failure_error,
    get_query,
    run_slurm,
    split_array_name,
)
from anylaunch.schedulers.slurm.request import (
    _MAIL_TYPES,
    _SHELL_NAME,
    _SLURM_NAMES,
    _TIME,
    BACKEND,
    SlurmBatchRequest,
    SlurmOpts,
    SlurmRoleGroup,
    _image_dir,
    _installed_slurm_version,
    _resource_opts,
    format_request,
    metadata_comment,
    parse_slurm_version,
)
from anylaunch.specs.api import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    ReplicaStatus,
    RetryPolicy,
    Role,
    RoleStatus,
)
from anylaunch.specs.errors import (
    BackendUnreachableError,
    InvalidRunConfigException,
    InvalidSpecError,
)
from anylaunch.specs.runopts import CfgVal, runopts
from anylaunch.workspace.dir_workspace import DirWorkspaceMixin

__all__ = [
    "SlurmScheduler",
    "create_scheduler",
]

log: logging.Logger = logging.getLogger(__name__)


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
    request_type = SlurmBatchRequest
    supports_arrays = True  # one sbatch --array (see anylaunch.schedulers.slurm.arrays)
    factory_kwargs = ("squeue_ttl", "slurm_version")

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
        for flag in ("mail_user", "mail_type"):
            value = getattr(opts, flag)
            if value:
                job_opts[flag.replace("_", "-")] = value
        # the owner too: Slurm cannot describe role env, where the reaper looks for it first
        job_opts["comment"] = metadata_comment(
            opts.comment, {**job_metadata(app, BACKEND), **owner_metadata(app)}
        )

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
                "job-name": f"{CONTROL_CHAR.sub('_', app.name)}:{role.name}",
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
        if app.array is not None:  # one role with one replica (AppDef checks it)
            if max_retries > 0:
                log.warning(
                    "an array app is not requeued (max_retries=%d is ignored): rerun its "
                    "failed indices with Runner.retry_failed",
                    max_retries,
                )
            request = array_request(request, app.roles[0], app.array)
        request.materialize()  # every value must render (e.g. no newline in a flag value)
        return AppDryRunInfo(request, format_request)

    def _check_capacity(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> Capacity:
        """``sbatch --test-only`` with the very script :meth:`schedule` would submit (no job
        is made): yes when Slurm would start it within ``START_MARGIN_S``, no when it would
        start later (its resources are busy) or refuses it, in Slurm's words, with the
        expected start (:mod:`~anylaunch.schedulers.slurm.capacity`). One call, plus one
        ``sbatch --version`` the first time the process writes a script for the cluster.

        Raises:
            BackendUnreachableError: the controller could not be asked.
        """
        versions_asked = _installed_slurm_version.cache_info().misses
        request: SlurmBatchRequest = self._own_request(self.submit_dryrun(app, cfg))
        version_calls = _installed_slurm_version.cache_info().misses - versions_asked
        try:
            proc = run_test_only(request.materialize())
        except SlurmCommandError as e:
            raise _unreachable(e) from e
        answer = parse_test_only(proc.returncode, proc.stderr, datetime.now().astimezone())
        reason = answer.reason
        if answer.can_run == CanRun.NO and answer.expected_start is None:
            reason += f" (the app asks {asked(app)})"
        return replace(answer, reason=reason, calls=answer.calls + version_calls)

    @staticmethod
    def _check_opts(opts: SlurmOpts) -> None:
        for name in ("partition", "account", "qos"):  # sbatch splits a value at a space
            value = getattr(opts, name)
            if value is not None and not _SLURM_NAMES.match(value):
                raise InvalidRunConfigException(
                    name,
                    value,
                    "must be one or more comma-separated names without spaces or control "
                    "characters",
                    "pass e.g. partition=debug or partition=debug,gpu"
                    if name == "partition"
                    else f"pass the {name}'s name, e.g. {name}=research",
                )
        if opts.job_dir is not None and (
            not opts.job_dir.strip() or CONTROL_CHAR.search(opts.job_dir)
        ):
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
            InvalidSpecError: the job asks for more CPUs per replica than the largest node
                of its partition has, or more CPUs than the partition holds (from one
                ``sinfo``; Slurm would accept the job and leave it pending forever).
        """
        request: SlurmBatchRequest = self._own_request(dryrun_info)
        partitions = read_partitions()
        if partitions is not None:  # the real cluster's limits, where dryrun saw none
            check_partition_limits(
                [(g.role, {**request.job_opts, **g.sbatch_opts}) for g in request.groups],
                partitions,
            )
        if request.create_workdir:
            os.makedirs(request.workdir, exist_ok=True)
        job_id = _sbatch(request.sbatch_cmd(), request.materialize())
        self._submitted[job_id] = time.monotonic()
        self._workdirs[job_id] = request.workdir
        if isinstance(request, SlurmArrayRequest):
            save_script(request, job_id)
        return job_id

    def _retry_indices(self, app_id: str, indices: Sequence[int]) -> str:
        """One new ``sbatch`` of the array's script with ``--array=<indices>``."""
        jobs = self._records(str(app_id))
        if not jobs:
            raise InvalidSpecError(
                "app_id", app_id, "is not known to Slurm", "retry an array that Slurm still knows"
            )
        workdir = next((j.workdir for j in jobs if j.workdir), self._workdirs.get(app_id, ""))
        script = retry_script(str(app_id), jobs, workdir, indices)
        job_id = _sbatch(["sbatch", "--parsable"], script)
        self._submitted[job_id] = time.monotonic()
        self._workdirs[job_id] = workdir
        log_dir = os.path.join(workdir, f"slurm-{job_id}")
        os.makedirs(log_dir, exist_ok=True)
        fd = os.open(os.path.join(log_dir, SCRIPT_NAME), os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(script)
        return job_id

    # --- queries --------------------------------------------------------------------------

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """The app's state, restarts and per-role replica states; None if Slurm forgot it."""
        return self.describe_many([app_id])[app_id]

    def describe_many(self, app_ids: Sequence[str]) -> dict[str, DescribeAppResponse | None]:
        """Describes many apps with one controller query (plus one sacct for old jobs).

        Raises:
            BackendUnreachableError: the controller could not be asked (its error quoted).
        """
        ids = [str(a) for a in app_ids]
        try:
            records = self.query.jobs(ids, self._submitted)
        except SlurmCommandError as e:
            raise _unreachable(e) from e
        return {
            app_id: _describe(app_id, jobs) if jobs else None for app_id, jobs in records.items()
        }

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """This user's jobs that the controller knows (``cfg`` is ignored)."""
        try:
            snapshot = self.query.snapshot()
        except SlurmCommandError as e:
            raise _unreachable(e) from e
        uid = os.getuid()
        found = []
        for app_id, jobs in snapshot.items():
            if jobs[0].user_id not in (None, uid):
                continue
            meta = array_records(jobs)
            if meta is not None:
                state = describe_array(app_id, jobs, meta).state
            else:
                state = _app_state(jobs)
            name = split_array_name((tagged(jobs) or jobs[0]).name)[0]
            name = name.rsplit(":", 1)[0] if ":" in name else name
            found.append(self._list_entry(app_id, state, name, self.session_name))
        return sorted(found, key=lambda r: int(r.app_id) if r.app_id.isdigit() else 0)

    # --- control --------------------------------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        run_slurm(["scancel", app_id], timeout=60)

    # --- logs -----------------------------------------------------------------------------

    def _records(self, app_id: str) -> Sequence[SlurmJob] | None:
        try:
            return self.query.jobs([app_id], self._submitted).get(app_id)
        except SlurmCommandError as e:
            raise _unreachable(e) from e

    def _log_replicas(self, app_id: str) -> dict[str, dict[int, Any] | None] | None:
        jobs = self._records(str(app_id))
        if not jobs:
            return None
        workdir = jobs[0].workdir or self._workdirs.get(str(app_id), "")
        first = tagged(jobs)
        if first is not None:
            role = _role_of(first)
            return {role: {i: workdir for i in log_indices(jobs)}}
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
        jobs = self._records(str(app_id)) or []
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
        from anylaunch.schedulers.common.tail import follow, iter_lines

        def is_done() -> bool:
            desc = self.describe(app_id)
            return desc is None or desc.state.is_terminal()

        chunks = follow(path, 0, is_done if should_tail else None, check_every=1.0)
        for _, raw in iter_lines(chunks):
            yield raw.decode("utf-8", "replace")


def _role_of(job: SlurmJob) -> str:
    name = split_array_name(job.name)[0]
    return name.rsplit(":", 1)[1] if ":" in name else name


def _app_state(jobs: Sequence[SlurmJob]) -> AppState:
    """The app's state from its components' states (one component per role).

    Backend policy: the app ends only when every component ended, since the batch script (in
    the first component) may still requeue the job after a replica failed; until then the
    components still going decide. The states are then added up by the shared rule
    (:func:`aggregate_replica_states`): e.g. a failure wins over a cancel.

    >>> def jobs(*states: str) -> list[SlurmJob]:
    ...     return [SlurmJob(str(i), "1", i, f"a:r{i}", s) for i, s in enumerate(states)]
    >>> _app_state(jobs("FAILED", "RUNNING")).name  # the script may still requeue
    'RUNNING'
    >>> _app_state(jobs("UNKNOWN", "RUNNING")).name, _app_state(jobs("FAILED", "CANCELLED")).name
    ('RUNNING', 'FAILED')
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


def _unreachable(error: SlurmCommandError) -> BackendUnreachableError:
    """The controller could not be asked: the command's own words, and how to check."""
    problem, _, fix = str(error).partition(". Fix: ")
    return BackendUnreachableError(
        "slurm",
        problem,
        fix
        or "check that slurmctld is up (`scontrol ping`) and that SLURM_CONF points at "
        "the cluster's slurm.conf",
    )


def _describe(app_id: str, jobs: Sequence[SlurmJob]) -> DescribeAppResponse:
    meta = array_records(jobs)
    if meta is not None:
        return describe_array(app_id, jobs, meta)
    state = _app_state(jobs)
    msg = NONE
    error = NONE
    if state in (AppState.FAILED, AppState.CANCELLED, AppState.PENDING, AppState.UNKNOWN):
        culprit = next((j for j in jobs if j.app_state == state), jobs[0])
        if state == AppState.FAILED:  # a lost node or a preemption says so (its category)
            error = failure_error(culprit)
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
        structured_error_msg=error,
        ui_url=f"file://{jobs[0].workdir}" if jobs[0].workdir else None,
        metadata={
            "app_name": jobs[0].name.rsplit(":", 1)[0],
            "slurm_state": ",".join(j.state for j in jobs),
            "source": jobs[0].source,
            "workdir": jobs[0].workdir,
            "log_dir": os.path.join(jobs[0].workdir, f"slurm-{app_id}") if jobs[0].workdir else "",
            **jobs[0].metadata,
        },
        roles_statuses=statuses,
        roles=roles,
    )


def create_scheduler(session_name: str, **kwargs: Any) -> SlurmScheduler:
    """Creates the ``slurm`` scheduler (the registry's factory; see ``factory_kwargs``).

    >>> create_scheduler("demo").backend
    'slurm'
    """
    return SlurmScheduler.from_kwargs(session_name, kwargs)


def _sbatch(cmd: list[str], script: str) -> str:
    """Submits ``script`` with ``cmd`` (an ``sbatch --parsable`` line); returns the job id."""
    out = run_slurm(cmd, timeout=120, stdin=script)
    job_id = out.strip().split(";", 1)[0]
    if not job_id.isdigit():
        raise SlurmCommandError(
            f"sbatch --parsable printed {out.strip()!r} instead of a job id. Fix: check the "
            "cluster's job_submit plugins and sbatch defaults (SBATCH_* env vars)"
        )
    return job_id
