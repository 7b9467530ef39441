"""find_replicas and LogPump on the real local_cwd scheduler (apps are real processes)."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anylaunch.runner import Runner, get_runner
from anylaunch.runner.logs import LogPump, find_replicas
from anylaunch.schedulers import get_scheduler_factories
from anylaunch.schedulers.api import DescribeAppResponse, Stream
from anylaunch.schedulers.local_scheduler import LocalScheduler
from anylaunch.specs import (
    AppDef,
    AppState,
    InvalidSpecError,
    MalformedAppHandleException,
    Role,
    UnknownAppException,
)

TIMEOUT_S = 60


@pytest.fixture(autouse=True)
def local_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def runner() -> Iterator[Runner]:
    with get_runner("logs") as r:
        yield r


def sh_role(name: str, script: str, replicas: int = 1) -> Role:
    return Role(name, image=".", entrypoint="sh", args=["-c", script], num_replicas=replicas)


def run_to_end(runner: Runner, app: AppDef) -> str:
    handle = runner.run(app, "local_cwd")
    status = runner.wait(handle, wait_interval=0.2, timeout=TIMEOUT_S)
    assert status is not None and status.is_terminal()
    return handle


def test_every_replica_of_every_role_is_read_whole_and_prefixed(runner: Runner) -> None:
    app = AppDef(
        "many",
        [
            # several lines each, the last without its newline
            sh_role("a", 'for i in 1 2 3; do echo "a$REPLICA_ID-$i"; done; printf end', 2),
            sh_role("b", "echo b-only"),
        ],
    )
    for role in app.roles:
        role.env["REPLICA_ID"] = "${replica_id}"
    handle = run_to_end(runner, app)

    replicas = find_replicas(runner, handle)
    assert replicas == [("a", 0), ("a", 1), ("b", 0)]
    out = io.StringIO()
    pump = LogPump(runner, handle, replicas, out).start()
    assert pump.join(timeout=TIMEOUT_S)

    assert pump.errors == []
    lines = out.getvalue().splitlines(keepends=True)
    expected = [f"a/{k} a{k}-{i}\n" for k in (0, 1) for i in (1, 2, 3)]
    expected += ["a/0 end\n", "a/1 end\n", "b/0 b-only\n"]
    assert sorted(lines) == sorted(expected)
    for k in (0, 1):  # each replica's lines in order
        assert [line for line in lines if line.startswith(f"a/{k} ")] == [
            f"a/{k} a{k}-1\n",
            f"a/{k} a{k}-2\n",
            f"a/{k} a{k}-3\n",
            f"a/{k} end\n",
        ]


def test_a_callback_gets_lines_while_the_app_runs_and_a_regex_filters(
    runner: Runner, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    script = (
        f"echo keep-1; echo drop; echo keep-2; while [ ! -e {go} ]; do sleep 0.1; done; echo keep-3"
    )
    handle = runner.run(AppDef("tail", [sh_role("w", script)]), "local_cwd")
    got: list[tuple[str, int, str]] = []
    arrived = threading.Event()

    def sink(role: str, k: int, line: str) -> None:
        got.append((role, k, line))
        if line == "keep-2":
            arrived.set()

    pump = LogPump(runner, handle, [("w", 0)], sink, regex="^keep", should_tail=True).start()
    assert arrived.wait(TIMEOUT_S)
    status = runner.status(handle)
    assert status is not None and status.state == AppState.RUNNING  # read while it ran
    assert not pump.join(timeout=0)  # still following

    go.touch()
    assert pump.join(timeout=TIMEOUT_S)
    assert got == [("w", 0, "keep-1"), ("w", 0, "keep-2"), ("w", 0, "keep-3")]
    assert pump.errors == []


class ClosingRunner(Runner):
    closed: list[ClosingRunner] = []

    def close(self) -> None:
        ClosingRunner.closed.append(self)
        super().close()


def test_a_runner_factory_gives_each_reader_a_runner_of_its_own(runner: Runner) -> None:
    handle = run_to_end(runner, AppDef("own", [sh_role("w", "echo hi", replicas=3)]))
    made: list[Runner] = []

    def factory() -> Runner:
        made.append(ClosingRunner("logs", get_scheduler_factories()))
        return made[-1]

    ClosingRunner.closed = []
    got: list[str] = []
    pump = LogPump(
        factory, handle, find_replicas(runner, handle), lambda r, k, line: got.append(line)
    )
    assert pump.start().join(timeout=TIMEOUT_S)

    assert got == ["hi"] * 3
    assert len(made) == 3 and len(set(map(id, made))) == 3
    assert sorted(map(id, ClosingRunner.closed)) == sorted(map(id, made))  # all closed


def test_read_errors_are_kept_not_lost_in_a_thread(runner: Runner) -> None:
    handle = run_to_end(runner, AppDef("err", [sh_role("w", "echo one; echo two")]))

    def failing_sink(role: str, k: int, line: str) -> None:
        raise RuntimeError(f"sink broke on {line}")

    pump = LogPump(runner, handle, [("w", 0), ("nope", 0)], failing_sink).start()
    assert pump.join(timeout=TIMEOUT_S)

    errors = {(role, k): str(e) for role, k, e in pump.errors}
    assert errors[("w", 0)] == "sink broke on one"  # the reader stopped at the first failure
    assert ("nope", 0) in errors


def test_find_replicas_narrows_to_a_role_and_ids_and_names_mistakes(runner: Runner) -> None:
    handle = run_to_end(
        runner, AppDef("roles", [sh_role("trainer", "true", 3), sh_role("ps", "true")])
    )

    assert find_replicas(runner, handle, "trainer") == [("trainer", k) for k in range(3)]
    assert find_replicas(runner, handle, "trainer", [2, 0]) == [("trainer", 2), ("trainer", 0)]
    with pytest.raises(InvalidSpecError, match="Did you mean 'trainer'") as info:
        find_replicas(runner, handle, "trainr")
    assert "use one of: trainer, ps" in str(info.value)
    with pytest.raises(InvalidSpecError, match="role 'trainer' has 3 replica"):
        find_replicas(runner, handle, "trainer", [3])
    with pytest.raises(InvalidSpecError, match="replica_id=-1"):
        find_replicas(runner, handle, "trainer", [-1])
    with pytest.raises(InvalidSpecError, match="needs a role"):
        find_replicas(runner, handle, None, [0])
    with pytest.raises(UnknownAppException):
        find_replicas(runner, "local_cwd://logs/never-launched-1")


class RolelessLocalScheduler(LocalScheduler):
    """local_cwd as seen through a scheduler that cannot describe an app's roles."""

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        desc = super().describe(app_id)
        if desc is not None:
            desc.roles = []
        return desc


