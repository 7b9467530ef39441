"""On-disk state of ``local_cwd`` apps: where it lives, atomic JSON files, ids, process identity.

Every app has one directory under the state root (env ``ANYLAUNCH_LOCAL_STATE_DIR``, default
``${XDG_STATE_HOME:-~/.local/state}/anylaunch/local_cwd``) holding:

- ``request.json``: the dry-run request (commands, env, cwd, log paths, retry settings), and
  the pid and start time of the fork-server process that will supervise the app, if any
- ``state.json``: app and replica states, rewritten atomically (temp file + ``os.replace``);
  missing until the supervisor claimed the app (it is SUBMITTED until then)
- ``supervisor.json``: pid and start time of a supervisor the launcher started itself
- ``supervisor.log``: the supervisor's own stdout/stderr
- ``cancel_requested``: present once someone asked to cancel

The state root also holds the warm fork-server's socket, lock and log
(``.forkserver-<hash>.{sock,lock,log}``, see :mod:`anylaunch.schedulers.local.forkserver`).
An app directory is created complete (its request) under a temporary name and renamed into
place; the supervisor creates the log files, and each log's index once it has data.

Processes are identified by pid AND start time, so a recycled pid is never mistaken for the
supervisor or a replica. This module only uses the standard library: the supervisor imports it.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import sys
from collections.abc import Iterator

# (re-exported: the supervisor and the launcher identify processes with them)
from anylaunch.schedulers.common.processes import is_alive as is_alive
from anylaunch.schedulers.common.processes import process_start_time as process_start_time

TYPE_CHECKING = False  # the supervisor starts per app: keep typing (~8 ms) out of it
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

STATE_DIR_ENV = "ANYLAUNCH_LOCAL_STATE_DIR"
REQUEST_FILE = "request.json"
STATE_FILE = "state.json"
SUPERVISOR_FILE = "supervisor.json"
SUPERVISOR_LOG = "supervisor.log"
CANCEL_FILE = "cancel_requested"
#: Suffix of the sidecar index of a log file: records of (byte offset, unix time).
INDEX_SUFFIX = ".idx"
#: One index record: the offset where a chunk starts and the time it was written. A record is
#: written BEFORE its chunk, so every byte of a log is covered by a record.
INDEX_RECORD = struct.Struct("<Qd")


def state_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Returns the directory holding one sub-directory per local app.

    ``explicit`` wins, then ``$ANYLAUNCH_LOCAL_STATE_DIR``, then
    ``${XDG_STATE_HOME:-~/.local/state}/anylaunch/local_cwd``.

    >>> str(state_root("/tmp/x"))
    '/tmp/x'
    """
    from pathlib import Path  # not at import: the fork-server never needs it

    if explicit is not None:
        return Path(explicit).expanduser().absolute()
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        return Path(env).expanduser().absolute()
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.join("~", ".local", "state")
    return Path(xdg, "anylaunch", "local_cwd").expanduser().absolute()


def index_path(log_path: str) -> str:
    """Path of the (offset, time) sidecar index of a log file.

    >>> index_path("/logs/stdout.log")
    '/logs/stdout.log.idx'
    """
    return log_path + INDEX_SUFFIX


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """Writes ``data`` as JSON so that readers see the old or the new file, never a mix.

    The file is private to the user (mode 0600): a request may hold secrets in its env.
    """
    target = os.fspath(path)
    directory, name = os.path.split(target)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    payload = json.dumps(data, sort_keys=True).encode()  # no indent: the C encoder, 4x faster
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def submitted_state(request: dict[str, Any]) -> dict[str, Any]:
    """The state of an app whose supervisor has not written one yet: SUBMITTED.

    The launcher writes only the request (one file less per launch); the state follows from it.

    >>> request = {"created": 1.0, "roles": [{"replicas": [{"role": "w", "replica_id": 0}]}]}
    >>> state = submitted_state(request)
    >>> state["state"], state["replicas"]
    ('SUBMITTED', [{'role': 'w', 'id': 0, 'state': 'PENDING'}])
    """
    return {
        "state": "SUBMITTED",
        "msg": "",
        "structured_error_msg": "<NONE>",
        "num_restarts": 0,
        "created": request.get("created", 0),
        "updated": request.get("created", 0),
        "log_dir": request.get("log_dir", ""),
        "replicas": [
            {"role": rep["role"], "id": rep["replica_id"], "state": "PENDING"}
            for role in request.get("roles", [])
            for rep in role["replicas"]
        ],
    }


