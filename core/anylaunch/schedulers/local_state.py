"""On-disk state of ``local_cwd`` apps: where it lives, atomic JSON files, ids, process identity.

Every app has one directory under the state root (env ``ANYLAUNCH_LOCAL_STATE_DIR``, default
``${XDG_STATE_HOME:-~/.local/state}/anylaunch/local_cwd``) holding:

- ``request.json``: the dry-run request (commands, env, cwd, log paths, retry settings)
- ``state.json``: app and replica states, rewritten atomically (temp file + ``os.replace``)
- ``supervisor.json``: pid and start time of the supervisor, written by the launcher
- ``supervisor.log``: the supervisor's own stdout/stderr
- ``cancel_requested``: present once someone asked to cancel

Processes are identified by pid AND start time, so a recycled pid is never mistaken for the
supervisor or a replica. This module only uses the standard library: the supervisor imports it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import string
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

TYPE_CHECKING = False  # the supervisor starts per app: keep typing (~8 ms) out of it
if TYPE_CHECKING:
    from typing import Any

STATE_DIR_ENV = "ANYLAUNCH_LOCAL_STATE_DIR"
REQUEST_FILE = "request.json"
STATE_FILE = "state.json"
SUPERVISOR_FILE = "supervisor.json"
SUPERVISOR_LOG = "supervisor.log"
CANCEL_FILE = "cancel_requested"
LOCK_FILE = ".lock"
#: Suffix of the sidecar index of a log file: records of (byte offset, unix time).
INDEX_SUFFIX = ".idx"
#: One index record: the offset where a chunk starts and the time it was written. A record is
#: written BEFORE its chunk, so every byte of a log is covered by a record.
INDEX_RECORD = struct.Struct("<Qd")

_ALPHABET = string.ascii_lowercase + string.digits
_APP_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_MAX_NAME = 40


def state_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Returns the directory holding one sub-directory per local app.

    ``explicit`` wins, then ``$ANYLAUNCH_LOCAL_STATE_DIR``, then
    ``${XDG_STATE_HOME:-~/.local/state}/anylaunch/local_cwd``.

    >>> str(state_root("/tmp/x"))
    '/tmp/x'
    """
    if explicit is not None:
        return Path(explicit).expanduser().absolute()
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        return Path(env).expanduser().absolute()
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.join("~", ".local", "state")
    return Path(xdg, "anylaunch", "local_cwd").expanduser().absolute()


def sanitize_app_name(name: str) -> str:
    """Turns an app name into the name part of an app id (no ``/``, whitespace or quotes).

    >>> sanitize_app_name("my train/v2 ")
    'my-train-v2'
    >>> sanitize_app_name("../..")
    'app'
    """
    cleaned = _UNSAFE.sub("-", name).strip("-.")[:_MAX_NAME].strip("-.")
    return cleaned or "app"


def make_app_id(app_name: str) -> str:
    """Returns ``{sanitized app name}-{8 random lowercase alphanumerics}``.

    >>> app_id = make_app_id("echo hello")
    >>> app_id[:11], len(app_id), is_valid_app_id(app_id)
    ('echo-hello-', 19, True)
    """
    import secrets  # not needed at import time

    suffix = "".join(secrets.choice(_ALPHABET) for _ in range(8))
    return f"{sanitize_app_name(app_name)}-{suffix}"


def is_valid_app_id(app_id: object) -> bool:
    """True if ``app_id`` could name an app directory (no path separators, no leading dot).

    >>> is_valid_app_id("echo-ab12cd34"), is_valid_app_id("../etc"), is_valid_app_id(".tmp")
    (True, False, False)
    """
    return isinstance(app_id, str) and bool(_APP_ID.match(app_id))


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
    payload = json.dumps(data, indent=1, sort_keys=True).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Reads a JSON object, or returns None if the file does not exist."""
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    if not isinstance(data, dict):
        raise ValueError(f"{os.fspath(path)} does not hold a JSON object")
    return data


@contextlib.contextmanager
def app_lock(app_dir: str | os.PathLike[str]) -> Iterator[None]:
    """Serializes read-modify-write of an app's state by processes other than its supervisor.

    (The supervisor never takes it: others only write once the supervisor is gone.)
    """
    import fcntl

    fd = os.open(os.path.join(app_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def process_start_time(pid: int) -> str | None:
    """Returns an opaque start-time token of a live process, or None if it is gone or a zombie.

    Together with the pid it identifies a process: a recycled pid has another start time.

    >>> process_start_time(os.getpid()) == process_start_time(os.getpid()) is not None
    True
    """
    if pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return None
    except OSError:  # no procfs (macOS, BSD): ask ps
        return _ps_start_time(pid)
    # the command name (field 2) may hold spaces and parentheses: split after the last ")"
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):  # a zombie has finished running
        return None
    return fields[19].decode()  # field 22: start time in clock ticks since boot


def _ps_start_time(pid: int) -> str | None:
    try:
        out = subprocess.run(
            ["ps", "-o", "stat=,lstart=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if not out or out.startswith("Z"):
        return None
    return out.split(None, 1)[1] if " " in out else out


def is_alive(pid: int | None, start_time: str | None) -> bool:
    """True if the process ``pid`` runs and is the one that started at ``start_time``.

    >>> is_alive(os.getpid(), process_start_time(os.getpid())), is_alive(os.getpid(), "0")
    (True, False)
    """
    if not pid:
        return False
    current = process_start_time(pid)
    return current is not None and (start_time is None or current == start_time)


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


def group_alive(pgid: int) -> bool:
    """True while any process (zombies excluded where /proc tells) is in group ``pgid``."""
    if pgid <= 1:
        return False
    if sys.platform.startswith("linux") and os.path.isdir("/proc"):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if (
                len(fields) > 2
                and fields[2] == str(pgid).encode()
                and fields[0] not in (b"Z", b"X")
            ):
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
