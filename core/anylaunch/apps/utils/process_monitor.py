"""Runs a service until it is told to stop (the program behind ``metrics.tensorboard``).

.. code:: shell-session

    $ python3 -m anylaunch.apps.utils.process_monitor --timeout 3600 \\
        --start_on_file s3://bucket/run1/started --exit_on_file s3://bucket/run1/done \\
        -- tensorboard --bind_all --port 6006 --logdir s3://bucket/run1/logs

It waits for ``--start_on_file`` to exist (if given), starts the command, and stops it when
``--exit_on_file`` appears, when ``--timeout`` seconds have passed since the monitor started,
or when it exits by itself. The files are any fsspec paths, polled every ``--poll_interval``
seconds. A service stopped on purpose (exit file or timeout) ends the monitor with exit code
0; a service that exits by itself ends it with the service's exit code.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time

import fsspec

__all__ = ["main", "monitor", "parse_args"]

#: How long a stopped service may take to exit on SIGTERM before it is killed.
STOP_GRACE_S = 10.0


def _exists(path: str) -> bool:
    fs, fs_path = fsspec.core.url_to_fs(path)
    return bool(fs.exists(fs_path))


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def monitor(
    cmd: list[str],
    timeout: float,
    start_on_file: str = "",
    exit_on_file: str = "",
    poll_interval: float = 1.0,
) -> int:
    """Runs ``cmd`` between its start and exit conditions (see the module's docstring).

    >>> monitor([sys.executable, "-c", "raise SystemExit(3)"], timeout=60, poll_interval=0.1)
    process_monitor: starting [...]
    3

    Args:
        cmd: the service's command line
        timeout: seconds after which the service is stopped (the wait for the start file
            counts)
        start_on_file: fsspec path whose creation starts the service ("": start at once)
        exit_on_file: fsspec path whose creation stops the service ("": none)
        poll_interval: seconds between two looks at the files and the service

    Returns:
        0 if the service was stopped on purpose (or never started before the timeout), else
        its own exit code
    """
    deadline = time.monotonic() + timeout
    if start_on_file:
        print(f"process_monitor: waiting for {start_on_file} to exist", flush=True)
        while not _exists(start_on_file):
            if time.monotonic() >= deadline:
                print("process_monitor: timed out before the start file appeared", flush=True)
                return 0
            time.sleep(poll_interval)
    print(f"process_monitor: starting {cmd}", flush=True)
    proc = subprocess.Popen(cmd)
    try:
        while True:
            code = proc.poll()
            if code is not None:
                return code
            if exit_on_file and _exists(exit_on_file):
                print(f"process_monitor: {exit_on_file} exists, stopping", flush=True)
                _stop(proc)
                return 0
            if time.monotonic() >= deadline:
                print(f"process_monitor: timeout of {timeout}s reached, stopping", flush=True)
                _stop(proc)
                return 0
            time.sleep(poll_interval)
    finally:
        if proc.poll() is None:  # interrupted: never leave the service running
            _stop(proc)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of seconds > 0")
    return value


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parses the command line: the options, then ``--`` and the service's command.

    >>> parse_args(["--timeout", "5", "--", "sleep", "1"]).cmd
    ['sleep', '1']

    Args:
        argv: the arguments (without the program name)

    Returns:
        the parsed arguments
    """
    parser = argparse.ArgumentParser(description="runs a service until it is told to stop")
    parser.add_argument("--timeout", type=_positive_seconds, default=60 * 60.0)
    parser.add_argument("--start_on_file", default="", help="fsspec path that starts it")
    parser.add_argument("--exit_on_file", default="", help="fsspec path that stops it")
    parser.add_argument("--poll_interval", type=_positive_seconds, default=1.0)
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the service's command")
    args = parser.parse_args(argv)
    if args.cmd[:1] == ["--"]:
        args.cmd = args.cmd[1:]
    if not args.cmd:
        parser.error("missing the service's command: add `-- COMMAND [ARGS...]`")
    return args


def main(argv: list[str] | None = None) -> int:
    """The program: parses ``argv`` and runs :func:`monitor`."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return monitor(
        args.cmd, args.timeout, args.start_on_file, args.exit_on_file, args.poll_interval
    )


if __name__ == "__main__":
    sys.exit(main())