def read_state(app_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The app's state: ``state.json``, else SUBMITTED if the app exists, else None.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as app_dir:
    ...     before = read_state(app_dir)
    ...     write_json_new(os.path.join(app_dir, REQUEST_FILE), {"created": 1.0, "roles": []})
    ...     before, read_state(app_dir)["state"]
    (None, 'SUBMITTED')
    """
    state = read_json(os.path.join(app_dir, STATE_FILE))
    if state is not None:
        return state
    request = read_json(os.path.join(app_dir, REQUEST_FILE))
    if request is None:
        return None
    # the supervisor may have written its first state between the two reads
    return read_json(os.path.join(app_dir, STATE_FILE)) or submitted_state(request)


def recorded_supervisor(
    app_dir: str | os.PathLike[str], state: dict[str, Any]
) -> dict[str, Any] | None:
    """Pid and start time of the app's supervisor, as far as recorded; None if none is.

    The supervisor that claimed the app (in its state) wins, then the one the launcher started
    itself (``supervisor.json``), then the fork-server's process the launcher recorded in the
    request.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as app_dir:
    ...     launched = {"pid": 7, "start_time": "1"}
    ...     write_json_new(os.path.join(app_dir, REQUEST_FILE), {"supervisor": launched})
    ...     claimed = {"pid": 8, "start_time": "2"}
    ...     recorded_supervisor(app_dir, {}), recorded_supervisor(app_dir, {"supervisor": claimed})
    ({'pid': 7, 'start_time': '1'}, {'pid': 8, 'start_time': '2'})
    """
    claimed = state.get("supervisor")
    if claimed:
        return dict(claimed)
    started = read_json(os.path.join(app_dir, SUPERVISOR_FILE))
    if started:
        return started
    request = read_json(os.path.join(app_dir, REQUEST_FILE)) or {}
    launched = request.get("supervisor")
    return dict(launched) if launched else None


def write_json_new(path: str | os.PathLike[str], data: Any) -> None:
    """Writes ``data`` as JSON to a file that must not exist yet (mode 0600).

    Not atomic for readers: use it in a directory nobody reads yet (one that is renamed into
    place once complete), where it saves the temp file and rename of :func:`write_json_atomic`.
    """
    fd = os.open(os.fspath(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(json.dumps(data, sort_keys=True).encode())


def read_json(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Reads a JSON object, or returns None if the file does not exist."""
    # os.open/os.read, not open(): no buffered file object (a fifth of the cost of a read,
    # and pages a forked supervisor would otherwise copy)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    data = json.loads(b"".join(chunks))
    if not isinstance(data, dict):
        raise ValueError(f"{os.fspath(path)} does not hold a JSON object")
    return data


@contextlib.contextmanager
def app_lock(app_dir: str | os.PathLike[str]) -> Iterator[None]:
    """Serializes read-modify-write of an app's state (an ``flock`` of its directory).

    The supervisor takes it only to claim the app (SUBMITTED -> its first state, with its pid)
    and start the replicas; others write the state only once the supervisor is gone, and
    re-check under the lock that none claimed the app meanwhile.
    """
    import fcntl

    # the directory itself is the lock: no file to create per app
    fd = os.open(app_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def kill_group(pgid: int | None, leader_start_time: str | None, sig: int) -> None:
    """Sends ``sig`` to the process group ``pgid`` unless the id now belongs to another group.

    A group id cannot be reissued while the group has members, so the group is ours unless a
    DIFFERENT process (another start time) now leads a group of that id.
    """
    if not pgid or pgid <= 1:
        return
    current = process_start_time(pgid)
    if current is not None and leader_start_time is not None and current != leader_start_time:
        try:
            if os.getpgid(pgid) == pgid:
                return
        except (ProcessLookupError, PermissionError):
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def proc_stats() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, the fields of ``/proc/PID/stat`` after the command: state, ppid, pgrp, ...) of
    every process in ``/proc``; none where it cannot be read, and those that end meanwhile
    are skipped."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # the fields after the command (which may hold spaces and parentheses)
        yield int(name), stat.rsplit(b")", 1)[-1].split()


def group_alive(pgid: int) -> bool:
    """True while any process (zombies excluded where /proc tells) is in group ``pgid``."""
    if pgid <= 1:
        return False
    if sys.platform.startswith("linux") and os.path.isdir("/proc"):
        group = str(pgid).encode()
        return any(
            len(fields) > 2 and fields[2] == group and fields[0] not in (b"Z", b"X")
            for _, fields in proc_stats()
        )
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
