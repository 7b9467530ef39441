"""The ``local_cwd`` scheduler: runs every replica as a local process, visible to any process.

Each app gets a directory under the state root (see :mod:`anylaunch.schedulers.local.state`)
and a small detached supervisor (:mod:`anylaunch.schedulers.local.supervisor`) that owns the
replicas, writes their logs and records every state transition on disk. Supervisors come ready
from a warm fork-server per state root (:mod:`anylaunch.schedulers.local.forkserver`), or are
started as a new interpreter when it cannot be used. Any process (a second
``anylaunch status``, an Airflow trigger, a retry of a crashed worker) can therefore describe,
stream logs from, cancel, list and delete an app by its id, even after the launching process
exited or was killed.

Replicas run from the current working directory, or from the role's ``image`` when that is an
existing directory, with macros substituted per replica and ``ANYLAUNCH_RANK0_HOST=localhost``.
Arguments reach the program byte for byte (no shell is involved). POSIX only.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from anylaunch.schedulers.api import (
    CANCEL_REQUESTED,
    DescribeAppResponse,
    ListAppResponse,
    LogQuery,
    Scheduler,
    backend_cfg,
)
from anylaunch.schedulers.common.app_ids import is_valid_app_id, make_app_id
from anylaunch.schedulers.common.capacity import Capacity
from anylaunch.schedulers.common.changes import ChangeFeed
from anylaunch.schedulers.common.job_metadata import job_metadata
from anylaunch.schedulers.common.roles import check_no_nul, role_from_record, role_record
from anylaunch.schedulers.common.states import aggregate_replica_states, role_statuses
from anylaunch.schedulers.common.tail import ChangeWaiter, follow, iter_lines
from anylaunch.schedulers.local import state as ls
from anylaunch.schedulers.local.arrays import array_record, describe_array, retry_app
from anylaunch.schedulers.local.capacity import local_capacity
from anylaunch.schedulers.local.request import (
    _SUPERVISOR_MODULE,
    BACKEND,
    DEFAULT_START_TIMEOUT_S,
    LocalAppRequest,
    LocalOpts,
    LocalRoleRequest,
    LocalSchedulerError,
    _replica_request,
    _visible_gpus,
    assign_gpus,
    check_creatable_dir,
    format_request,
)
from anylaunch.specs.api import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    ReplicaStatus,
)
from anylaunch.specs.arrays import resolve_index
from anylaunch.specs.errors import (
    InvalidRunConfigException,
    InvalidSpecError,
)
from anylaunch.specs.runopts import CfgVal, runopts

__all__ = [
    "LocalScheduler",
    "app_state",
    "create_scheduler",
]

log: logging.Logger = logging.getLogger(__name__)


def app_state(state: Mapping[str, Any]) -> AppState:
    """The state of an app from its state record (``state.json``, or SUBMITTED before it).

    The supervisor's own facts decide where it has them: SUBMITTED (no supervisor claimed the
    app yet) and a terminal state (its decision after retries, a cancel, its crash, or a
    take-over of an app whose supervisor is gone) are the app's state as recorded. While it
    runs the app, the replicas' states add up by the shared rule
    (:func:`~anylaunch.schedulers.common.states.aggregate_replica_states`), except that the app is
    not over before the supervisor says so: until it recorded the end, it is still stopping
    processes (or restarting them), and the app stays as recorded.

    >>> record = {"state": "PENDING", "replicas": [{"state": "RUNNING"}, {"state": "PENDING"}]}
    >>> app_state(record).name
    'RUNNING'
    >>> retrying = [{"state": "FAILED"}, {"state": "RUNNING"}]  # the failed one restarts
    >>> app_state({"state": "RUNNING", "replicas": retrying}).name
    'RUNNING'
    >>> app_state({"state": "CANCELLED", "replicas": [{"state": "SUCCEEDED"}]}).name
    'CANCELLED'
    """
    recorded = AppState[state["state"]]
    if recorded.is_terminal() or recorded == AppState.SUBMITTED:
        return recorded
    replicas = aggregate_replica_states(
        AppState[replica["state"]] for replica in state.get("replicas", [])
    )
    if replicas.is_terminal() or replicas == AppState.UNKNOWN:
        return recorded
    return replicas


class _TimeIndex:
    """Reader of a log's sidecar index: which time each byte offset was written at."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offsets: list[int] = []
        self.times: list[float] = []
        self._pos = 0
        self.refresh()

    def refresh(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._pos)
                data = f.read()
        except FileNotFoundError:
            return
        size = ls.INDEX_RECORD.size
        for i in range(len(data) // size):
            offset, ts = ls.INDEX_RECORD.unpack_from(data, i * size)
            self.offsets.append(offset)
            self.times.append(ts)
        self._pos += len(data) // size * size

    def start_offset(self, since: float) -> int:
        """The offset of the first chunk written at or after ``since`` (or of the last one)."""
        i = bisect.bisect_left(self.times, since)
        if i < len(self.offsets):
            return self.offsets[i]
        return self.offsets[-1] if self.offsets else 0

    def time_at(self, offset: int) -> float | None:
        i = bisect.bisect_right(self.offsets, offset) - 1
        return self.times[i] if i >= 0 else None


class LocalScheduler(Scheduler[Mapping[str, CfgVal]]):
    """Runs apps as local processes supervised by a detached per-app process.

    Args:
        session_name: goes into app handles (``local_cwd://{session_name}/{app_id}``)
        state_dir: root of the on-disk state (default: ``$ANYLAUNCH_LOCAL_STATE_DIR``, else
            ``${XDG_STATE_HOME:-~/.local/state}/anylaunch/local_cwd``, read at each call)
        start_timeout: seconds a launched app may stay without a supervisor record before it is
            reported FAILED (the launcher died while starting it)
    """

    request_type = LocalAppRequest
    factory_kwargs = ("state_dir", "start_timeout")
    #: an array runs under one app: its supervisor starts the next index as one ends
    supports_arrays = True

    def __init__(
        self,
        session_name: str,
        state_dir: str | os.PathLike[str] | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
    ) -> None:
        super().__init__(BACKEND, session_name)
        self._state_dir = state_dir
        if (
            isinstance(start_timeout, bool)
            or not isinstance(start_timeout, (int, float))
            or start_timeout <= 0
        ):
            raise InvalidSpecError(
                "start_timeout", start_timeout, "must be a positive number of seconds", "e.g. 30"
            )
        self.start_timeout = float(start_timeout)

    # --- paths ----------------------------------------------------------------------------

    def state_root(self) -> Path:
        """The directory holding one sub-directory per app."""
        return ls.state_root(self._state_dir)

    def change_feed(self) -> ChangeFeed:
        """The process-wide feed of this state root's app changes: inotify on the apps'
        state files where Linux offers it, else a cheap stat poll of them
        (:mod:`~anylaunch.schedulers.local.changes`).

        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as root:
        ...     scheduler = LocalScheduler("demo", state_dir=root)
        ...     same = scheduler.change_feed() is LocalScheduler("x", state_dir=root).change_feed()
        ...     scheduler.change_feed().close()
        >>> same
        True
        """
        from anylaunch.schedulers.local.changes import feed_for

        return feed_for(self.state_root())

    def _app_dir(self, app_id: str) -> Path | None:
        if not is_valid_app_id(app_id):
            return None
        return self.state_root() / app_id

    # --- dryrun and schedule --------------------------------------------------------------

    def _run_opts(self) -> runopts:
        return LocalOpts.as_runopts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Roles without resources are fine locally: there is nothing to reserve."""

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        return AppDryRunInfo(self._request(app, cfg), format_request)

    def _check_capacity(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> Capacity:
        """Whether all the replicas fit this host at once: its CPUs, available memory and
        GPUs (:mod:`~anylaunch.schedulers.local.capacity`); an array by one index. One read
        of ``/proc/meminfo`` (and ``nvidia-smi -L`` when a replica wants GPUs)."""
        return local_capacity(app)

    def _request(
        self, app: AppDef, cfg: Mapping[str, CfgVal], workdir: str | None = None
    ) -> LocalAppRequest:
        """The app's request; ``workdir`` (a retry's) replaces the directory the replicas
        would run from."""
        opts = LocalOpts.from_cfg(cfg)
        if opts.cancel_grace_s < 0:
            raise InvalidRunConfigException(
                "cancel_grace_s", opts.cancel_grace_s, "must be >= 0", "pass e.g. 5"
            )
        app_id = make_app_id(app.name)
        app_dir = self.state_root() / app_id
        if opts.log_dir:
            check_no_nul("log_dir", opts.log_dir)  # (no path can hold one)
            check_creatable_dir("log_dir", opts.log_dir)
            log_root = os.path.join(os.path.abspath(os.path.expanduser(opts.log_dir)), app_id)
        else:
            log_root = os.path.join(app_dir, "logs")

        gpu_requests = [max(r.resource.gpu, 0) for r in app.roles for _ in range(r.num_replicas)]
        gpus: list[str | None] = [None] * len(gpu_requests)
        if opts.auto_set_cuda_visible_devices and sum(gpu_requests) > 0:
            gpus = assign_gpus(gpu_requests, _visible_gpus())
        gpu_iter = iter(gpus)

        roles: list[LocalRoleRequest] = []
        array = app.array
        for role in app.roles:
            image = os.path.expanduser(role.image) if role.image else ""
            img_root = os.path.abspath(image) if image and os.path.isdir(image) else os.getcwd()
            img_root = workdir or img_root
            if array is not None:  # one replica per index, resolved here (no shell)
                gpu = next(gpu_iter)
                replicas = [
                    _replica_request(
                        resolve_index(role, array, i), i, app_id, img_root, log_root, gpu
                    )
                    for i in array.selected
                ]
            else:
                replicas = [
                    _replica_request(role, i, app_id, img_root, log_root, next(gpu_iter))
                    for i in range(role.num_replicas)
                ]
            roles.append(
                LocalRoleRequest(
                    name=role.name,
                    max_retries=role.max_retries,
                    retry_policy=role.retry_policy.value,
                    replicas=replicas,
                    spec=role_record(role),
                )
            )
        request = LocalAppRequest(
            app_id=app_id,
            app_name=app.name,
            app_dir=str(app_dir),
            log_dir=log_root,
            prepend_cwd=opts.prepend_cwd,
            cancel_grace_s=float(opts.cancel_grace_s),
            roles=roles,
            array=array_record(array, cfg, roles[0].replicas[0].cwd) if array else None,
            metadata=job_metadata(app, self.backend),
        )
        return request

    def _retry_indices(self, app_id: str, indices: Sequence[int]) -> str:
        """Schedules a new app that runs ``indices`` of array app ``app_id`` again: the same
        role, size, parameters, ratio, run options and working directory. All or nothing:
        the new app exists only once complete (see :meth:`schedule`).

        Raises:
            UnknownAppException: no such app.
            InvalidSpecError: the app is not an array, or an index is out of its range.
        """
        app_dir = self._app_dir(app_id)
        request = ls.read_json(app_dir / ls.REQUEST_FILE) if app_dir is not None else None
        if request is None:
            from anylaunch.specs.errors import UnknownAppException

            raise UnknownAppException(f"{self.backend}://{self.session_name}/{app_id}")
        app, cfg, workdir = retry_app(request, indices)
        resolved = backend_cfg(self.run_opts().resolve(cfg))
        return self.schedule(AppDryRunInfo(self._request(app, resolved, workdir), format_request))

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Starts the app's supervisor and returns the app id at once.

        The app is SUBMITTED until the supervisor has started its replicas; a supervisor that
        fails to start is reported by ``describe`` as FAILED with its log. The supervisor comes
        from the state root's warm fork-server (:mod:`~anylaunch.schedulers.local.forkserver`)
        when it can be used, else it is started as a new interpreter.

        Raises:
            LocalSchedulerError: the request was already scheduled, or the supervisor did not
                start (the message quotes its log).
        """
        request: LocalAppRequest = self._own_request(dryrun_info)
        from anylaunch.schedulers.local.forkserver import reserve

        # A warm fork-server has a supervisor process waiting: it is recorded with the app,
        # then told which app it runs. Else (or if it died meanwhile) start an interpreter.
        spare = reserve(os.path.dirname(request.app_dir))
        try:
            self._create_app_dir(request, request.app_dir, spare.identity() if spare else None)
        except BaseException:
            if spare is not None:
                spare.release()
            raise
        if spare is not None and spare.assign(request.app_dir):
            return request.app_id
        app_dir = Path(request.app_dir)
        supervisor = self._start_supervisor(app_dir)
        ls.write_json_atomic(app_dir / ls.SUPERVISOR_FILE, supervisor)
        return request.app_id

    def _start_supervisor(self, app_dir: Path) -> dict[str, Any]:
        """Starts the app's supervisor as a new interpreter; returns its pid and start time."""
        supervisor_log = open(app_dir / ls.SUPERVISOR_LOG, "ab")  # noqa: SIM115 (given to Popen)
        # `-m` puts the working directory on sys.path: run from the directory holding the
        # anylaunch package, so the supervisor imports this very copy of it.
        package_root = Path(__file__).resolve().parents[3]
        try:
            proc = subprocess.Popen(
                # -S -E: the supervisor needs only the stdlib and this package (on sys.path via
                # -m and cwd), so skip site-packages scanning: it starts ~3x faster
                [sys.executable, "-S", "-E", "-m", _SUPERVISOR_MODULE, str(app_dir)],
                cwd=package_root,
                stdin=subprocess.DEVNULL,
                stdout=supervisor_log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # not killed with the launcher's terminal or group
                close_fds=True,
            )
        except OSError as e:
            self._take_over(app_dir, f"the supervisor could not be started: {e}", grace=0)
            raise LocalSchedulerError(
                f"could not start the local_cwd supervisor ({sys.executable}): {e}. Fix: check "
                "that the Python interpreter exists and can run"
            ) from e
        finally:
            supervisor_log.close()
        # reap the supervisor when it ends, so it never lingers as a zombie of this process
        threading.Thread(target=proc.wait, name=f"reap-{app_dir.name}", daemon=True).start()
        return {"pid": proc.pid, "start_time": ls.process_start_time(proc.pid)}

    def _create_app_dir(
        self,
        request: LocalAppRequest,
        app_dir: str | os.PathLike[str],
        supervisor: Mapping[str, Any] | None = None,
    ) -> None:
        """Creates the app directory in one rename: SUBMITTED, with its request and the
        ``supervisor`` that will run it, if known.

        As few file operations as that takes (they dominate the cost of a launch): one file,
        written in place inside the not yet visible directory (its state is SUBMITTED until
        the supervisor writes one), the state root created only when missing; the supervisor
        creates the logs.
        """
        # (plain strings: pathlib would be a tenth of the cost of a launch here)
        target = os.fspath(app_dir)
        root = os.path.dirname(target)
        tmp = os.path.join(root, f".tmp-{request.app_id}-{os.getpid()}-{time.monotonic_ns()}")
        try:
            os.mkdir(tmp, 0o700)
        except FileNotFoundError:
            os.makedirs(root, mode=0o700, exist_ok=True)
            os.mkdir(tmp, 0o700)
        try:
            now = time.time()
            # what asdict() returns, without its deep copies (a tenth of the time)
            payload: dict[str, Any] = {
                **vars(request),
                "roles": [
                    {**vars(role), "replicas": [vars(rep) for rep in role.replicas]}
                    for role in request.roles
                ],
                "session": self.session_name,
                "created": now,
            }
            if supervisor is not None:
                payload["supervisor"] = dict(supervisor)
            ls.write_json_new(os.path.join(tmp, ls.REQUEST_FILE), payload)
            os.rename(tmp, target)  # fails if the app dir exists (it is never empty)
        except OSError as e:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
            if os.path.exists(target):
                raise LocalSchedulerError(
                    f"app {request.app_id} was already scheduled (its state is in {app_dir}). "
                    "Fix: dry-run the app again to get a new app id"
                ) from e
            raise

    @staticmethod
    def _supervisor_log_tail(app_dir: Path) -> str:
        try:
            tail = (app_dir / ls.SUPERVISOR_LOG).read_text(errors="replace").strip()[-2000:]
        except OSError:
            tail = ""
        return tail or "(nothing)"

    # --- state ----------------------------------------------------------------------------

    def _state(self, app_dir: Path) -> dict[str, Any] | None:
        """The app's state, with a dead supervisor detected (and its app finished) on the way."""
        try:
            state = ls.read_state(app_dir)
            if state is None or AppState[state["state"]].is_terminal():
                return state
            supervisor = ls.recorded_supervisor(app_dir, state)
        except (OSError, ValueError):
            return None
        if supervisor is not None:
            if ls.is_alive(supervisor.get("pid"), supervisor.get("start_time")):
                return state
            problem = (
                f"supervisor died (pid {supervisor.get('pid')}) while the app was "
                f"{state['state']}; its replicas were killed. Its log "
                f"{app_dir / ls.SUPERVISOR_LOG} says: {self._supervisor_log_tail(app_dir)}"
            )
        elif time.time() - float(state.get("created", 0)) < self.start_timeout:
            return state  # the launcher is starting the supervisor right now
        else:
            problem = "supervisor never started (the launching process died before starting it)"
        return self._take_over(app_dir, problem, grace=0, seen=supervisor)

    def _take_over(
        self,
        app_dir: Path,
        problem: str,
        grace: float,
        seen: Mapping[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """Finishes an app whose supervisor is gone: kills its replica groups, writes the end.

        The end is CANCELLED if a cancel was requested. Else the replicas still going are
        FAILED, and the app's state is what its replicas' states add up to: FAILED with
        ``problem``, unless every replica had succeeded before the supervisor went. ``seen`` is
        the supervisor the caller found gone (None: none): if another one claimed the app since
        then and runs, the app is left to it.
        """
        if not app_dir.is_dir():
            return None
        with ls.app_lock(app_dir):
            state = ls.read_state(app_dir)
            if state is None or AppState[state["state"]].is_terminal():
                return state
            claimed = state.get("supervisor")
            if (
                claimed
                and claimed != seen
                and ls.is_alive(claimed.get("pid"), claimed.get("start_time"))
            ):
                return state
            groups = [
                (r["pid"], r.get("start_time"))
                for r in state.get("replicas", [])
                if r.get("pid") and r.get("state") in ("RUNNING", "PENDING")
            ]
            if grace > 0:
                for pgid, start in groups:
                    ls.kill_group(pgid, start, signal.SIGTERM)
                deadline = time.monotonic() + grace
                while time.monotonic() < deadline and any(ls.group_alive(g) for g, _ in groups):
                    time.sleep(0.02)
            for pgid, start in groups:
                ls.kill_group(pgid, start, signal.SIGKILL)
            cancelled = (app_dir / ls.CANCEL_FILE).exists()
            end = AppState.CANCELLED if cancelled else AppState.FAILED
            replicas = state.get("replicas", [])
            for r in replicas:
                if not AppState[r.get("state", "PENDING")].is_terminal():
                    r["state"] = end.name
            # A requested cancel decides, as it does in the supervisor; else the replicas'
            # states add up (no supervisor is left to retry a failed one).
            final = end
            if not cancelled and replicas:
                final = aggregate_replica_states(AppState[r["state"]] for r in replicas)
            state["state"] = final.name
            state["msg"] = {
                AppState.CANCELLED: "cancelled by request",
                AppState.SUCCEEDED: "",
            }.get(final, problem)
            state["updated"] = time.time()
            ls.write_json_atomic(app_dir / ls.STATE_FILE, state)
            return state

    def _is_over(self, app_id: str) -> bool:
        app_dir = self._app_dir(app_id)
        state = self._state(app_dir) if app_dir is not None else None
        return state is None or AppState[state["state"]].is_terminal()

    # --- queries --------------------------------------------------------------------------

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """The app's state, restarts, per-replica statuses and roles; None for an unknown id."""
        app_dir = self._app_dir(app_id)
        if app_dir is None:
            return None
        state = self._state(app_dir)
        if state is None:
            return None
        request = ls.read_json(app_dir / ls.REQUEST_FILE) or {}
        replicas = [
            ReplicaStatus(
                id=int(r["id"]),
                state=AppState[r["state"]],
                role=r["role"],
                hostname="localhost",
                structured_error_msg=r.get("structured_error_msg", NONE),
            )
            for r in state.get("replicas", [])
        ]
        role_specs = [role["spec"] for role in request.get("roles", []) if role.get("spec")]
        supervisor = ls.recorded_supervisor(app_dir, state) or {}
        current, msg, statuses = app_state(state), state.get("msg") or NONE, None
        array = None
        if request.get("array"):
            role_name = request["roles"][0]["name"]
            current, msg, statuses, array = describe_array(
                request["array"], role_name, state, current
            )
        return DescribeAppResponse(
            app_id=app_id,
            state=current,
            num_restarts=int(state.get("num_restarts", 0)),
            msg=msg,
            structured_error_msg=state.get("structured_error_msg", NONE),
            ui_url=f"file://{state.get('log_dir', request.get('log_dir', ''))}",
            metadata={
                **(request.get("metadata") or {}),
                "app_dir": str(app_dir),
                "log_dir": str(state.get("log_dir", request.get("log_dir", ""))),
                "supervisor_pid": str(supervisor.get("pid", "")),
                **({CANCEL_REQUESTED: "true"} if (app_dir / ls.CANCEL_FILE).exists() else {}),
            },
            roles_statuses=statuses if statuses is not None else role_statuses(replicas),
            roles=[role_from_record(spec) for spec in role_specs],
            array=array,
        )

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """Every app in the state root, oldest first (``cfg`` is ignored)."""
        root = self.state_root()
        if not root.is_dir():
            return []
        found: list[tuple[float, ListAppResponse]] = []
        for entry in os.scandir(root):
            if not is_valid_app_id(entry.name) or not entry.is_dir():
                continue
            app_dir = Path(entry.path)
            state = self._state(app_dir)
            if state is None:
                continue
            request = ls.read_json(app_dir / ls.REQUEST_FILE) or {}
            session = str(request.get("session", self.session_name))
            name = str(request.get("app_name", ""))
            listed = self._list_entry(entry.name, app_state(state), name, session)
            found.append((float(state.get("created", 0)), listed))
        return self._oldest_first(found)

    # --- control --------------------------------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        """Asks the supervisor to cancel (cancel file + SIGTERM); does its job if it is gone."""
        app_dir = self._app_dir(app_id)
        if app_dir is None or not app_dir.is_dir():
            return
        (app_dir / ls.CANCEL_FILE).touch()
        state = ls.read_state(app_dir) or {}
        supervisor = ls.recorded_supervisor(app_dir, state)
        if supervisor is not None and ls.is_alive(
            supervisor.get("pid"), supervisor.get("start_time")
        ):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(supervisor["pid"]), signal.SIGTERM)
            return
        if supervisor is None and time.time() - float(state.get("created", 0)) < self.start_timeout:
            return  # a supervisor about to start reads the cancel file first thing
        request = ls.read_json(app_dir / ls.REQUEST_FILE) or {}
        self._take_over(
            app_dir,
            "cancelled by request",
            grace=float(request.get("cancel_grace_s", 5.0)),
            seen=supervisor,
        )

    def _delete_existing(self, app_id: str) -> None:
        """Cancels the app if it runs, waits for its end, then removes its state directory.

        Logs written to a user-given ``log_dir`` are kept.
        """
        import shutil

        app_dir = self._app_dir(app_id)
        if app_dir is None:
            return
        if not self._is_over(app_id):
            self._cancel_existing(app_id)
            request = ls.read_json(app_dir / ls.REQUEST_FILE) or {}
            deadline = time.monotonic() + float(request.get("cancel_grace_s", 5.0)) + 10
            delay = 0.002
            while not self._is_over(app_id) and time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
            if not self._is_over(app_id):
                state = ls.read_state(app_dir) or {}
                supervisor = ls.recorded_supervisor(app_dir, state) or {}
                if ls.is_alive(supervisor.get("pid"), supervisor.get("start_time")):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(int(supervisor["pid"]), signal.SIGKILL)
                self._take_over(app_dir, "deleted", grace=0, seen=supervisor or None)
        # the supervisor may still be writing (its last logs) after the final state: removing
        # the directory under it could leave a half-deleted app that describes as ended
        state = ls.read_state(app_dir) or {}
        supervisor = ls.recorded_supervisor(app_dir, state) or {}
        deadline, delay = time.monotonic() + 10, 0.002
        while ls.is_alive(supervisor.get("pid"), supervisor.get("start_time")):
            if time.monotonic() > deadline:
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        for _ in range(5):
            shutil.rmtree(app_dir, ignore_errors=True)
            if not app_dir.exists():
                break

    # --- logs -----------------------------------------------------------------------------

    def _log_replicas(self, app_id: str) -> dict[str, dict[int, Any]] | None:
        app_dir = self._app_dir(app_id)
        request = ls.read_json(app_dir / ls.REQUEST_FILE) if app_dir is not None else None
        if app_dir is None or request is None:
            return None
        # keyed by replica id: an array's replicas are its selected indices
        return {
            role["name"]: {
                int(replica.get("replica_id", k)): (app_dir, replica)
                for k, replica in enumerate(role["replicas"])
            }
            for role in request["roles"]
        }

    def _replica_log_lines(
        self, app_id: str, role_name: str, k: int, replica: Any, query: LogQuery
    ) -> Iterable[str]:
        """Lines of one replica: ``query.stream`` picks stdout, stderr or the interleaved
        combined log; ``since``/``until`` select by the time index written beside each log."""
        app_dir, record = replica
        return self._read_log(
            app_id,
            record[f"{query.stream.value}_log"],
            query.since.timestamp() if query.since is not None else None,
            query.until.timestamp() if query.until is not None else None,
            query.should_tail,
            watch=str(app_dir),
        )

    def _read_log(
        self,
        app_id: str,
        path: str,
        since: float | None,
        until: float | None,
        should_tail: bool,
        watch: str,
    ) -> Iterator[str]:
        index = _TimeIndex(ls.index_path(path)) if since is not None or until is not None else None
        start = index.start_offset(since) if index is not None and since is not None else 0

        def is_done() -> bool:
            # past `until`, no line written from now on can be in the window
            late = until is not None and time.time() > until + 1.0
            return late or self._is_over(app_id)

        if should_tail and not os.path.exists(path):
            # The supervisor creates the logs, then records PENDING in the app dir: wait for
            # that, so the tail below watches the file itself (and wakes on each write).
            with ChangeWaiter([watch]) as waiter:
                while not os.path.exists(path) and not is_done():
                    waiter.wait(0.5)
        chunks = follow(path, start, is_done if should_tail else None, also_watch=[watch])
        for offset, raw in iter_lines(_refreshing(chunks, index)):
            if index is not None:
                ts = index.time_at(offset)
                if ts is not None and until is not None and ts > until:
                    return
                if ts is not None and since is not None and ts < since:
                    continue
            yield raw.decode("utf-8", "replace")


def _refreshing(
    chunks: Iterable[tuple[int, bytes]], index: _TimeIndex | None
) -> Iterator[tuple[int, bytes]]:
    # An index record is written before its chunk: reloading the index after each read covers
    # every byte read.
    for chunk in chunks:
        if index is not None:
            index.refresh()
        yield chunk


def create_scheduler(session_name: str, **kwargs: Any) -> LocalScheduler:
    """Creates the ``local_cwd`` scheduler (the registry's factory; see ``factory_kwargs``).

    >>> create_scheduler("demo").backend
    'local_cwd'
    """
    return LocalScheduler.from_kwargs(session_name, kwargs)
