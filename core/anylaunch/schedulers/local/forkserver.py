"""A warm fork-server that has ``local_cwd`` supervisors waiting before apps are launched.

Starting a supervisor as ``python -m anylaunch.schedulers.local.supervisor`` costs an
interpreter start and its imports (tens of ms of CPU) per app. Instead, the first launch starts
one small detached server per (state root, interpreter, anylaunch code, cgroup and mount
namespace), run as ``python -S -E -m anylaunch.schedulers.local.forkserver_server ROOT NAME``. It is
single-threaded, has the supervisor code imported, and listens on the unix socket
``ROOT/NAME.sock`` (mode 0600; the state root is private to the user, and peers of another uid
are refused).

The server keeps *spares* forked ahead of time: children that wait for their app on a pipe. A
launch *reserves* one: the server replies with its pid and start time and passes the write end
of its pipe (SCM_RIGHTS). The launcher records that pid as the app's supervisor in the app's
request, makes the app visible, and writes the app directory, its own environment and umask
straight into the spare's pipe (the environment may hold secrets: it is never written to disk
and never goes through the server). The spare then starts its own session and becomes that
app's supervisor: every app still has its own supervisor process.

Launches in quick succession cost little: a launching process asks for the reservations of its
next launches ahead, in one message for several, and the server refills its pool several
spares at a time between requests, so no launch waits for a fork. While such a burst lasts
(reservations less than 20 ms apart), the spares forked meanwhile start their apps only once it
pauses for 30 ms (at most 1 s after they were forked): the launching process keeps the CPU,
and the apps start right after it.

Nothing is assigned through the server: if it dies, spares already reserved still work, and a
launch that gets no reservation starts the supervisor directly (:func:`reserve` returns None),
so nothing depends on the server. A spare not assigned within :data:`SPARE_TTL_S` (its launcher
exited or gave up) exits. The server reaps its children and exits once it had no request and no
child for its idle period (``$ANYLAUNCH_LOCAL_FORKSERVER_IDLE_S``, default 60 s; the launch
that starts a server sets it), or once its socket is gone. A socket whose server is gone is
replaced; a lock makes concurrent first launches start one server.
``ANYLAUNCH_LOCAL_FORKSERVER=0`` turns it off.

Supervisors do not get the launcher's resource limits or scheduling priority (they have those
of the launcher that started the server); processes in another cgroup or mount namespace get
their own server.
"""

from __future__ import annotations

import _thread
import contextlib
import json
import os
import struct
import sys
import time

TYPE_CHECKING = False  # the server starts with this module: keep typing out of it
if TYPE_CHECKING:
    import socket
    from collections.abc import Iterator
    from typing import Any

MODULE = "anylaunch.schedulers.local.forkserver_server"
DISABLE_ENV = "ANYLAUNCH_LOCAL_FORKSERVER"
IDLE_ENV = "ANYLAUNCH_LOCAL_FORKSERVER_IDLE_S"
DEFAULT_IDLE_S = 60.0
#: How long a launch waits for a new server to listen before starting the supervisor itself.
START_TIMEOUT_S = 10.0
#: How long a launch waits for a reservation (the server answers in well under a millisecond).
REPLY_TIMEOUT_S = 30.0
#: After a server failed to start, launches of this process skip it for this long.
RETRY_AFTER_S = 60.0
#: A spare exits if no app was assigned to it within this long after it was forked.
SPARE_TTL_S = 60.0
# A launch does not use a reservation with less time left than this (nor one whose process is
# gone); the server hands out spares with at least half their time left.
_MIN_LEFT_S = 10.0
# Spares the server keeps waiting, and reservations a process asks for ahead while it
# launches apps in quick succession (a burst does not wait for forks); a process that
# launches once in a while asks for one ahead.
_POOL_LOW = 2
_POOL_IN_BURST = 6
_AHEAD_IN_BURST = 3
_BURST_GAP_S = 0.5
# A connection unused this long is closed (with the reservations it holds).
_LINK_IDLE_S = 30.0
# Reservations less than _GATE_BURST_S apart make a burst: the supervisors forked during it
# start their apps once no reservation came for _GATE_PAUSE_S (at most _GATE_MAX_HOLD_S after
# they were assigned).
_GATE_BURST_S = 0.02
_GATE_PAUSE_S = 0.03
_GATE_MAX_HOLD_S = 1.0
_MAX_MESSAGE = 64 << 20
# a unix socket path must fit in sockaddr_un.sun_path (108 bytes on Linux, 104 on macOS)
_MAX_SOCKET_PATH = 100
_FRAME = struct.Struct("!I")  # every message is prefixed with its length
_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))