def test_find_replicas_falls_back_on_replica_statuses(runner: Runner) -> None:
    handle = run_to_end(runner, AppDef("bare", [sh_role("w", "true", 2)]))
    # a fresh runner: it has no copy of the submitted app to fall back on
    roleless = Runner(
        "logs", {"local_cwd": lambda session_name, **kw: RolelessLocalScheduler(session_name)}
    )
    with roleless:
        app = roleless.describe(handle)
        assert app is not None and app.roles == []
        assert find_replicas(roleless, handle) == [("w", 0), ("w", 1)]


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"app_handle": "not-a-handle"}, MalformedAppHandleException),
        ({"replicas": [("w", -1)]}, "replicas="),
        ({"replicas": [("w", "0")]}, "replicas="),
        ({"replicas": "w/0"}, "replicas="),
        ({"out": 42}, "out='int' is invalid: must be a text stream or a callable"),
        ({"regex": "(["}, "regex='([' is invalid: is not a regular expression"),
        ({"streams": "stdout"}, "streams='stdout' is invalid: must be a Stream"),
        ({"runner": "local_cwd"}, "runner='str' is invalid: must be a Runner"),
    ],
)
def test_log_pump_rejects_bad_arguments(kwargs: dict[str, Any], error: Any) -> None:
    args: dict[str, Any] = {
        "runner": get_runner(),
        "app_handle": "local_cwd://logs/x-1",
        "replicas": [("w", 0)],
        "out": io.StringIO(),
        **kwargs,
    }
    expected = error if isinstance(error, type) else InvalidSpecError
    with pytest.raises(expected) as info:
        LogPump(**args)
    if isinstance(error, str):
        assert error in str(info.value) and "Fix:" in str(info.value)


def test_a_stream_choice_reaches_the_scheduler(runner: Runner) -> None:
    handle = run_to_end(runner, AppDef("streams", [sh_role("w", "echo out; echo err >&2")]))
    got: dict[Stream, list[str]] = {}
    for stream in (Stream.STDOUT, Stream.STDERR):
        got[stream] = []
        pump = LogPump(
            runner,
            handle,
            [("w", 0)],
            lambda r, k, line, s=stream: got[s].append(line),
            streams=stream,
        )
        assert pump.start().join(timeout=TIMEOUT_S)
    assert got == {Stream.STDOUT: ["out"], Stream.STDERR: ["err"]}


def test_join_with_a_timeout_returns_while_a_tail_goes_on(runner: Runner, tmp_path: Path) -> None:
    go = tmp_path / "go"
    handle = runner.run(
        AppDef("slow", [sh_role("w", f"while [ ! -e {go} ]; do sleep 0.1; done")]), "local_cwd"
    )
    pump = LogPump(runner, handle, [("w", 0)], io.StringIO(), should_tail=True).start()
    started = time.monotonic()
    assert pump.join(timeout=0.3) is False
    assert time.monotonic() - started < 5
    go.touch()
    assert pump.join(timeout=TIMEOUT_S)


def test_importing_the_runner_leaves_the_log_readers_unloaded() -> None:
    import subprocess
    import sys

    code = (
        "import sys, anylaunch.runner as r; loaded = 'anylaunch.runner.logs' in sys.modules; "
        "print(loaded, r.LogPump.__module__, r.find_replicas.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.split() == ["False", "anylaunch.runner.logs", "anylaunch.runner.logs"]
