"""The live view of ``run --wait`` through a real pseudo-terminal, and its plain fallback."""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time
from typing import Any

from anylaunch.cli.live import CLEAR_LINE, CURSOR_UP
from anylaunch.specs import parse_app_handle

from .conftest import SUBPROCESS_TIMEOUT_S

_SGR = re.compile(r"\x1b\[[0-9;]*m")  # colours
_TOKEN = re.compile(r"\x1b\[1A|\x1b\[2K|\n|[^\x1b\n]+")


def run_on_a_terminal(
    cli: Any, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """Runs the CLI with stderr on a pseudo-terminal (120 columns) and stdout on a pipe;
    returns the exit code, stdout and what the terminal received (newlines as ``\\n``)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    environ = {**cli.env, "TERM": "xterm", **(env or {})}
    if env is None or "NO_COLOR" not in env:
        environ.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        cli.argv(*args),
        cwd=cli.cwd,
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    received = bytearray()
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            received += chunk
        assert proc.stdout is not None
        stdout = proc.stdout.read().decode()
        code = proc.wait(timeout=SUBPROCESS_TIMEOUT_S)
    finally:
        proc.kill()
        os.close(master)
    return code, stdout, received.decode().replace("\r\n", "\n")


def screen(received: str) -> list[str]:
    """What a terminal shows after ``received``: cursor-up, clear-line and newlines applied
    (colours dropped)."""
    lines: list[str] = [""]
    row = 0
    for token in _TOKEN.findall(_SGR.sub("", received)):
        if token == CURSOR_UP:
            row = max(row - 1, 0)
        elif token == CLEAR_LINE:
            lines[row] = ""
        elif token == "\n":
            row += 1
            if row == len(lines):
                lines.append("")
        else:
            lines[row] += token
    return [line for line in lines if line]


def test_run_wait_on_a_terminal_redraws_one_line_per_role(cli: Any) -> None:
    code, stdout, received = run_on_a_terminal(
        cli, "run", "--wait", "utils.sh", "--num_replicas", "2", "--", "sh", "-c", "sleep 2"
    )

    assert code == 0, received
    handle = stdout.strip()
    parse_app_handle(handle)  # stdout still carries only the handle
    assert CURSOR_UP + CLEAR_LINE in received  # redrawn in place...
    shown = screen(received)
    status_lines = [line for line in shown if line.startswith("sh ")]
    # ...so the screen ends with exactly one line for the role: its final state
    assert len(status_lines) == 1, shown
    assert status_lines[0].split()[:8] == [
        "sh", "SUCCEEDED", "0/2", "running", "2/2", "finished", "0/2", "failed",
    ]  # fmt: skip
    assert re.fullmatch(r"\d+s", status_lines[0].split()[-1])
    assert "\x1b[32m" in received  # a succeeded role is green
    assert shown[-1] == f"anylaunch: {handle} ended SUCCEEDED"


def test_run_log_on_a_terminal_writes_log_lines_above_the_status(cli: Any) -> None:
    code, _, received = run_on_a_terminal(
        cli, "run", "--log", "utils.sh", "--num_replicas", "2", "--", "sh", "-c",
        "echo first-${replica_id}; sleep 2; echo second-${replica_id}",
    )  # fmt: skip

    assert code == 0, received
    shown = screen(received)
    logs = [line for line in shown if line.startswith("sh/")]
    assert sorted(logs) == ["sh/0 first-0", "sh/0 second-0", "sh/1 first-1", "sh/1 second-1"]
    status_lines = [line for line in shown if line.startswith("sh ")]
    assert len(status_lines) == 1, shown  # never left behind between log lines
    assert status_lines[0].split()[1] == "SUCCEEDED"
    # the status sits below every log line
    assert shown.index(status_lines[0]) > max(shown.index(line) for line in logs)


def test_no_color_and_dumb_terminals_get_plain_lines(cli: Any) -> None:
    for env in ({"NO_COLOR": "1"}, {"TERM": "dumb"}):
        code, _, received = run_on_a_terminal(cli, "run", "--wait", "utils.echo", env=env)

        assert code == 0, received
        assert "\x1b[" not in received, env
        lines = received.splitlines()
        assert any(re.match(r"anylaunch: echo +SUCCEEDED +0/1 running +1/1 finished", line)
                   for line in lines), lines  # fmt: skip


def test_run_wait_off_a_terminal_prints_a_plain_line_per_change(cli: Any) -> None:
    result = cli("run", "--wait", "utils.sh", "--", "sh", "-c", "sleep 3")

    assert result.returncode == 0, result.stderr
    assert "\x1b[" not in result.stderr
    states = [
        line.split()[2] for line in result.stderr.splitlines() if line.startswith("anylaunch: sh ")
    ]
    # one line per change, however many polls saw the same state
    assert states[-1] == "SUCCEEDED"
    assert "RUNNING" in states
    assert all(a != b for a, b in itertools.pairwise(states)), states


def test_ctrl_c_of_run_wait_json_still_prints_the_handle_and_last_state(cli: Any) -> None:
    proc = cli.popen("run", "--wait", "--json", "utils.sh", "sleep", "60")
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the plain view says when the app runs
            if line.startswith("anylaunch: sh") and "RUNNING" in line:
                break
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    data = json.loads(stdout)
    assert proc.returncode == 130, stderr
    assert data["state"] == "RUNNING"
    assert f"anylaunch cancel {data['app_handle']}" in stderr
    assert cli("cancel", data["app_handle"]).returncode == 0


TWO_ROLES = '''
from anylaunch.specs import AppDef, Role


def two() -> AppDef:
    """Two roles: a trainer that sleeps and a ps that fails."""
    return AppDef("two", [
        Role("trainer", image=".", entrypoint="sh", args=["-c", "sleep 30"], num_replicas=2),
        Role("ps", image=".", entrypoint="sh", args=["-c", "sleep 1; exit 1"]),
    ])
'''


def test_every_role_keeps_one_line_until_the_end(cli: Any) -> None:
    (cli.cwd / "two.py").write_text(TWO_ROLES)

    code, _, received = run_on_a_terminal(cli, "run", "--wait", "two.py:two")

    assert code == 1, received
    shown = screen(received)
    end = next(i for i, line in enumerate(shown) if line.endswith("ended FAILED"))
    live = [line.split() for line in shown[:end] if line.split()[0] in ("trainer", "ps")]
    assert [words[0] for words in live] == ["trainer", "ps"], shown  # one line each
    roles = {words[0]: words for words in live}
    assert roles["ps"][1:8] == ["FAILED", "0/1", "running", "0/1", "finished", "1/1", "failed"]
    # the failing ps ends the app: its trainers are stopped, none succeeded
    assert roles["trainer"][4] == "0/2" and roles["trainer"][6] == "2/2", roles
    assert "\x1b[31m" in received  # failed roles are red
