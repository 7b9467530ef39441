"""Daemons for deployment tests: started in their own session, stopped by PID (the whole
process group, SIGTERM then SIGKILL), loopback only, on free ports."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(
    condition: Callable[[], object], timeout: float, what: str, interval: float = 0.5
) -> object:
    """Polls ``condition`` until it returns something truthy; fails naming ``what``."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
        except Exception as e:  # the thing waited for may not answer yet
            last_error = e
        else:
            if value:
                return value
        time.sleep(interval)
    raise TimeoutError(
        f"timed out after {timeout:.0f} s waiting for {what} (last error: {last_error!r})"
    )


class Daemon:
    """One long-running process of a deployment, logging to ``{logs}/{name}.log``."""

    def __init__(
        self, name: str, argv: Sequence[str], env: Mapping[str, str], logs: Path, cwd: Path
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = logs / f"{name}.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as one
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM to the process group, SIGKILL after ``grace`` seconds."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            try:
                self.process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # children that left the group (double fork) are the deployment's to find by name
        self._log.close()


def descendants(pid: int) -> list[int]:
    """The PIDs of every live descendant of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cmdline(pid: int) -> str:
    """A process's command line (its title, if it set one), '' once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def environ(pid: int) -> dict[str, str]:
    """A process's environment (as it started), {} once it is gone or not ours to read."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0") if item)
    return {key: value for key, _, value in pairs}


def kill_tree(pid: int) -> list[int]:
    """SIGKILLs ``pid`` and every descendant at once (a host lost: nothing runs a handler);
    returns the PIDs killed. The tree is read before the first kill, so no child is
    reparented away first."""
    tree = [pid, *descendants(pid)]
    for member in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, signal.SIGKILL)
    return tree
