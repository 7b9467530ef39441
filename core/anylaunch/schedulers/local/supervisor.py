"""The detached process that owns the replicas of one ``local_cwd`` app.

Run as ``python -m anylaunch.schedulers.local.supervisor APP_DIR``, or forked by the warm
fork-server (:mod:`anylaunch.schedulers.local.forkserver`) which calls :func:`main`; either way
it runs in its own session, so it outlives the process that launched the app. It:

- claims the app under its lock (SUBMITTED -> RUNNING, with its pid and its replicas'): a
  second supervisor of the same app, or one that starts after the app was ended for it, exits
  without running it;
- starts every replica in its own process group, from the request in ``APP_DIR/request.json``
  (it creates the log files: the launcher does not);
- pumps each replica's stdout/stderr pipes, line by line, into ``stdout.log`` / ``stderr.log``
  and an interleaved ``combined.log`` (each with an ``(offset, time)`` sidecar index);
- records exit codes, applies ``max_retries`` with the role's RetryPolicy, and writes every
  state transition to ``APP_DIR/state.json`` atomically;
- on SIGTERM/SIGINT or a ``cancel_requested`` file, sends SIGTERM to every replica group,
  SIGKILL after the grace period, and writes CANCELLED.

The app state it records is its own decision: FAILED once a replica failed with no retry
left, CANCELLED on a cancel, the end only once the app's processes are gone (SUCCEEDED when
no replica failed for good). Readers add the replicas' states up with the rule every
scheduler shares while it runs the app (:func:`anylaunch.schedulers.local.scheduler.app_state`);
it does not import that rule (nor the specs): its imports are its start-up cost.

It is a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``): a process a replica starts in a
session of its own (double fork, ``setsid``) is re-parented to the supervisor instead of init,
so it cannot escape: the supervisor reaps such orphans, and kills them when the app is
cancelled or ends. It writes its terminal state only once every replica process group and
every orphan is gone.
"""

from __future__ import annotations

import contextlib
import ctypes  # (here, not per call: the fork-server imports it once for all apps)
import json
import os
import selectors
import signal
import sys
import time
from collections import deque

from anylaunch.schedulers.local import state as ls

TYPE_CHECKING = False  # the supervisor starts per app: keep typing (~8 ms) out of it
if TYPE_CHECKING:
    from typing import Any

_NONE = "<NONE>"
# A replica's line longer than this is written without waiting for its newline.
_MAX_LINE = 64 * 1024
# After a replica exits, how long its pipes may stay open (held by a background child)
# before the supervisor stops reading them.
_DRAIN_AFTER_EXIT_S = 1.0
# Longest sleep of the event loop: the cancel file is checked at least this often.
_MAX_WAIT_S = 0.5
_STDERR_TAIL = 20


_PR_SET_CHILD_SUBREAPER = 36
# How often orphans re-parented to the supervisor are looked for and reaped.
_REAP_EVERY_S = 1.0


_prctl: Any = None  # libc's prctl, looked up once (the fork-server does it for every app)


def warm_up() -> None:
    """Looks up once what every supervisor needs (libc's ``prctl``): the fork-server calls it
    before forking, so its supervisors do not each load it again."""
    global _prctl
    if _prctl is None:
        with contextlib.suppress(OSError, AttributeError):
            _prctl = ctypes.CDLL(None, use_errno=True).prctl


