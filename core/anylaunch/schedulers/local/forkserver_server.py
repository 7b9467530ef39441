"""The fork-server process of :mod:`anylaunch.schedulers.local.forkserver` (its protocol,
client side and design notes are there): ``python -S -E -m
anylaunch.schedulers.local.forkserver_server ROOT NAME``. Single-threaded: it keeps spares
forked ahead of time, hands their pipes to launchers, reaps its children and exits when idle.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import sys
import time

from anylaunch.schedulers.local.forkserver import (
    _BURST_GAP_S,
    _FRAME,
    _GATE_BURST_S,
    _GATE_MAX_HOLD_S,
    _GATE_PAUSE_S,
    _POOL_IN_BURST,
    _POOL_LOW,
    DEFAULT_IDLE_S,
    MODULE,
    SPARE_TTL_S,
    _read_frame_from_pipe,
    _recv_frame,
    _send_frame,
)

TYPE_CHECKING = False  # the server starts with this module: keep typing out of it
if TYPE_CHECKING:
    import socket


class _Spare:
    """A child forked ahead of time, waiting on a pipe for the app it will supervise."""

    def __init__(self, pid: int, start_time: str | None, pipe: int) -> None:
        self.pid = pid
        self.start_time = start_time
        self.pipe = pipe  # the write end: handed to the launcher that reserves it
        self.born = time.monotonic()


class _Server:
    def __init__(self, name: str, idle_s: float) -> None:
        import socket

        self.path = name + ".sock"  # relative: the server runs in the state root
        self.idle_s = idle_s
        self.children: set[int] = set()
        self.clients: list[socket.socket] = []
        self.spares: list[_Spare] = []  # waiting to be reserved, oldest first
        self.started = self.last_request = time.monotonic()
        # While launches come in quick succession, spares forked meanwhile hold their app's
        # start until the launches pause: the launching process keeps the CPU. The gate is
        # a pipe they inherit; closing its write end opens it (so does the server's death).
        self.gate: tuple[int, int] | None = None
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        self.listener.bind(tmp)
        os.chmod(tmp, 0o600)
        self.listener.listen(128)
        os.rename(tmp, self.path)  # clients see the socket only once it accepts
        self.inode = os.stat(self.path).st_ino

    def reachable(self) -> bool:
        """False once the socket path is gone or belongs to another server."""
        try:
            return os.stat(self.path).st_ino == self.inode
        except OSError:
            return False

    def reap(self) -> None:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if not pid:
                return
            self.children.discard(pid)
            for spare in self.spares:
                if spare.pid == pid:
                    self.drop_spare(spare)  # it died waiting (someone killed it)

    def drop_spare(self, spare: _Spare) -> None:
        self.spares.remove(spare)
        os.close(spare.pipe)  # EOF: a waiting spare exits

    def busy(self) -> bool:
        """True while a supervisor (or a reserved spare) it forked runs."""
        return bool(self.children - {spare.pid for spare in self.spares})

    def serve(self) -> None:
        import select

        while True:
            for spare in list(self.spares):
                if time.monotonic() - spare.born > SPARE_TTL_S / 2:
                    self.drop_spare(spare)  # hand out spares with at least half their time left
            # Requests first; the pool is refilled between them (no launch waits for a fork):
            # while launches come in quick succession, several spares at a time (after each
            # fork, the first write to each page this process touches copies it: forking in a
            # row pays that once per batch instead of once per spare).
            burst = self.last_request > self.started and (
                time.monotonic() - self.last_request < _BURST_GAP_S
            )
            target = _POOL_IN_BURST if burst else 1
            refill = len(self.spares) < (_POOL_LOW if burst else 1)
            timeout = 0.0 if refill else 1.0
            if self.gate is not None:
                pause = time.monotonic() - self.last_request
                if pause >= _GATE_PAUSE_S:
                    self.open_gate()
                else:
                    timeout = min(timeout, _GATE_PAUSE_S - pause)
            readable, _, _ = select.select([self.listener, *self.clients], [], [], timeout)
            self.reap()
            for sock in readable:
                if sock is self.listener:
                    self.accept()
                else:
                    self.serve_client(sock)
            if readable:
                continue
            if refill:
                self.fork_spares(target - len(self.spares))
                continue
            idle = time.monotonic() - self.last_request >= self.idle_s
            if not self.busy() and (idle or not self.reachable()):
                break
        # No new client finds us once the path is gone. Clients still connected see the end
        # of their connection and start a new server: nothing was assigned through this one.
        if self.reachable():
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        self.listener.close()
        for sock in self.clients:
            sock.close()
        for spare in list(self.spares):
            self.drop_spare(spare)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(spare.pid, 0)
        self.open_gate()

    def open_gate(self) -> None:
        if self.gate is not None:
            for fd in self.gate:
                os.close(fd)  # the spares hold their copy of the read end: EOF for them
            self.gate = None

    def accept(self) -> None:
        import socket

        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        conn.settimeout(5.0)  # a client that stalls mid-message is dropped
        if hasattr(socket, "SO_PEERCRED"):
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            if struct.unpack("3i", creds)[1] != os.getuid():
                conn.close()  # the socket is 0600 in a private dir: never expected
                return
        self.clients.append(conn)

    def serve_client(self, conn: socket.socket) -> None:
        import socket

        try:
            message = _recv_frame(conn)
            if message is None:
                raise ConnectionError("closed")  # the launcher is done (or exited)
            now = time.monotonic()
            if self.gate is None and now - self.last_request < _GATE_BURST_S:
                self.gate = os.pipe()  # a burst: spares forked from now on wait for a pause
            self.last_request = now
            request = json.loads(message)
            if not isinstance(request, dict) or request.get("op") != "reserve":
                raise ValueError(f"unknown request {request!r}")
            count = request.get("count", 1)
            if not isinstance(count, int) or not 0 < count <= 16:
                raise ValueError(f"bad count in {request!r}")
            # one reply per reservation, each carrying its spare's pipe
            for _ in range(count):
                if not self.spares:
                    self.fork_spares(count)
                if not self.spares:
                    _send_frame(conn, b'{"error": "cannot fork"}')
                    continue
                spare = self.spares.pop(0)
                reply = {
                    "pid": spare.pid,
                    "start_time": spare.start_time,
                    "left": SPARE_TTL_S - (time.monotonic() - spare.born),
                    "server_pid": os.getpid(),
                }
                body = json.dumps(reply).encode()
                try:
                    socket.send_fds(conn, [_FRAME.pack(len(body)) + body], [spare.pipe])
                finally:
                    os.close(spare.pipe)  # the launcher holds it now (or nobody: it exits)
        except Exception as e:  # one bad client must not stop the server
            if not isinstance(e, ConnectionError):
                _print_exception()
            self.clients.remove(conn)
            conn.close()

    def fork_spares(self, count: int) -> None:
        from anylaunch.schedulers.local.state import process_start_time

        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # or the children would write the parent's buffered output again
        forked: list[tuple[int, int]] = []
        for _ in range(count):  # a tight loop: see serve()
            # (an environment larger than the pipe's 64 KiB makes the launcher's write wait
            # for a spare held at the gate: the gate opens once that launcher pauses)
            read_end, write_end = os.pipe()
            try:
                pid = os.fork()
            except OSError:
                _print_exception()
                os.close(read_end)
                os.close(write_end)
                break
            if pid == 0:
                os.close(write_end)
                for _, other in forked:
                    os.close(other)  # the pipes of the spares forked just before
                self.become_supervisor(read_end)
            os.close(read_end)
            forked.append((pid, write_end))
        for pid, write_end in forked:
            self.children.add(pid)
            self.spares.append(_Spare(pid, process_start_time(pid), write_end))

    def become_supervisor(self, pipe: int) -> None:
        """Runs in the forked child: waits for its app, then supervises it; never returns."""
        code = 1
        try:
            # First what must not outlive the server in this child: its listening socket and
            # connections (clients would wait on them), the other spares' pipes and the gate's
            # write end (their readers wait for EOF). The rest waits for the assignment.
            for sock in (self.listener, *self.clients):
                sock.close()
            for spare in self.spares:
                os.close(spare.pipe)
            gate = -1
            if self.gate is not None:
                gate = self.gate[0]
                os.close(self.gate[1])
            import select

            from anylaunch.schedulers.local import supervisor

            born = time.monotonic()
            if gate < 0:
                # a spare waiting for the next lone launch copies now the pages every
                # supervisor writes to, not when its app starts (during a burst it would
                # take the CPU from the server and the launcher: it waits at the gate)
                with contextlib.suppress(Exception):
                    supervisor.prepare_spare()
            if gate >= 0:
                # the gate first: a launcher assigning us meanwhile wakes nobody
                select.select([gate], [], [], _GATE_MAX_HOLD_S)
                os.close(gate)
            message = _read_frame_from_pipe(pipe, SPARE_TTL_S - (time.monotonic() - born))
            os.close(pipe)
            if message is None:
                code = 0  # never assigned
                return
            os.setsid()  # its own session: independent of the server and of other apps
            os.chdir("/")  # pin no directory (replicas run in their own)
            msg = json.loads(message)
            app_dir, env, umask = msg["app_dir"], msg["env"], msg["umask"]
            # (the env's entries are checked where they are used: by posix_spawn)
            if not (
                isinstance(app_dir, str)
                and os.path.isabs(app_dir)
                and isinstance(env, dict)
                and isinstance(umask, int)
            ):
                raise ValueError("malformed assignment")  # (not quoted: it holds the env)
            from anylaunch.schedulers.local import state as ls
            from anylaunch.schedulers.local import supervisor

            log = os.open(
                os.path.join(app_dir, ls.SUPERVISOR_LOG),
                os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                0o600,
            )
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(null)
            os.close(log)
            os.umask(umask)
            # the replicas get the launcher's environment; this process keeps the server's
            # (rewriting os.environ here would cost more than the rest of the start)
            code = supervisor.main([app_dir], env=env)
        except BaseException:
            _print_exception()
        finally:
            with contextlib.suppress(BaseException):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)


def _print_exception() -> None:
    """Prints the current exception to stderr (the server's or the supervisor's log)."""
    with contextlib.suppress(BaseException):
        import traceback

        traceback.print_exc()


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m anylaunch.schedulers.local.forkserver ROOT NAME [--idle S]
    [--ready-fd FD]``; writes ``ready`` to FD once it listens on ``ROOT/NAME.sock``."""
    args = sys.argv[1:] if argv is None else argv
    usage = f"usage: python -m {MODULE} ROOT NAME [--idle SECONDS] [--ready-fd FD]"
    options = dict(zip(args[2::2], args[3::2], strict=False))
    if len(args) < 2 or len(args) % 2 or set(options) - {"--idle", "--ready-fd"}:
        print(usage, file=sys.stderr)
        return 2
    root, name = args[0], args[1]
    idle_s = float(options.get("--idle", DEFAULT_IDLE_S))
    ready_fd = int(options.get("--ready-fd", -1))
    # what every supervisor needs, imported once here instead of once per app
    import fcntl  # noqa: F401  (state.app_lock imports it lazily)
    import gc
    import select  # noqa: F401

    from anylaunch.schedulers.local import supervisor

    supervisor.warm_up()

    try:
        os.chdir(root)
        server = _Server(name, idle_s)
    except OSError as e:
        print(f"fork-server: cannot listen in {root}: {e}", file=sys.stderr)
        return 1
    if ready_fd >= 0:
        with contextlib.suppress(OSError):  # the launcher may have given up waiting
            os.write(ready_fd, b"ready\n")
        os.close(ready_fd)  # before any fork: no child may hold it
    gc.freeze()  # the children share these objects' pages: keep their GC from touching them
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
