"""The ``lsf`` scheduler: every replica is an IBM Spectrum LSF job submitted with ``bsub``.

Each replica of each role becomes one job (``bsub -J {app_id}-{role}-{replica}``) whose job
script reaches ``bsub`` on stdin, so no argument is ever interpreted by a shell other than the
quoted script itself. Its job description (``-Jd``) carries the app id, role, replica index,
job count and session, so any process can find the app's jobs with one
``bjobs -a -o ... -json -Jd 'anylaunch app={app_id} *'`` call: describe, list, logs and cancel
keep no local state.

Requests: ``-n`` for ``Resource.cpu``, ``-R "span[hosts=1] rusage[mem={memMB}MB/job]"`` (the
unit is explicit: a bare number means ``LSF_UNIT_FOR_LIMITS``, KB by default), ``-gpu
"num={gpu}"``, ``-q``/``-P`` from the run options. The rank-0 host: the first role's replica 0
writes its host name to ``{jobdir}/{app_id}/rank0_host`` and every other job (submitted with
``-w 'started("{rank 0 job}")'``) reads it into ``$ANYLAUNCH_RANK0_HOST``. ``jobdir`` must
therefore be on a filesystem shared by the submission and execution hosts, as on any HPC
cluster; the replicas' logs are written there too, as
``{jobdir}/{app_id}/{role}/{replica}/{stdout,stderr,combined}.log`` (LSF's own job report goes
to ``lsf.out``/``lsf.err`` next to them).

Images: an empty image or a path (``/...``, ``./...``, ``~...``, ``.``) is a directory on the
shared filesystem that the job runs in; anything else is a container image run with
``docker run`` on the execution host (mounts, ports, ``--shm-size``, ``--gpus``).

A replica that fails (or is killed) fails the app: the first ``describe`` that sees it kills
the app's remaining jobs (LSF does not link separate jobs), so nothing keeps running. POSIX
``sh``, ``mkfifo``, ``mktemp``, ``tee`` and ``awk`` must exist on the execution hosts.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from anylaunch.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    LogQuery,
    Scheduler,
    Stream,
)
from anylaunch.schedulers.common.app_ids import is_valid_app_id
from anylaunch.schedulers.common.capacity import Capacity
from anylaunch.schedulers.common.states import role_statuses
from anylaunch.schedulers.common.tail import follow, iter_lines
from anylaunch.schedulers.lsf.arrays import (
    REQUEST_FILE,
    describe_array,
    retry_request,
    save_request,
)
from anylaunch.schedulers.lsf.capacity import BHOSTS_ARGS, lsf_capacity, parse_bhosts
from anylaunch.schedulers.lsf.jobs import (
    _build_request,
    _validate_opts,
)
from anylaunch.schedulers.lsf.names import (
    _DESCRIPTION_TAG,
    _FINISHED,
    _SUBMITTED,
    _SUSPENDED,
    BACKEND,
    BJOBS_FIELDS,
    COMMAND_TIMEOUT_S,
    LsfJob,
    LsfOpts,
    LsfRequest,
    LsfSchedulerError,
    LsfSubmitError,
    LsfUnreachableError,
    format_request,
)
from anylaunch.schedulers.lsf.state import (
    _latest,
    _Record,
    _record,
    app_state,
)
from anylaunch.specs.api import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    ReplicaStatus,
)
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.runopts import CfgVal, runopts

__all__ = [
    "LsfScheduler",
    "create_scheduler",
]

log: logging.Logger = logging.getLogger(__name__)


class LsfScheduler(Scheduler[Mapping[str, CfgVal]]):
    """Runs each replica as an LSF job; describes, lists, cancels and reads logs through
    ``bjobs``, ``bkill`` and the shared job directory.

    Args:
        session_name: goes into app handles (``lsf://{session_name}/{app_id}``)
    """

    log_timestamps = False  # LSF output files carry no timestamps
    request_type = LsfRequest
    supports_arrays = True  # one bsub -J "name[1-N]%K" (see anylaunch.schedulers.lsf.arrays)

    def __init__(self, session_name: str) -> None:
        super().__init__(BACKEND, session_name)

    # --- LSF commands ---------------------------------------------------------------------

    @staticmethod
    def _command(name: str) -> str:
        exe = shutil.which(name)
        if exe is None:
            raise LsfUnreachableError(
                "lsf",
                f"`{name}` was not found on PATH",
                "run on an LSF submission host, or source LSF's profile.lsf so that bsub, "
                "bjobs and bkill are on PATH",
            )
        return exe

    def _run(self, argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                argv,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
                stdin=None if stdin is not None else subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as e:
            raise LsfUnreachableError(
                "lsf",
                f"`{shlex.join(argv[:1] + argv[1:3])} ...` did not answer within "
                f"{COMMAND_TIMEOUT_S:.0f}s",
                "check that LSF's mbatchd is reachable (`lsid`)",
            ) from e
        except OSError as e:
            raise LsfUnreachableError(
                "lsf", f"could not run {argv[0]}: {e}", "check the LSF installation (`lsid`)"
            ) from e

    def _bjobs(self, description_pattern: str) -> list[_Record]:
        """The jobs (finished ones too) whose description matches ``description_pattern``."""
        argv = [
            self._command("bjobs"),
            "-a",
            "-o",
            BJOBS_FIELDS,
            "-json",
            "-Jd",
            description_pattern,
        ]
        proc = self._run(argv)
        out = proc.stdout.strip()
        if out.startswith("{"):
            import json  # only needed here: keeps the module's import cheap

            try:
                data = json.loads(out)
            except ValueError as e:
                raise LsfSchedulerError(f"bjobs printed invalid JSON ({e}): {out[:500]}") from e
            raw = data.get("RECORDS") if isinstance(data, dict) else None
            if not isinstance(raw, list):
                raise LsfSchedulerError(f"bjobs printed JSON without RECORDS: {out[:500]}")
            records = [_record(r) for r in raw if isinstance(r, dict) and "ERROR" not in r]
            return [r for r in records if r is not None]
        err = proc.stderr.strip()
        if (
            "No job found" in err
            or "No unfinished job found" in err
            or (proc.returncode == 0 and not out)
        ):
            return []
        raise LsfSchedulerError(
            f"`{shlex.join(argv)}` failed (exit {proc.returncode}): {err or out}. "
            "Fix: check that LSF is reachable (`lsid`, `bjobs`)"
        )

    def _app_records(self, app_id: str) -> list[_Record]:
        return [r for r in self._bjobs(f"{_DESCRIPTION_TAG} app={app_id} *") if r.app_id == app_id]

    def _all_records(self) -> dict[str, list[_Record]]:
        by_app: dict[str, list[_Record]] = {}
        for rec in self._bjobs(f"{_DESCRIPTION_TAG} app=*"):
            by_app.setdefault(rec.app_id, []).append(rec)
        return by_app

    def _bkill(self, job_ids: Sequence[str]) -> None:
        """Kills jobs; a job that already finished (or is gone) is not an error."""
        if not job_ids:
            return
        argv = [self._command("bkill"), *job_ids]
        proc = self._run(argv)
        if proc.returncode == 0:
            return
        problems = [
            line
            for line in proc.stderr.splitlines()
            if line.strip()
            and "already finished" not in line
            and "No matching job found" not in line
        ]
        if problems:
            raise LsfSchedulerError(
                f"`{shlex.join(argv)}` failed (exit {proc.returncode}): {' '.join(problems)}"
            )

    # --- dryrun and schedule --------------------------------------------------------------

    def _run_opts(self) -> runopts:
        return LsfOpts.as_runopts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Roles without resources are fine: the job then takes LSF's defaults (one slot)."""

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        opts = LsfOpts.from_cfg(cfg)
        _validate_opts(opts)
        return AppDryRunInfo(_build_request(app, opts, self.session_name), format_request)

    def _check_capacity(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> Capacity:
        """Whether every replica's job finds ``-n cpu`` slots free on one open host, from
        one ``bhosts -w`` (:mod:`~anylaunch.schedulers.lsf.capacity`); an array by one
        element. The queue's host list is not consulted: every host counts.

        Raises:
            LsfUnreachableError: bhosts is missing or LSF did not answer.
        """
        argv = [self._command("bhosts"), *BHOSTS_ARGS]
        proc = self._run(argv)
        if proc.returncode != 0:
            raise LsfUnreachableError(
                "lsf",
                f"`{shlex.join(argv)}` failed (exit {proc.returncode}): "
                f"{(proc.stderr.strip() or proc.stdout.strip())[:500]}",
                "check that LSF is reachable (`lsid`, `bhosts`)",
            )
        hosts, other = parse_bhosts(proc.stdout)
        return lsf_capacity(app, hosts, other)

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Submits every job (rank 0 first) and returns the app id.

        All or nothing: when a bsub fails, the jobs already submitted are killed before the
        error is raised.

        Raises:
            LsfSubmitError: a bsub failed (the message quotes LSF's answer); the app was rolled
                back.
            LsfSchedulerError: the request was already scheduled, or LSF is unreachable.
        """
        request: LsfRequest = self._own_request(dryrun_info)
        bsub = self._command("bsub")
        if self._app_records(request.app_id):
            raise LsfSchedulerError(
                f"app {request.app_id} was already scheduled. Fix: dry-run the app again to get "
                "a new app id"
            )
        for job in request.jobs:
            os.makedirs(job.log_dir, exist_ok=True)
            dirs = [os.path.join(job.log_dir, str(i)) for i in job.indices] or [job.log_dir]
            for log_dir in dirs:
                os.makedirs(log_dir, exist_ok=True)
                for stream in Stream:  # empty logs up front: log_iter works from the start
                    with open(os.path.join(log_dir, f"{stream.value}.log"), "ab"):
                        pass
        if request.jobs and request.jobs[0].indices:
            save_request(request)
        submitted: list[str] = []
        try:
            failure = self._submit_jobs(bsub, request.jobs, submitted)
        except BaseException:  # interrupted (e.g. Ctrl-C): never leave half an app running
            self._rollback(request.app_id, submitted)
            raise
        if failure is not None:
            i, problem = failure
            job = request.jobs[i]
            rollback = self._rollback(request.app_id, submitted)
            raise LsfSubmitError(
                f"submitting app {request.app_id} failed at job {i + 1} of "
                f"{len(request.jobs)} ({job.name}, role {job.role} replica {job.replica_id}): "
                f"{problem}. {rollback} Fix: correct what LSF rejected (see the bsub commands "
                "with --dryrun) and run the app again"
            )
        return request.app_id

    def _submit_jobs(
        self, bsub: str, jobs: Sequence[LsfJob], submitted: list[str]
    ) -> tuple[int, str] | None:
        """Runs one bsub per job in order, appending each job id to ``submitted``; stops at
        the first failure and returns its index and LSF's answer."""
        for i, job in enumerate(jobs):
            try:
                proc = self._run([bsub, *job.options], stdin=job.script)
            except LsfSchedulerError as e:
                return i, str(e)
            match = _SUBMITTED.search(proc.stdout)
            if proc.returncode != 0 or match is None:
                answer = (proc.stderr.strip() or proc.stdout.strip() or "(no output)")[-2000:]
                return i, f"bsub exited with {proc.returncode}: {answer}"
            submitted.append(match.group(1))
        return None

    def _rollback(self, app_id: str, submitted: list[str]) -> str:
        """Kills the app's submitted jobs; returns what happened, for the error message."""
        ids = list(submitted)
        try:  # a bsub that timed out may still have submitted its job: look the app up
            ids += [r.job_id for r in self._app_records(app_id) if r.job_id not in ids]
        except LsfSchedulerError as e:
            log.warning("could not look up the jobs of %s to roll back: %s", app_id, e)
        if not ids:
            return "No job of the app had been submitted."
        try:
            self._bkill(ids)
        except LsfSchedulerError as e:
            return (
                f"Rolling back FAILED: the jobs {', '.join(ids)} may still run ({e}); "
                f"kill them with `bkill {' '.join(ids)}`."
            )
        return f"The {len(ids)} job(s) already submitted were killed ({', '.join(ids)})."

    # --- queries --------------------------------------------------------------------------

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """The app's state and per-replica statuses from one ``bjobs`` call; None if LSF has
        no job of the app (never submitted, or forgotten after CLEAN_PERIOD).

        A failed or killed replica fails (or cancels) the app and this kills its other jobs.
        """
        if not is_valid_app_id(app_id):
            return None
        return self._describe(app_id, self._app_records(app_id))

    def describe_many(self, app_ids: Sequence[str]) -> dict[str, DescribeAppResponse | None]:
        """Describes several apps with a single ``bjobs`` call."""
        if len(app_ids) <= 1:
            return {app_id: self.describe(app_id) for app_id in app_ids}
        by_app = self._all_records()
        return {app_id: self._describe(app_id, by_app.get(app_id, [])) for app_id in app_ids}

    def _describe(self, app_id: str, records: list[_Record]) -> DescribeAppResponse | None:
        if not records:
            return None
        jobs = _latest(records)
        if jobs[0].array:  # one failed index does not stop the others
            return describe_array(app_id, jobs)
        state = app_state(r.state for r in jobs)
        live = [r for r in jobs if r.stat not in _FINISHED]
        if state in (AppState.FAILED, AppState.CANCELLED) and live:
            try:  # LSF does not link the jobs: stop the others so nothing keeps running
                self._bkill([r.job_id for r in live])
            except LsfSchedulerError as e:
                log.warning("could not kill the remaining jobs of %s: %s", app_id, e)
        replicas = [
            ReplicaStatus(
                id=rec.replica_id,
                state=rec.state,
                role=rec.role,
                hostname=rec.host,
                structured_error_msg=(
                    f"exit code {rec.exit_code or '?'}"
                    + (f" ({rec.exit_reason})" if rec.exit_reason else "")
                    if rec.state == AppState.FAILED
                    else NONE
                ),
            )
            for rec in sorted(jobs, key=lambda r: (int(r.job_id), r.replica_id))  # rank 0 first
        ]
        expected = max(r.jobs for r in jobs)
        app_dir = os.path.dirname(os.path.dirname(jobs[0].log_dir)) if jobs[0].log_dir else ""
        return DescribeAppResponse(
            app_id=app_id,
            state=state,
            num_restarts=0,
            msg=_message(state, jobs, expected) or NONE,
            structured_error_msg=NONE,
            metadata={
                "app_dir": app_dir,
                "lsf_jobs": " ".join(f"{r.role}/{r.replica_id}={r.job_id}" for r in jobs),
                **jobs[0].metadata,
            },
            roles_statuses=role_statuses(replicas),
        )

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """Every anylaunch app that LSF still knows, oldest first (``cfg`` is ignored)."""
        apps = []
        for app_id, records in self._all_records().items():
            jobs = _latest(records)
            if jobs[0].array:
                state = describe_array(app_id, jobs).state
            else:
                state = app_state(r.state for r in jobs)
            entry = self._list_entry(app_id, state, jobs[0].app_name, jobs[0].session)
            apps.append((min(int(r.job_id) for r in jobs), entry))
        return self._oldest_first(apps)

    # --- control --------------------------------------------------------------------------

    def cancel(self, app_id: str) -> None:
        """Kills every job of the app that has not finished (``bkill``); returns at once.

        A no-op for an unknown or finished app. The app ends CANCELLED once LSF has ended
        the jobs (SIGINT and SIGTERM, then SIGKILL after JOB_TERMINATE_INTERVAL).
        """
        if not is_valid_app_id(app_id):
            return
        live = [r.job_id for r in _latest(self._app_records(app_id)) if r.stat not in _FINISHED]
        self._bkill(list(dict.fromkeys(live)))  # an array's job id once: bkill ends every element

    def _retry_indices(self, app_id: str, indices: Sequence[int]) -> str:
        """One new ``bsub`` of the array's job script, with only the elements ``[i+1]``."""
        records = _latest(self._app_records(app_id)) if is_valid_app_id(app_id) else []
        if not records or not records[0].array:
            raise InvalidSpecError(
                "app_id", app_id, "is not an array app LSF knows", "retry an array app"
            )
        app_dir = os.path.dirname(os.path.dirname(records[0].output_file))
        request = retry_request(
            os.path.join(app_dir, REQUEST_FILE), records[0].app_name, self.session_name, indices
        )
        return self.schedule(AppDryRunInfo(request, format_request))

    def _cancel_existing(self, app_id: str) -> None:
        self.cancel(app_id)

    # --- logs -----------------------------------------------------------------------------

    def _log_replicas(self, app_id: str) -> dict[str, dict[int, Any]] | None:
        return self._group_replicas(
            _latest(self._app_records(app_id)) if is_valid_app_id(app_id) else []
        )

    def _replica_log_lines(
        self, app_id: str, role_name: str, k: int, replica: Any, query: LogQuery
    ) -> Iterable[str]:
        """Lines of one replica, read from the job directory (which must be reachable from
        this host): stdout, stderr or both interleaved. With ``should_tail`` it follows the
        log until the app ended and the log is drained."""
        log_dir = replica.log_dir
        if not log_dir or not os.path.isdir(log_dir):
            raise InvalidSpecError(
                "jobdir",
                log_dir,
                f"the log directory of {role_name}/{k} is not visible on this host",
                "read the logs on a host that shares the job directory with the cluster",
            )
        path = os.path.join(log_dir, f"{query.stream.value}.log")
        return self._read_log(app_id, path, query.should_tail)

    def _read_log(self, app_id: str, path: str, should_tail: bool) -> Iterator[str]:
        last_check = [0.0, False]  # ask LSF at most once a second while following

        def is_done() -> bool:
            now = time.monotonic()
            if now - float(last_check[0]) >= 1.0:
                records = _latest(self._app_records(app_id))
                last_check[:] = [now, all(r.stat in _FINISHED for r in records)]
            return bool(last_check[1])

        chunks = follow(path, 0, is_done if should_tail else None, check_every=1.0)
        for _, raw in iter_lines(chunks):
            yield raw.decode("utf-8", "replace")


def _message(state: AppState, jobs: list[_Record], expected: int) -> str:
    """A one-line explanation of the app's state for people."""
    parts: list[str] = []
    failed = [r for r in jobs if r.state == AppState.FAILED]
    cancelled = [r for r in jobs if r.state == AppState.CANCELLED]
    if failed:
        parts += [
            f"replica {r.label} exited with code {r.exit_code or '?'}"
            + (f" ({r.exit_reason})" if r.exit_reason else "")
            + f"; its stderr is in {os.path.join(r.log_dir, 'stderr.log')}"
            for r in failed
        ]
    if cancelled:
        parts.append("killed: " + ", ".join(r.label for r in cancelled))
    if state in (AppState.FAILED, AppState.CANCELLED) and any(
        r.stat not in _FINISHED for r in jobs
    ):
        parts.append("the app's other jobs are being killed")
    for r in jobs:
        if r.stat in _SUSPENDED:
            parts.append(f"replica {r.label} is {_SUSPENDED[r.stat]}")
        elif r.stat == "UNKWN":
            parts.append(f"LSF lost contact with the host of replica {r.label} (UNKWN)")
        elif r.stat == "ZOMBI":
            parts.append(
                f"replica {r.label} was killed while its host was unreachable (ZOMBI); LSF "
                "ends it once the host answers"
            )
        elif r.stat in ("PEND", "PROV", "WAIT") and state == AppState.PENDING and r.pend_reason:
            parts.append(f"replica {r.label} is pending: {r.pend_reason}")
    if len(jobs) < expected:
        parts.append(f"LSF knows {len(jobs)} of the app's {expected} jobs")
    return "; ".join(parts)


def create_scheduler(session_name: str, **kwargs: Any) -> LsfScheduler:
    """Creates the ``lsf`` scheduler (the registry's factory; see ``factory_kwargs``).

    >>> create_scheduler("demo").backend
    'lsf'
    """
    return LsfScheduler.from_kwargs(session_name, kwargs)