def become_subreaper() -> bool:
    """Makes this process the reaper of its orphaned descendants (Linux >= 3.4); False where
    that is not possible (another OS, no libc)."""
    warm_up()
    if _prctl is None:
        return False
    try:
        return bool(_prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except OSError:
        return False


def adopted_children(keep: set[int]) -> list[int]:
    """The pids of this (single-threaded) process's children other than ``keep``: orphans
    re-parented here. One read of ``/proc/self/task/PID/children`` where the kernel has it,
    else a scan of ``/proc``."""
    me = os.getpid()
    try:
        with open(f"/proc/self/task/{me}/children", "rb") as f:
            return [pid for pid in map(int, f.read().split()) if pid not in keep]
    except OSError:
        pass
    return [
        pid
        for pid, fields in ls.proc_stats()
        if pid not in keep and len(fields) > 1 and int(fields[1]) == me
    ]


def describe_exit(returncode: int) -> str:
    """Human form of a Popen return code.

    >>> describe_exit(3), describe_exit(-9)
    ('exit code 3', 'signal SIGKILL (exit code -9)')
    """
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"signal {name} (exit code {returncode})"
    return f"exit code {returncode}"


class _IndexedLog:
    """An append-only log file plus its sidecar index of ``(offset, time)`` per chunk."""

    _FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, self._FLAGS, 0o644)
        self.idx_fd = -1  # created with the first record: most logs of most apps stay empty
        self.offset = os.fstat(self.fd).st_size
        self.last_ts = 0.0

    def write(self, data: bytes, now: float) -> None:
        # timestamps never go backwards (a clock step must not break the since/until bisect)
        self.last_ts = max(now, self.last_ts)
        if self.idx_fd < 0:
            self.idx_fd = os.open(ls.index_path(self.path), self._FLAGS, 0o644)
        os.write(self.idx_fd, ls.INDEX_RECORD.pack(self.offset, self.last_ts))
        view = memoryview(data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]
        self.offset += len(data)

    def close(self) -> None:
        os.close(self.fd)
        if self.idx_fd >= 0:
            os.close(self.idx_fd)


class _Process:
    """A replica's process: started with ``posix_spawn`` (no ``subprocess``: it imports
    ``threading``, which makes every fork of the fork-server slower), reaped with waitpid."""

    def __init__(self, cmd: list[str], cwd: str, env: dict[str, str]) -> None:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            # posix_spawn has no cwd: the supervisor is single-threaded, so it steps in
            os.chdir(cwd)
            try:
                self.pid = os.posix_spawn(
                    _find_executable(cmd[0], env),  # raises OSError like exec would
                    cmd,
                    env,
                    file_actions=[
                        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                        (os.POSIX_SPAWN_DUP2, out_w, 1),
                        (os.POSIX_SPAWN_DUP2, err_w, 2),
                    ],
                    setsid=True,  # its own process group: cancel reaches its children
                    # what Python ignores must not stay ignored in the program
                    setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
                )
            finally:
                os.chdir("/")
        except BaseException:
            for fd in (out_r, err_r):
                os.close(fd)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        self.stdout = out_r
        self.stderr = err_r
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code (negative: killed by that signal) once it exited, else None."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = self.pid, 255 << 8  # reaped by someone else: unknown
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _find_executable(name: str, env: dict[str, str]) -> str:
    """Where exec would find ``name``: itself if it has a slash, else the first executable
    file of that name on the environment's PATH."""
    if os.sep in name:
        return name
    denied = False
    for directory in (env.get("PATH") or os.defpath).split(os.pathsep):
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            if os.access(candidate, os.X_OK):
                return candidate
            denied = True
    if denied:
        raise PermissionError(13, "Permission denied", name)
    raise FileNotFoundError(2, "No such file or directory", name)