class ForkServerError(Exception):
    """The fork-server could not be used (the caller starts the supervisor itself)."""


class _NotRunning(ForkServerError):
    """No server listens on the socket (missing, or stale: refused)."""


class _StartFailed(ForkServerError):
    """A server could not be started."""


# --- framing (both sides) --------------------------------------------------------------------


def _send_frame(sock: socket.socket, body: bytes) -> None:
    sock.sendall(_FRAME.pack(len(body)) + body)


def _recv_exact(sock: socket.socket, size: int, data: bytes = b"") -> bytes:
    buf = bytearray(data)
    while len(buf) < size:
        chunk = sock.recv(size - len(buf))
        if not chunk:
            raise ConnectionError("the peer closed the connection mid-message")
        buf += chunk
    return bytes(buf)


def _recv_frame(sock: socket.socket) -> bytes | None:
    """One length-prefixed message; None on a clean end of stream."""
    first = sock.recv(_FRAME.size)
    if not first:
        return None
    (size,) = _FRAME.unpack(_recv_exact(sock, _FRAME.size, first))
    if size > _MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes is too large")
    return _recv_exact(sock, size)


def _read_frame_from_pipe(fd: int, timeout: float) -> bytes | None:
    """The message the launcher writes into a spare's pipe; None if it closed the pipe unused
    (or did not write a whole message within ``timeout`` seconds)."""
    import select

    deadline = time.monotonic() + timeout
    data = bytearray()
    size = None
    while size is None or len(data) < _FRAME.size + size:
        if not select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))[0]:
            return None
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return None  # no complete message: never assigned (or the launcher died writing)
        data += chunk
        if size is None and len(data) >= _FRAME.size:
            (size,) = _FRAME.unpack_from(data)
    return bytes(data[_FRAME.size : _FRAME.size + size])


# --- client ----------------------------------------------------------------------------------