class _Replica:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.role: str = spec["role"]
        self.id: int = int(spec["replica_id"])
        self.cmd: list[str] = list(spec["cmd"])
        self.env: dict[str, str] = dict(spec["env"])
        self.cwd: str = spec["cwd"]
        self.spec = spec
        self.logs: dict[str, _IndexedLog] = {}
        self.state = "PENDING"
        self.proc: _Process | None = None
        self.pid: int | None = None
        self.start_time: str | None = None
        self.exit_code: int | None = None
        self.exited_at: float | None = None
        self.started_at: float | None = None  # wall times of its last run (array records)
        self.ended_at: float | None = None
        self.kill_at: float | None = None
        self.stop_reason: str | None = None  # set when the supervisor stops it on purpose
        self.restarts = 0
        self.error: str = _NONE
        self.pumps: dict[int, tuple[str, bytearray]] = {}
        self.stderr_tail: deque[str] = deque(maxlen=_STDERR_TAIL)

    @property
    def live(self) -> bool:
        return self.proc is not None

    def open_logs(self) -> None:
        """Creates its logs (the launcher leaves them to the supervisor: fewer file
        operations per launch; an array index's only once it starts)."""
        if self.logs:
            return
        spec = self.spec
        for log_dir in {
            os.path.dirname(spec[f"{s}_log"]) for s in ("stdout", "stderr", "combined")
        }:
            os.makedirs(log_dir, exist_ok=True)
        self.logs = {s: _IndexedLog(spec[f"{s}_log"]) for s in ("stdout", "stderr", "combined")}

    @property
    def name(self) -> str:
        return f"{self.role}/{self.id}"

    def emit(self, stream: str, chunk: bytes) -> None:
        self.open_logs()
        now = time.time()
        self.logs[stream].write(chunk, now)
        self.logs["combined"].write(chunk, now)
        if stream == "stderr":
            self.stderr_tail.extend(
                line.rstrip("\n") for line in chunk.decode("utf-8", "replace").splitlines()
            )

    def to_state(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "id": self.id,
            "state": self.state,
            "pid": self.pid,
            "start_time": self.start_time,
            "exit_code": self.exit_code,
            "restarts": self.restarts,
            "structured_error_msg": self.error,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
        }


class _Role:
    def __init__(self, spec: dict[str, Any], replicas: list[_Replica]) -> None:
        self.name: str = spec["name"]
        self.max_retries = int(spec["max_retries"])
        self.retry_policy: str = spec["retry_policy"]
        self.replicas = replicas
        self.restarts = 0


class Supervisor:
    """Owns the replicas of the app in ``app_dir`` until they all ended."""

    def __init__(self, app_dir: str, env: dict[str, str] | None = None) -> None:
        """``env``: the environment the replicas start from (default: this process's)."""
        self.app_dir = app_dir
        request = ls.read_json(os.path.join(app_dir, ls.REQUEST_FILE))
        if request is None:
            raise FileNotFoundError(f"no {ls.REQUEST_FILE} in {app_dir}")
        self.request = request
        self.grace = float(request["cancel_grace_s"])
        self.prepend_cwd = bool(request["prepend_cwd"])
        self.roles: list[_Role] = []
        self.replicas: list[_Replica] = []
        for role_spec in request["roles"]:
            replicas = [_Replica(r) for r in role_spec["replicas"]]
            self.roles.append(_Role(role_spec, replicas))
            self.replicas.extend(replicas)
        # an array (``request["array"]``): its replicas are the indices, at most ``limit`` run
        # at once, in order; a failed index fails alone (retried by itself, as REPLICA)
        array = request.get("array")
        self.array_limit: int | None = int(array["limit"]) if array else None
        self.array_required = int(array["required"]) if array else 0
        self.waiting: list[_Replica] = []  # array indices not started yet
        self.claimed = False
        self.num_restarts = 0
        self.app_restarts = 0
        self.outcome: tuple[str, str, str] | None = None  # (state, msg, structured_error_msg)
        self.pending_restart: list[_Replica] = []
        self.cancel_signalled = False
        self.next_cancel_check = 0.0
        self.created = time.time()
        self.base_env = dict(os.environ) if env is None else env
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.selector.register(self.wake_r, selectors.EVENT_READ, None)
        # Signals only set flags; the wakeup fd makes select() return at once.
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGTERM, self._on_cancel_signal)
        signal.signal(signal.SIGINT, self._on_cancel_signal)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.identity = {"pid": os.getpid(), "start_time": ls.process_start_time(os.getpid())}
        self.subreaper = become_subreaper()
        self.next_reap = 0.0

    def _on_cancel_signal(self, signum: int, frame: object) -> None:
        self.cancel_signalled = True

    # --- state ----------------------------------------------------------------------------

    def write_state(self, state: str) -> None:
        msg, structured = (self.outcome[1], self.outcome[2]) if self.outcome else ("", _NONE)
        ls.write_json_atomic(
            os.path.join(self.app_dir, ls.STATE_FILE),
            {
                "state": state,
                "msg": msg,
                "structured_error_msg": structured,
                "num_restarts": self.num_restarts,
                "supervisor": self.identity,
                "created": self.request.get("created", self.created),
                "updated": time.time(),
                "log_dir": self.request["log_dir"],
                "replicas": [r.to_state() for r in self.replicas],
            },
        )

    # --- replicas -------------------------------------------------------------------------

    def start(self, replica: _Replica) -> None:
        replica.open_logs()
        replica.started_at = time.time()
        replica.ended_at = None
        env = dict(self.base_env)
        env.update(replica.env)
        path = env.get("PATH", "")
        parts = [replica.cwd, path] if self.prepend_cwd else [path, replica.cwd]
        env["PATH"] = os.pathsep.join(p for p in parts if p)
        replica.exit_code = None
        replica.exited_at = None
        replica.kill_at = None
        replica.stop_reason = None
        replica.error = _NONE
        replica.stderr_tail.clear()
        try:
            proc = _Process(replica.cmd, replica.cwd, env)
        except (OSError, ValueError) as e:
            reason = getattr(e, "strerror", None) or str(e)
            replica.emit(
                "stderr", f"anylaunch: cannot start {replica.cmd[0]!r}: {reason}\n".encode()
            )
            replica.pid = None
            replica.start_time = None
            code = 126 if isinstance(e, PermissionError) else 127
            self.on_failure(replica, code, f"could not start: {reason}")
            return
        replica.proc = proc
        replica.pid = proc.pid
        replica.start_time = ls.process_start_time(proc.pid)
        replica.state = "RUNNING"
        for stream, fd in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            os.set_blocking(fd, False)
            replica.pumps[fd] = (stream, bytearray())
            self.selector.register(fd, selectors.EVENT_READ, replica)

    def start_group(self, group: list[_Replica], app_state: str) -> None:
        """Starts ``group``; the caller writes the state after the last one."""
        for i, r in enumerate(group):
            # a start that failed may have ended the app or queued a restart of the others
            if self.outcome is None and r not in self.pending_restart:
                self.start(r)
                if i < len(group) - 1:
                    # record each pid at once: whoever takes over after a crash can kill it
                    self.write_state(app_state)

    def pump(self, replica: _Replica, fd: int) -> None:
        stream, buf = replica.pumps[fd]
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        if not data:
            self.close_pump(replica, fd)
            return
        buf += data
        cut = buf.rfind(b"\n") + 1
        if cut == 0 and len(buf) >= _MAX_LINE:
            cut = len(buf)
        if cut:
            replica.emit(stream, bytes(buf[:cut]))
            del buf[:cut]

    def close_pump(self, replica: _Replica, fd: int) -> None:
        stream, buf = replica.pumps.pop(fd)
        # read what is left (a replica that exited has written everything it will)
        with contextlib.suppress(OSError):
            while chunk := os.read(fd, 65536):
                buf += chunk
        if buf:
            replica.emit(stream, bytes(buf))  # a last line without newline stays as it is
        self.selector.unregister(fd)

    def stop(self, replica: _Replica, reason: str) -> None:
        """Asks a live replica's group to stop (SIGTERM now, SIGKILL after the grace)."""
        if not replica.live:
            return
        already_stopping = replica.stop_reason is not None
        replica.stop_reason = reason  # a cancel or abort overrides a restart in progress
        if already_stopping:
            return
        sig = signal.SIGTERM if self.grace > 0 else signal.SIGKILL
        ls.kill_group(replica.pid, replica.start_time, sig)
        replica.kill_at = time.monotonic() + self.grace

    def finalize(self, replica: _Replica) -> None:
        """The replica's process exited and its pipes are drained (or held too long)."""
        for fd in list(replica.pumps):
            self.close_pump(replica, fd)
        proc = replica.proc
        assert proc is not None
        for fd in (proc.stdout, proc.stderr):
            os.close(fd)
        # leftover background children of a finished replica must not keep running
        ls.kill_group(replica.pid, replica.start_time, signal.SIGKILL)
        replica.proc = None
        replica.ended_at = time.time()
        code = proc.returncode
        assert code is not None  # finalize runs once the process exited
        replica.exit_code = code
        reason, replica.stop_reason = replica.stop_reason, None
        if reason == "restart":
            replica.state = "PENDING"
        elif reason is not None:
            replica.state = "CANCELLED"
        elif code == 0:
            replica.state = "SUCCEEDED"
        else:
            self.on_failure(replica, code, describe_exit(code))

    def on_failure(self, replica: _Replica, code: int, reason: str) -> None:
        replica.state = "FAILED"
        replica.exit_code = code
        replica.ended_at = time.time()
        replica.error = json.dumps(
            {
                "role": replica.role,
                "replica_id": replica.id,
                "exit_code": code,
                "message": reason,
                # killed by SIGKILL/SIGTERM from outside (the kernel's OOM killer, an admin,
                # a shutdown): the platform's doing; any other failure is the app's
                "category": "infrastructure" if code in (-9, -15) else "application",
                "stderr_tail": list(replica.stderr_tail),
            }
        )
        if self.outcome is not None:
            return  # already cancelling or failing: this exit is part of it
        role = next(r for r in self.roles if r.name == replica.role)
        if self.array_limit is not None:  # an index fails alone, retried by itself
            if replica.restarts < role.max_retries:
                self.num_restarts += 1
                replica.restarts += 1
                self.stop(replica, "restart")
                self.pending_restart.append(replica)
            return
        if role.retry_policy == "REPLICA":
            can_retry, group = replica.restarts < role.max_retries, [replica]
        elif role.retry_policy == "ROLE":
            can_retry, group = role.restarts < role.max_retries, role.replicas
        else:
            can_retry, group = self.app_restarts < role.max_retries, self.replicas
        if can_retry:
            self.num_restarts += 1
            if role.retry_policy == "REPLICA":
                replica.restarts += 1
            elif role.retry_policy == "ROLE":
                role.restarts += 1
            else:
                self.app_restarts += 1
            for r in group:
                self.stop(r, "restart")
                if r not in self.pending_restart:
                    self.pending_restart.append(r)
            return
        self.outcome = (
            "FAILED",
            f"replica {replica.name} (role {replica.role!r}) failed with {reason}"
            + (f" after {role.max_retries} retries" if role.max_retries else ""),
            replica.error,
        )
        self.abort("abort")

    def abort(self, reason: str) -> None:
        self.pending_restart.clear()
        self.waiting.clear()
        for r in self.replicas:
            if r.live:
                self.stop(r, reason)
            elif r.state in ("PENDING", "RUNNING"):
                r.state = "CANCELLED"

    # --- main loop ------------------------------------------------------------------------

    def check_cancel(self, now: float) -> None:
        if self.outcome is not None:
            return
        if not self.cancel_signalled and now >= self.next_cancel_check:
            self.next_cancel_check = now + _MAX_WAIT_S
            self.cancel_signalled = os.path.exists(os.path.join(self.app_dir, ls.CANCEL_FILE))
        if self.cancel_signalled:
            self.outcome = ("CANCELLED", "cancelled by request", _NONE)
            self.abort("cancel")

    def timeout(self, now: float) -> float:
        deadlines = [now + _MAX_WAIT_S]
        for r in self.replicas:
            if r.live and r.kill_at is not None:
                deadlines.append(r.kill_at)
            if r.live and r.exited_at is not None:
                deadlines.append(r.exited_at + _DRAIN_AFTER_EXIT_S)
        return max(0.0, min(deadlines) - now)

    def run(self) -> str | None:
        """Runs the app to its end and returns the final state.

        Returns None without running anything if the app is not SUBMITTED: another
        supervisor claimed it (a launch that fell back to a direct start after the
        fork-server had started one), or it was ended already (a start that came too late).
        """
        # Claim and start under the app's lock: take-overs by other processes write under it
        # too, and the first state written carries our pid and the replicas' pids.
        with ls.app_lock(self.app_dir):
            current = ls.read_json(os.path.join(self.app_dir, ls.STATE_FILE))
            if current is not None and current.get("state") != "SUBMITTED":
                return None  # (no state yet: SUBMITTED, see state.read_state)
            self.claimed = True
            first = self.replicas
            if self.array_limit is not None:  # the rest start as indices end
                first = self.replicas[: self.array_limit]
                self.waiting = self.replicas[self.array_limit :]
            self.check_cancel(time.monotonic())  # a cancel may have raced with the start
            self.start_group(first, "PENDING")
            self.write_state("RUNNING")
        while True:
            changed = False
            now = time.monotonic()
            self.check_cancel(now)
            for key, _ in self.selector.select(self.timeout(now)):
                if key.data is None:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(self.wake_r, 4096):
                            pass
                elif key.fd in key.data.pumps:
                    self.pump(key.data, key.fd)
            now = time.monotonic()
            for r in self.replicas:
                if not r.live:
                    continue
                assert r.proc is not None
                if r.exited_at is None and r.proc.poll() is not None:
                    r.exited_at = now
                if r.exited_at is None and r.kill_at is not None and now >= r.kill_at:
                    ls.kill_group(r.pid, r.start_time, signal.SIGKILL)
                    r.kill_at = None
                if r.exited_at is not None and (
                    not r.pumps or now - r.exited_at >= _DRAIN_AFTER_EXIT_S
                ):
                    self.finalize(r)
                    changed = True
            if self.pending_restart and not any(r.live for r in self.pending_restart):
                group, self.pending_restart = self.pending_restart, []
                self.start_group(group, "RUNNING")
                changed = True
            if self.start_waiting():
                changed = True
            if now >= self.next_reap:
                self.next_reap = now + _REAP_EVERY_S
                self.reap_orphans(kill=False)
            if not any(r.live for r in self.replicas) and not (
                self.pending_restart or self.waiting
            ):
                # background processes of the app must not outlive it (escaped ones included)
                self.reap_orphans(kill=True)
                final = self.outcome[0] if self.outcome else self.array_end()
                self.write_state(final)
                return final
            if changed:
                self.write_state("RUNNING")

    def start_waiting(self) -> bool:
        """Starts waiting array indices while fewer than the limit run; True if any did."""
        if self.outcome is not None or not self.waiting or self.array_limit is None:
            return False
        running = sum(1 for r in self.replicas if r.live) + len(self.pending_restart)
        free = self.array_limit - running
        if free <= 0:
            return False
        group, self.waiting = self.waiting[:free], self.waiting[free:]
        self.start_group(group, "RUNNING")
        return True

    def array_end(self) -> str:
        """The end of an app no cancel or failure decided: SUCCEEDED, or for an array,
        by its rule (enough indices succeeded); readers recount it from the indices."""
        if self.array_limit is None:
            return "SUCCEEDED"
        succeeded = sum(1 for r in self.replicas if r.state == "SUCCEEDED")
        return "SUCCEEDED" if succeeded >= self.array_required else "FAILED"

    def kill_all(self) -> None:
        for r in self.replicas:
            if r.live:
                ls.kill_group(r.pid, r.start_time, signal.SIGKILL)
        self.reap_orphans(kill=True)

    def reap_orphans(self, kill: bool) -> None:
        """Reaps the orphans re-parented here (see the module docstring); with ``kill``,
        kills them first, and their own children as they are re-parented in turn."""
        if not self.subreaper:
            return
        keep = {r.pid for r in self.replicas if r.live and r.pid}
        for _ in range(50):  # each round takes one generation of descendants
            orphans = adopted_children(keep)
            if not orphans:
                return
            for pid in orphans:
                if kill:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, 0 if kill else os.WNOHANG)
            if not kill:
                return