def _read_small(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(65536).decode("utf-8", "replace")
    except OSError:
        return ""


_code_keys: dict[str, str] = {}
_names: dict[str, tuple[float, str]] = {}  # per interpreter: (when, name)
_NAME_TTL_S = 1.0  # a burst of launches hashes the cgroup and namespace once


def server_name(executable: str | None = None) -> str:
    """The file name stem (``.forkserver-<hash>``) of the server for this process.

    The hash covers the interpreter, the anylaunch code (version, location and the mtimes of
    the modules the server runs), the uid, and the cgroup and mount namespace (a server in
    another cgroup or container would run the apps there).

    >>> name = server_name("/usr/bin/python3")
    >>> name.startswith(".forkserver-"), name == server_name("/usr/bin/python3")
    (True, True)
    >>> name == server_name("/opt/other/python3")
    False
    """
    exe = sys.executable if executable is None else executable
    now = time.monotonic()
    cached = _names.get(exe)
    if cached is not None and now - cached[0] < _NAME_TTL_S:
        return cached[1]
    code = _code_keys.get(exe)
    if code is None:
        from anylaunch import __version__

        parts = [exe, _PACKAGE_ROOT, __version__, str(os.getuid())]
        for module in ("forkserver.py", "supervisor.py", "state.py"):
            with contextlib.suppress(OSError):
                st = os.stat(os.path.join(_HERE, module))
                parts.append(f"{module}:{st.st_mtime_ns}:{st.st_size}")
        code = _code_keys[exe] = "\0".join(parts)
    with contextlib.suppress(OSError):
        code += "\0" + os.readlink("/proc/self/ns/mnt")
    code += "\0" + _read_small("/proc/self/cgroup")
    import hashlib

    name = ".forkserver-" + hashlib.sha256(code.encode()).hexdigest()[:20]
    _names[exe] = (now, name)
    return name


def _disabled() -> bool:
    value = os.environ.get(DISABLE_ENV, "").strip().lower()
    return value in ("0", "false", "no", "off")


def _idle_seconds() -> float:
    raw = os.environ.get(IDLE_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_IDLE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        from anylaunch.specs.errors import InvalidSpecError

        raise InvalidSpecError(
            IDLE_ENV, raw, "must be a positive number of seconds", f"e.g. {DEFAULT_IDLE_S:g}"
        )
    return value


def _umask() -> int:
    # read it without changing it (os.umask sets it: a race with other threads creating files)
    try:
        fd = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
        try:
            status = os.read(fd, 1 << 16)
        finally:
            os.close(fd)
        start = status.index(b"\nUmask:") + 7
        return int(status[start : status.index(b"\n", start)], 8)
    except (OSError, ValueError):  # no procfs, or a kernel before 4.7
        old = os.umask(0o022)
        os.umask(old)
        return old


_env_json: tuple[dict[bytes, bytes], str] | None = None


def _environment_json() -> str:
    """This process's environment as JSON, encoded again only once it changed (decoding
    and encoding every variable was a sixth of the launcher's work per launch)."""
    global _env_json
    raw = getattr(os.environ, "_data", None)  # CPython's bytes mapping behind os.environ
    if not isinstance(raw, dict):
        return json.dumps(dict(os.environ))
    snapshot = dict(raw)  # (a copy of bytes: no decoding)
    cached = _env_json
    if cached is not None and cached[0] == snapshot:
        return cached[1]
    encoded = json.dumps(dict(os.environ))
    _env_json = (snapshot, encoded)
    return encoded


@contextlib.contextmanager
def _address(root: str, name: str) -> Iterator[str]:
    """A path to connect to ``root/name``, short enough for a unix socket address."""
    path = os.path.join(root, name)
    if len(os.fsencode(path)) <= _MAX_SOCKET_PATH:
        yield path
        return
    if not os.path.isdir("/proc/self/fd"):
        raise ForkServerError(f"socket path too long: {path}")
    # Linux resolves /proc/self/fd/N as the open directory itself: a short alias of the root
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{name}"
    finally:
        os.close(fd)


def _connect(root: str, name: str, timeout: float) -> socket.socket:
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        with _address(root, name + ".sock") as address:
            sock.connect(address)
    except (FileNotFoundError, ConnectionRefusedError) as e:
        sock.close()
        raise _NotRunning(str(e)) from e
    except BaseException:
        sock.close()
        raise
    return sock


class Reservation:
    """A supervisor process the fork-server started ahead of time, waiting for its app.

    Record :meth:`identity` as the app's supervisor, then :meth:`assign` the app to it (or
    :meth:`release` it unused: it exits).
    """

    def __init__(self, pid: int, start_time: str | None, pipe: int, expires: float) -> None:
        self.pid = pid
        self.start_time = start_time
        self.expires = expires  # time.monotonic() after which the spare may have given up
        self._pipe = pipe

    def identity(self) -> dict[str, Any]:
        """The supervisor's pid and start time, as ``supervisor.json`` records them."""
        return {"pid": self.pid, "start_time": self.start_time}

    def usable(self) -> bool:
        """True if the spare still waits, with enough time left to be assigned."""
        from anylaunch.schedulers.local.state import is_alive

        left = self.expires - time.monotonic()
        return self._pipe >= 0 and left > _MIN_LEFT_S and is_alive(self.pid, self.start_time)

    def assign(self, app_dir: str) -> bool:
        """Makes the spare the supervisor of ``app_dir``, with this process's environment and
        umask. False if it could not be told (it died): start a supervisor another way."""
        message = (
            f'{{"app_dir": {json.dumps(app_dir)}, "env": {_environment_json()}, '
            f'"umask": {_umask()}}}'
        ).encode()
        data = memoryview(_FRAME.pack(len(message)) + message)
        try:
            while data:
                data = data[os.write(self._pipe, data) :]
            return True
        except OSError:  # EPIPE: the spare is gone
            return False
        finally:
            self.release()

    def release(self) -> None:
        """Gives the spare up (it exits once no process holds its pipe)."""
        if self._pipe >= 0:
            os.close(self._pipe)
            self._pipe = -1


class _Link:
    """This process's connection to one server, kept open across launches, with the
    reservations it received and not used yet."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.pending = 0  # reservations asked for whose reply was not read yet
        self.stock: list[Reservation] = []
        self.last_use = 0.0

    def close(self) -> None:
        for reservation in self.stock:
            reservation.release()
        self.stock.clear()
        self.sock.close()


_links: dict[tuple[str, str], _Link] = {}
_lock = _thread.allocate_lock()  # launches of several threads take turns on a connection
_hooked = False
_unavailable_until: dict[tuple[str, str], float] = {}


def _after_fork_in_child() -> None:
    global _lock
    _lock = _thread.allocate_lock()  # it may have been held by another thread of the parent
    for link in _links.values():
        link.close()  # the child's copies: the parent keeps its connection and spares
    _links.clear()


def close_connections() -> None:
    """Closes this process's connections to fork-servers and gives up the reservations it
    holds (their spares exit). Launches afterwards connect again.

    A process done launching may call it so that the servers can go idle sooner (they
    otherwise wait for its unused reservations to expire).

    >>> close_connections()
    """
    with _lock:
        for link in _links.values():
            link.close()
        _links.clear()


def reserve(root: str | os.PathLike[str]) -> Reservation | None:
    """A waiting supervisor from the fork-server of the state root ``root``.

    Starts the server if none runs. Asks ahead for the reservations of the next launches
    (more of them while launches come in quick succession), so a launch rarely waits.

    Returns:
        the reservation, or None if the fork-server is turned off or cannot be used (then start
        the supervisor directly).

    Raises:
        InvalidSpecError: ``$ANYLAUNCH_LOCAL_FORKSERVER_IDLE_S`` is not a positive number.

    >>> reserve("/dev/null/not-a-directory") is None
    True
    """
    global _hooked
    if _disabled() or not hasattr(os, "fork"):
        return None
    _idle_seconds()  # a bad setting is reported by every launch, not only by the first
    root = os.fspath(root)
    key = (root, server_name())
    if _unavailable_until.get(key, 0.0) > time.monotonic():
        return None
    with _lock:
        if not _hooked:
            os.register_at_fork(after_in_child=_after_fork_in_child)
            _hooked = True
        for other, link in list(_links.items()):
            if time.monotonic() - link.last_use > _LINK_IDLE_S:
                del _links[other]  # its spares and socket: let the server go idle
                link.close()
        try:
            return _reserve(key)
        except _StartFailed as e:
            _unavailable_until[key] = time.monotonic() + RETRY_AFTER_S
            _log_fallback(e)
        except (ForkServerError, OSError, ValueError, KeyError, TypeError) as e:
            _log_fallback(e)
    return None


def _reserve(key: tuple[str, str]) -> Reservation:
    root, name = key
    for attempt in range(2):
        link = _links.pop(key, None)
        reused = link is not None
        if link is None:
            try:
                sock = _connect(root, name, REPLY_TIMEOUT_S)
            except _NotRunning:
                _start_server(root, name)
                sock = _connect(root, name, REPLY_TIMEOUT_S)
            link = _Link(sock)
        try:
            reservation = _take(link)
            _links[key] = link
            return reservation
        except BaseException as e:
            link.close()
            if not reused or attempt or not isinstance(e, (ConnectionError, OSError, ValueError)):
                raise
            # the server of an old connection may have exited since (idle): connect again
    raise AssertionError("unreachable")


def _take(link: _Link) -> Reservation:
    """A usable reservation from the link's stock or the server; then asks for the next."""
    import select

    now = time.monotonic()
    # none ahead for a lone launch, a few during a burst of launches
    ahead = _AHEAD_IN_BURST if now - link.last_use < _BURST_GAP_S else 0
    link.last_use = now
    for _ in range(ahead + 3):
        # collect the replies already here without waiting; wait only if there is none
        while link.pending and (not link.stock or select.select([link.sock], [], [], 0)[0]):
            link.stock.append(_recv_reservation(link.sock))
            link.pending -= 1
        if not link.stock:
            _ask(link, 1)
            continue
        reservation = link.stock.pop(0)
        if reservation.usable():
            have = len(link.stock) + link.pending
            if have < ahead:
                # the next launches find them waiting; one message for several (each message
                # wakes the server up)
                _ask(link, 2 * ahead - have)
            return reservation
        reservation.release()  # expired or killed: take another
    raise ForkServerError("the fork-server hands out no usable spare")


def _ask(link: _Link, count: int) -> None:
    _send_frame(link.sock, json.dumps({"op": "reserve", "count": count}).encode())
    link.pending += count


def _recv_reservation(sock: socket.socket) -> Reservation:
    import socket

    flags = getattr(socket, "MSG_CMSG_CLOEXEC", 0)
    # the header alone: the spare's pipe comes with the first bytes of its reply
    data, fds, _, _ = socket.recv_fds(sock, _FRAME.size, 1, flags)
    try:
        if not data:
            raise ConnectionError("the fork-server closed the connection")
        (size,) = _FRAME.unpack(_recv_exact(sock, _FRAME.size, data))
        reply = json.loads(_recv_exact(sock, size))
        if not fds or "error" in reply:
            raise ForkServerError(f"the fork-server gave no spare: {reply!r}")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    os.set_inheritable(fds[0], False)  # never to the launcher's other children
    expires = time.monotonic() + float(reply["left"])
    return Reservation(int(reply["pid"]), reply["start_time"], fds[0], expires)


def _start_server(root: str, name: str) -> None:
    """Starts the server unless another process did; returns once it listens.

    Raises:
        _StartFailed: it could not be started (the reason is in ``ROOT/NAME.log``).
    """
    import fcntl
    import select
    import subprocess
    import threading

    try:
        os.makedirs(root, mode=0o700, exist_ok=True)  # the first launch creates the root
        lock = os.open(
            os.path.join(root, name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
        )
    except OSError as e:
        raise _StartFailed(f"cannot create the fork-server lock: {e}") from e
    try:
        deadline = time.monotonic() + START_TIMEOUT_S + 5
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ForkServerError("timed out waiting for the fork-server lock") from None
                time.sleep(0.005)
        try:
            _connect(root, name, 1.0).close()  # another launcher started it meanwhile
            return
        except _NotRunning:
            pass
        try:
            os.unlink(os.path.join(root, name + ".sock"))  # stale: its server is gone
        except FileNotFoundError:
            pass
        except OSError as e:
            raise _StartFailed(f"cannot remove the stale fork-server socket: {e}") from e
        ready_r, ready_w = os.pipe()
        try:
            log = os.open(
                os.path.join(root, name + ".log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
            )
            try:
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-S",  # only the stdlib and this package (on sys.path via -m and cwd)
                        "-E",
                        "-m",
                        MODULE,
                        root,
                        name,
                        "--idle",
                        repr(_idle_seconds()),
                        "--ready-fd",
                        str(ready_w),
                    ],
                    cwd=_PACKAGE_ROOT,  # `-m` imports this very copy of anylaunch
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # not killed with the launcher's terminal or group
                    close_fds=True,
                    pass_fds=(ready_w,),
                )
            except OSError as e:
                raise _StartFailed(f"cannot start the fork-server: {e}") from e
            finally:
                os.close(log)
            os.close(ready_w)
            ready_w = -1
            # reap it when it exits (after its idle period), so it never lingers as a zombie
            threading.Thread(target=proc.wait, name="reap-forkserver", daemon=True).start()
            readable, _, _ = select.select([ready_r], [], [], START_TIMEOUT_S)
            answer = os.read(ready_r, 64) if readable else b""
        finally:
            os.close(ready_r)
            if ready_w >= 0:
                os.close(ready_w)
        if not answer.startswith(b"ready"):
            why = "exited" if readable else f"did not listen within {START_TIMEOUT_S:g} s"
            raise _StartFailed(f"the fork-server {why}; see {os.path.join(root, name + '.log')}")
    finally:
        os.close(lock)  # releases the lock


def _log_fallback(error: BaseException) -> None:
    import logging

    logging.getLogger(__name__).debug("fork-server unavailable, starting directly: %s", error)


# --- server ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """The server's entry point (see :mod:`anylaunch.schedulers.local.forkserver_server`)."""
    from anylaunch.schedulers.local.forkserver_server import main as server_main

    return server_main(argv)


if __name__ == "__main__":
    sys.exit(main())