# what prepare_spare runs through the JSON codec: shaped like a request and a state
_SAMPLE_REQUEST = (
    b'{"app_dir": "/s/a-1", "app_id": "a-1", "app_name": "a", "cancel_grace_s": 5.0, '
    b'"created": 1.5, "log_dir": "/s/a-1/logs", "prepend_cwd": false, "roles": [{"max_retries":'
    b' 0, "name": "r", "replicas": [{"cmd": ["x"], "combined_log": "/l", "cwd": "/", "env": '
    b'{"K": "V"}, "replica_id": 0, "role": "r", "stderr_log": "/l", "stdout_log": "/l"}], '
    b'"retry_policy": "APPLICATION", "spec": {"args": [], "env": {}}}], "session": "s", '
    b'"supervisor": {"pid": 1, "start_time": "1"}}'
)


def prepare_spare() -> None:
    """Runs in a fork-server's spare as soon as it is forked, before it has an app.

    A forked supervisor's main cost is copying the pages of the server it writes to (every
    object Python touches gets its reference count written). This touches, once, what every
    supervisor uses (the JSON codec, a selector, the /proc reads, libc's prctl), while the
    spare waits and the launcher is busy, so that far fewer pages are copied when its app
    starts. It also makes the spare the subreaper of its future replicas already.
    """
    request = json.loads(_SAMPLE_REQUEST)
    state = {"replicas": [{"id": 0, "pid": None, "state": "RUNNING"}], "request": request}
    json.dumps(state, sort_keys=True).encode()
    selector = selectors.DefaultSelector()
    read_end, write_end = os.pipe()
    try:
        os.set_blocking(read_end, False)
        selector.register(read_end, selectors.EVENT_READ, None)
        selector.select(0)
        selector.unregister(read_end)
    finally:
        selector.close()
        os.close(read_end)
        os.close(write_end)
    ls.process_start_time(os.getpid())
    os.path.dirname(os.path.join(os.sep, "x"))
    time.time()
    time.monotonic()
    become_subreaper()


def main(argv: list[str] | None = None, env: dict[str, str] | None = None) -> int:
    """Entry point: ``python -m anylaunch.schedulers.local.supervisor APP_DIR``.

    ``env`` is the environment the replicas start from (default: this process's).
    """
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m anylaunch.schedulers.local.supervisor APP_DIR", file=sys.stderr)
        return 2
    app_dir = os.path.abspath(args[0])
    supervisor: Supervisor | None = None
    try:
        supervisor = Supervisor(app_dir, env)
        state = supervisor.run()
        if state is None:
            print("another supervisor runs this app (or it ended): exiting", file=sys.stderr)
        else:
            print(f"app ended {state}", file=sys.stderr)
        return 0
    except BaseException as e:
        import traceback

        traceback.print_exc()
        if supervisor is not None and supervisor.claimed:  # else the app is not ours to end
            supervisor.kill_all()
            supervisor.outcome = ("FAILED", f"supervisor crashed: {e!r}", _NONE)
            with contextlib.suppress(Exception):
                for r in supervisor.replicas:
                    if r.state in ("PENDING", "RUNNING"):
                        r.state = "FAILED"
                supervisor.write_state("FAILED")
        return 1


if __name__ == "__main__":
    sys.exit(main())
