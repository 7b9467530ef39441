"""local_cwd on real processes: supervisor, retries, cancel, crash recovery, logs, hostile args.

Every test gets its own state dir through ANYLAUNCH_LOCAL_STATE_DIR. Waits poll with a generous
deadline as a safety net only: nothing asserts on durations.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from anylaunch.schedulers import get_scheduler_factory
from anylaunch.schedulers.api import Scheduler, Stream
from anylaunch.schedulers.common.tail import follow, iter_lines
from anylaunch.schedulers.local import state as ls
from anylaunch.schedulers.local.request import LocalSchedulerError
from anylaunch.schedulers.local_scheduler import LocalAppRequest, LocalScheduler, create_scheduler
from anylaunch.specs import AppDef, AppState, Resource, RetryPolicy, Role
from anylaunch.specs.errors import InvalidSpecError, UnknownAppException
from tests.schedulers import local_previous_version as old
from tests.schedulers.local_helpers import (
    CFG,
    DEADLINE_S,
    PY,
    gone,
    py_role,
    replica_pids,
    run,
    wait_done,
    wait_running,
    wait_until,
)

HERE = Path(__file__).parent


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "state"
    monkeypatch.setenv(ls.STATE_DIR_ENV, str(root))
    return root


@pytest.fixture
def sched(state_dir: Path) -> Iterator[LocalScheduler]:
    scheduler = create_scheduler("test")
    yield scheduler
    # never leave processes behind, whatever the test did
    for app in scheduler.list():
        if not app.state.is_terminal():
            scheduler.cancel(app.app_id)
            wait_done(scheduler, app.app_id)


# --- running apps ----------------------------------------------------------------------------


def test_registry_creates_local_cwd(state_dir: Path) -> None:
    sched = get_scheduler_factory("local_cwd")("reg")
    assert isinstance(sched, LocalScheduler)
    assert sched.backend == "local_cwd"
    opts = {name: opt for name, opt in sched.run_opts()}
    assert {"log_dir", "prepend_cwd", "auto_set_cuda_visible_devices", "cancel_grace_s"} <= set(
        opts
    )
    assert "PATH" in opts["prepend_cwd"].help  # help text comes from the attribute docstring


def test_single_replica_succeeds(sched: LocalScheduler) -> None:
    app_id = run(sched, py_role("w", "print('hello')\nprint('bye', end='')"), name="my echo/app")
    assert app_id.startswith("my-echo-app-")
    desc = wait_done(sched, app_id)
    assert desc.state == AppState.SUCCEEDED
    assert desc.num_restarts == 0
    [role_status] = desc.roles_statuses
    assert [(r.role, r.id, r.state, r.hostname) for r in role_status.replicas] == [
        ("w", 0, AppState.SUCCEEDED, "localhost")
    ]
    assert [r.name for r in desc.roles] == ["w"]
    # lines keep their newline; a last line without one stays as printed
    assert list(sched.log_iter(app_id, "w")) == ["hello\n", "bye"]


def test_roles_without_resources_validate(sched: LocalScheduler) -> None:
    app = AppDef("r", roles=[Role("w", image=".", entrypoint="true")])
    assert app.roles[0].resource.is_null()
    sched._validate(app, "local_cwd", {})  # the base class would reject it


def test_multi_role_replicas_macros_and_rank0(
    sched: LocalScheduler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = tmp_path / "image"
    work = tmp_path / "work"
    out = tmp_path / "out"
    for d in (image, work, out):
        d.mkdir()
    monkeypatch.chdir(work)
    code = (
        "import json, os, sys\n"
        "out, role, rid, app_id, img_root, rank0_name = sys.argv[1:]\n"
        "json.dump({'rid': rid, 'app_id': app_id, 'img_root': img_root, 'cwd': os.getcwd(),\n"
        "           'rank0_name': rank0_name, 'rank0': os.environ[rank0_name],\n"
        "           'env_rid': os.environ['RID']}, open(f'{out}/{role}-{rid}.json', 'w'))\n"
    )
    macro_args = ["${replica_id}", "${app_id}", "${img_root}", "${rank0_env}"]
    trainer = py_role(
        "trainer",
        code,
        str(out),
        "trainer",
        *macro_args,
        image=str(image),
        num_replicas=3,
        env={"RID": "r${replica_id}"},
    )
    ps = py_role(
        "ps",
        code,
        str(out),
        "ps",
        *macro_args,
        image="registry.example/img:1",
        env={"RID": "r${replica_id}"},
    )
    app_id = run(sched, trainer, ps)
    desc = wait_done(sched, app_id)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert {rs.role: len(rs.replicas) for rs in desc.roles_statuses} == {"trainer": 3, "ps": 1}
    for role, count, cwd in (("trainer", 3, image), ("ps", 1, work)):
        for i in range(count):
            got = json.loads((out / f"{role}-{i}.json").read_text())
            assert got == {
                "rid": str(i),
                "app_id": app_id,
                "img_root": str(cwd),  # an existing-directory image is the working dir
                "cwd": str(cwd),
                "rank0_name": "ANYLAUNCH_RANK0_HOST",
                "rank0": "localhost",
                "env_rid": f"r{i}",
            }


def test_failure_reports_replica_and_exit_code(sched: LocalScheduler) -> None:
    code = "import sys\nprint('about to fail', file=sys.stderr)\nsys.exit(3)"
    app_id = run(sched, py_role("ok", "pass"), py_role("bad", code, num_replicas=2))
    desc = wait_done(sched, app_id)
    assert desc.state == AppState.FAILED
    assert "bad/" in desc.msg and "exit code 3" in desc.msg
    error = json.loads(desc.structured_error_msg)
    assert error["exit_code"] == 3 and error["role"] == "bad"
    assert "about to fail" in error["stderr_tail"]
    bad = next(rs for rs in desc.roles_statuses if rs.role == "bad")
    assert AppState.FAILED in {r.state for r in bad.replicas}


def test_unstartable_entrypoint_fails_clearly(sched: LocalScheduler) -> None:
    app_id = run(sched, Role("w", image=".", entrypoint="/no/such/program-xyz"))
    desc = wait_done(sched, app_id)
    assert desc.state == AppState.FAILED
    assert "could not start" in desc.msg
    assert any(
        "/no/such/program-xyz" in line
        for line in sched.log_iter(app_id, "w", streams=Stream.STDERR)
    )


@pytest.mark.parametrize(
    ("policy", "expected_starts"),
    [
        (RetryPolicy.REPLICA, {"flaky-0": 2, "flaky-1": 1, "steady-0": 1}),
        (RetryPolicy.ROLE, {"flaky-0": 2, "flaky-1": 2, "steady-0": 1}),
        (RetryPolicy.APPLICATION, {"flaky-0": 2, "flaky-1": 2, "steady-0": 2}),
    ],
)
def test_retry_policies_restart_what_they_say(
    sched: LocalScheduler, tmp_path: Path, policy: RetryPolicy, expected_starts: dict[str, int]
) -> None:
    starts = tmp_path / "starts"
    starts.mkdir()
    script = str(HERE / "local_fail_once.py")
    marker = str(tmp_path / "failed-once")
    # replica 0 of "flaky" fails on its first run, once all 3 replicas started; the others
    # are still running then (a ROLE/APPLICATION restart must stop them first)
    wrapper = (
        "import os, sys\n"
        "script, starts, rid, marker = sys.argv[1:]\n"
        "mode = ['fail', '3'] if rid == '0' else ['wait']\n"
        "os.execv(sys.executable, [sys.executable, script, starts, f'flaky-{rid}', marker, *mode])\n"
    )
    flaky = py_role(
        "flaky",
        wrapper,
        script,
        str(starts),
        "${replica_id}",
        marker,
        num_replicas=2,
        max_retries=1,
        retry_policy=policy,
    )
    steady = Role(
        "steady",
        image=".",
        entrypoint=PY,
        args=[script, str(starts), "steady-${replica_id}", marker, "wait"],
    )
    app_id = run(sched, flaky, steady)
    desc = wait_done(sched, app_id)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert desc.num_restarts == 1
    counts: dict[str, int] = {}
    for f in starts.iterdir():
        key = f.name.rsplit("-", 1)[0]
        counts[key] = counts.get(key, 0) + 1
    assert counts == expected_starts


def test_retries_exhausted_fail(sched: LocalScheduler, tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    starts.mkdir()
    code = (
        "import sys, uuid\nopen(sys.argv[1] + '/s-' + uuid.uuid4().hex, 'w').close()\nsys.exit(7)"
    )
    role = py_role("w", code, str(starts), max_retries=2, retry_policy=RetryPolicy.REPLICA)
    desc = wait_done(sched, run(sched, role))
    assert desc.state == AppState.FAILED
    assert desc.num_restarts == 2
    assert len(list(starts.iterdir())) == 3
    assert "exit code 7" in desc.msg and "after 2 retries" in desc.msg


# --- cancel -------------------------------------------------------------------------------


def test_cancel_stops_every_process_of_the_app(sched: LocalScheduler, tmp_path: Path) -> None:
    child_pid_file = tmp_path / "child.pid"
    with_child = Role(
        "sh",
        image=".",
        entrypoint="/bin/sh",
        args=["-c", f'sleep 60 & echo $! > "{child_pid_file}"; sleep 60'],
    )
    stubborn = Role(
        "stubborn", image=".", entrypoint="/bin/sh", args=["-c", 'trap "" TERM; sleep 60']
    )
    app_id = run(
        sched,
        with_child,
        stubborn,
        py_role("sleepers", "import time; time.sleep(60)", num_replicas=2),
    )
    wait_until(child_pid_file.exists, "the background child to start")
    wait_running(sched, app_id)
    pids = replica_pids(sched, app_id)
    assert len(pids) == 4
    child = int(wait_until(lambda: child_pid_file.read_text().strip(), "child pid"))

    sched.cancel(app_id)
    desc = wait_done(sched, app_id)
    assert desc.state == AppState.CANCELLED
    assert all(r.state == AppState.CANCELLED for rs in desc.roles_statuses for r in rs.replicas)
    # CANCELLED is written only once every process group is gone (the stubborn one via SIGKILL)
    assert [p for p in [*pids, child] if not gone(p)] == []

    sched.cancel(app_id)  # cancelling a finished app is a no-op
    assert sched.describe(app_id).state == AppState.CANCELLED  # type: ignore[union-attr]


def test_cancel_of_finished_app_is_noop(sched: LocalScheduler) -> None:
    app_id = run(sched, Role("w", image=".", entrypoint="true"))
    assert wait_done(sched, app_id).state == AppState.SUCCEEDED
    sched.cancel(app_id)
    assert sched.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    assert not (sched.state_root() / app_id / ls.CANCEL_FILE).exists()


def test_cancel_from_another_process(sched: LocalScheduler) -> None:
    app_id = run(sched, Role("w", image=".", entrypoint="sleep", args=["60"]))
    [pid] = replica_pids(sched, app_id)
    code = (
        "import sys\nfrom anylaunch.schedulers.local_scheduler import create_scheduler\n"
        "create_scheduler('other').cancel(sys.argv[1])\n"
    )
    subprocess.run([PY, "-c", code, app_id], check=True, timeout=DEADLINE_S)
    assert wait_done(sched, app_id).state == AppState.CANCELLED
    assert gone(pid)


# --- crashes ------------------------------------------------------------------------------


def test_app_survives_sigkill_of_the_launching_process(state_dir: Path) -> None:
    launcher = subprocess.Popen(
        [PY, str(HERE / "local_launcher.py"), "8"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert launcher.stdout is not None
        app_id = launcher.stdout.readline().strip()
        os.kill(launcher.pid, signal.SIGKILL)
    finally:
        launcher.kill()
        launcher.wait()
    assert launcher.returncode == -signal.SIGKILL
    fresh = create_scheduler("fresh")  # a new instance in another process than the launcher
    desc = wait_done(fresh, app_id)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert list(fresh.log_iter(app_id, "w")) == [f"tick {i}\n" for i in range(8)]
    [listed] = fresh.list()
    assert (listed.app_id, listed.state, listed.name) == (app_id, AppState.SUCCEEDED, "launched")
    assert listed.app_handle == f"local_cwd://launcher/{app_id}"


def test_dead_supervisor_is_detected(sched: LocalScheduler) -> None:
    app_id = run(sched, Role("w", image=".", entrypoint="sleep", args=["60"], num_replicas=2))
    desc = wait_running(sched, app_id)
    pids = replica_pids(sched, app_id)
    os.kill(int(desc.metadata["supervisor_pid"]), signal.SIGKILL)
    desc = wait_done(sched, app_id)
    assert desc.state == AppState.FAILED
    assert desc.msg.startswith("supervisor died")
    wait_until(lambda: all(gone(p) for p in pids), "leftover replicas to be killed")


def test_cancel_after_supervisor_died_kills_groups_itself(sched: LocalScheduler) -> None:
    app_id = run(sched, Role("w", image=".", entrypoint="sleep", args=["60"]))
    pids = replica_pids(sched, app_id)
    supervisor = ls.read_json(sched.state_root() / app_id / ls.STATE_FILE)["supervisor"]  # type: ignore[index]
    os.kill(supervisor["pid"], signal.SIGKILL)
    wait_until(lambda: not ls.is_alive(supervisor["pid"], supervisor["start_time"]), "death")
    sched._cancel_existing(app_id)  # what cancel() does for an app it still saw running
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED
    assert all(gone(p) for p in pids)


def test_supervisor_that_cannot_start_gives_clear_error(
    sched: LocalScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = sched.submit_dryrun(AppDef("x", roles=[Role("w", image=".", entrypoint="true")]), CFG)
    monkeypatch.setattr(sys, "executable", "/bin/false")  # an interpreter that cannot run it
    app_id = sched.schedule(info)  # returns at once; the failure shows in describe
    desc = wait_done(sched, app_id)
    assert desc.state == AppState.FAILED
    assert "supervisor died" in desc.msg and "supervisor.log" in desc.msg


def test_app_whose_supervisor_never_started_fails(state_dir: Path) -> None:
    # what a launcher killed between creating the app dir and starting the supervisor leaves
    sched = LocalScheduler("t", start_timeout=0.2)
    info = sched.submit_dryrun(AppDef("x", roles=[Role("w", image=".", entrypoint="true")]), CFG)
    sched._create_app_dir(info.request, Path(info.request.app_dir))
    app_id = info.request.app_id
    assert [a.app_id for a in sched.list()] == [app_id]
    desc = wait_done(sched, app_id)
    assert desc.state == AppState.FAILED
    assert "supervisor never started" in desc.msg


def test_same_request_cannot_be_scheduled_twice(sched: LocalScheduler) -> None:
    info = sched.submit_dryrun(AppDef("x", roles=[Role("w", image=".", entrypoint="true")]), CFG)
    sched.schedule(info)
    with pytest.raises(LocalSchedulerError, match="already scheduled"):
        sched.schedule(info)


# --- logs ---------------------------------------------------------------------------------


def test_log_streams_and_regex(sched: LocalScheduler) -> None:
    code = (
        "import sys\n"
        "for i in range(3):\n"
        "    print(f'out {i}', flush=True)\n"
        "    print(f'err {i}', file=sys.stderr, flush=True)\n"
    )
    app_id = run(sched, py_role("w", code, num_replicas=2))
    wait_done(sched, app_id)
    assert list(sched.log_iter(app_id, "w", 1, streams=Stream.STDOUT)) == [
        f"out {i}\n" for i in range(3)
    ]
    assert list(sched.log_iter(app_id, "w", 0, streams=Stream.STDERR)) == [
        f"err {i}\n" for i in range(3)
    ]
    combined = list(sched.log_iter(app_id, "w", 0))
    assert sorted(combined) == sorted(
        [f"out {i}\n" for i in range(3)] + [f"err {i}\n" for i in range(3)]
    )
    # within each stream the combined log keeps the order
    assert [line for line in combined if line.startswith("out")] == [f"out {i}\n" for i in range(3)]
    assert list(sched.log_iter(app_id, "w", 0, regex=r"^err [02]")) == ["err 0\n", "err 2\n"]
    assert list(sched.log_iter(app_id, "w", 0, regex="1", streams="stdout")) == ["out 1\n"]  # type: ignore[arg-type]


def test_tail_sees_lines_while_running(sched: LocalScheduler, tmp_path: Path) -> None:
    go = tmp_path / "go"
    code = (
        "import os, sys, time\n"
        "print('first', flush=True)\n"
        "while not os.path.exists(sys.argv[1]):\n"
        "    time.sleep(0.01)\n"
        "print('second', flush=True)\n"
        "print('third: match', flush=True)\n"
    )
    app_id = run(sched, py_role("w", code, str(go)))
    lines = iter(sched.log_iter(app_id, "w", should_tail=True))
    assert next(lines) == "first\n"
    # the replica is blocked until `go` exists: this line was read while it ran
    assert sched.describe(app_id).state == AppState.RUNNING  # type: ignore[union-attr]
    go.touch()
    assert list(lines) == ["second\n", "third: match\n"]  # ends once the app ended
    assert sched.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    tail = sched.log_iter(app_id, "w", regex="match", should_tail=True)
    assert list(tail) == ["third: match\n"]


def test_since_and_until_use_the_time_index(sched: LocalScheduler, tmp_path: Path) -> None:
    go = tmp_path / "go"
    code = (
        "import os, sys, time\n"
        "print('early 1'); print('early 2', flush=True)\n"
        "while not os.path.exists(sys.argv[1]):\n"
        "    time.sleep(0.01)\n"
        "print('late 1'); print('late 2', flush=True)\n"
    )
    app_id = run(sched, py_role("w", code, str(go)))
    wait_until(lambda: len(list(sched.log_iter(app_id, "w"))) == 2, "the early lines")
    middle = datetime.now()
    time.sleep(0.05)  # the late lines are written strictly after `middle`
    go.touch()
    wait_done(sched, app_id)
    assert list(sched.log_iter(app_id, "w", since=middle)) == ["late 1\n", "late 2\n"]
    assert list(sched.log_iter(app_id, "w", until=middle)) == ["early 1\n", "early 2\n"]
    assert list(sched.log_iter(app_id, "w", since=middle, streams=Stream.STDOUT, regex="2")) == [
        "late 2\n"
    ]
    assert list(sched.log_iter(app_id, "w", since=middle, until=middle)) == []
    # a tail whose window has closed ends without waiting for more
    assert list(sched.log_iter(app_id, "w", until=middle, should_tail=True)) == [
        "early 1\n",
        "early 2\n",
    ]


def test_log_dir_runopt(sched: LocalScheduler, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    app_id = run(sched, py_role("w", "print('x')"), cfg={"log_dir": str(logs)})
    wait_done(sched, app_id)
    for name in ("stdout", "stderr", "combined"):
        assert (logs / app_id / "w" / "0" / f"{name}.log").is_file()
    assert (logs / app_id / "w" / "0" / "stdout.log").read_text() == "x\n"
    assert list(sched.log_iter(app_id, "w")) == ["x\n"]


@pytest.mark.parametrize("where", ["under-a-file", "is-a-file"])
def test_a_log_dir_that_cannot_be_created_is_rejected_at_dryrun(
    sched: LocalScheduler, tmp_path: Path, where: str
) -> None:
    from anylaunch.specs.errors import InvalidRunConfigException

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    log_dir = blocker / "logs" if where == "under-a-file" else blocker
    app = AppDef("logs", [py_role("w", "print('x')")])
    with pytest.raises(InvalidRunConfigException, match="log_dir") as raised:
        sched.submit_dryrun(app, {"log_dir": str(log_dir)})
    assert str(blocker) in str(raised.value)
    assert not any(p.name.startswith("logs-") for p in sched.state_root().glob("*"))


def test_log_iter_arguments_are_checked_once_by_the_base(sched: LocalScheduler) -> None:
    # local_cwd supplies only the hooks: the checks and their errors are the base's
    assert LocalScheduler.log_iter is Scheduler.log_iter
    app_id = run(sched, Role("trainer", image=".", entrypoint="true", num_replicas=2))
    wait_done(sched, app_id)
    early, late = datetime(2026, 1, 1), datetime(2026, 1, 2)
    bad: list[tuple[dict[str, Any], str, str]] = [
        ({"role_name": "trainr"}, "role_name", "Did you mean 'trainer'"),
        ({"k": 2}, "k", "use a replica index from 0 to 1"),
        ({"k": -1}, "k", "use a replica index from 0 to 1"),
        ({"k": True}, "k", "has 2 replica(s)"),
        ({"streams": "both"}, "streams", "use stdout, stderr or combined"),
        ({"regex": "("}, "regex", "not a valid regular expression"),
        ({"regex": 3}, "regex", "must be a str"),
        ({"since": late, "until": early}, "until", "is before since"),
        ({"since": early, "until": late.replace(tzinfo=timezone.utc)}, "until", "naive"),
        ({"since": "yesterday"}, "since", "must be a datetime"),
        ({"should_tail": "yes"}, "should_tail", "must be True or False"),
    ]
    for kwargs, field, problem in bad:
        call: dict[str, Any] = {"role_name": "trainer", **kwargs}
        with pytest.raises(InvalidSpecError) as err:
            sched.log_iter(app_id, **call)  # raised at the call, before any line is read
        assert (err.value.field, problem in str(err.value)) == (field, True), err.value
    # the arguments are checked before the app is looked up
    with pytest.raises(InvalidSpecError, match="regular expression"):
        sched.log_iter("nope-12345678", "trainer", regex="(")
    with pytest.raises(UnknownAppException):
        sched.log_iter("nope-12345678", "trainer")


# --- apps launched by the previous version ------------------------------------------------


def test_an_app_of_the_previous_version_describes_lists_and_logs(
    sched: LocalScheduler, state_dir: Path
) -> None:
    t0 = time.time() - 100
    out, err, late = (t0, "out x\n"), (t0 + 1, "err\n"), (t0 + 50, "late\n")
    logs = {
        (1, "stdout"): [out, late],
        (1, "stderr"): [err],
        (1, "combined"): [out, err, late],
        (0, "combined"): [out, err],
    }
    replicas = [{"state": "SUCCEEDED"}, {"state": "SUCCEEDED"}]
    old.write_app(
        state_dir, state="SUCCEEDED", replicas=replicas, supervisor=old.dead_supervisor(), created=t0,
        logs=logs,
    )  # fmt: skip
    app_id = old.APP_ID

    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.SUCCEEDED
    assert desc.roles == [
        Role(
            "trainer",
            image=".",
            entrypoint="sh",
            args=["-c", "echo out $0; echo err >&2", "x"],
            env={"API_TOKEN": "s3cr3t", "LR": "0.1"},
            num_replicas=2,
            max_retries=1,
            retry_policy=RetryPolicy.APPLICATION,
            resource=Resource(cpu=1, gpu=0, memMB=64),
            port_map={"http": 8080},
        )
    ]
    [statuses] = desc.roles_statuses
    assert [(r.role, r.id, r.state) for r in statuses.replicas] == [
        ("trainer", 0, AppState.SUCCEEDED),
        ("trainer", 1, AppState.SUCCEEDED),
    ]
    [listed] = sched.list()
    assert (listed.app_id, listed.state, listed.name, listed.app_handle) == (
        app_id,
        AppState.SUCCEEDED,
        "old app",
        f"local_cwd://old/{app_id}",
    )

    assert list(sched.log_iter(app_id, "trainer", 1)) == ["out x\n", "err\n", "late\n"]
    assert list(sched.log_iter(app_id, "trainer", 1, streams=Stream.STDOUT)) == [
        "out x\n",
        "late\n",
    ]
    assert list(sched.log_iter(app_id, "trainer", 1, streams=Stream.STDERR)) == ["err\n"]
    middle = datetime.fromtimestamp(t0 + 10)
    assert list(sched.log_iter(app_id, "trainer", 1, since=middle)) == ["late\n"]
    assert list(sched.log_iter(app_id, "trainer", 1, until=middle)) == ["out x\n", "err\n"]
    assert list(sched.log_iter(app_id, "trainer", 0, regex="err", should_tail=True)) == ["err\n"]
    with pytest.raises(InvalidSpecError, match="Did you mean 'trainer'"):
        sched.log_iter(app_id, "trainr")

    sched.delete(app_id)
    assert sched.describe(app_id) is None and sched.list() == []


@pytest.mark.parametrize("second", ["SUCCEEDED", "RUNNING"])
def test_an_app_whose_supervisor_died_ends_as_its_replicas_add_up(
    sched: LocalScheduler, state_dir: Path, second: str
) -> None:
    # what a supervisor (of the previous version) killed while its app ran leaves behind
    replicas: list[dict[str, Any]] = [{"state": "SUCCEEDED"}, {"state": second}]
    leftover = None
    if second == "RUNNING":
        leftover = subprocess.Popen(["sleep", "60"], start_new_session=True)
        start_time = ls.process_start_time(leftover.pid)
        replicas[1].update(pid=leftover.pid, start_time=start_time)
    old.write_app(
        state_dir, state="RUNNING", replicas=replicas, supervisor=old.dead_supervisor(),
        created=time.time() - 100,
    )  # fmt: skip
    try:
        desc = sched.describe(old.APP_ID)
        assert desc is not None
        [statuses] = desc.roles_statuses
        states = [r.state for r in statuses.replicas]
        if leftover is None:  # every replica had succeeded: so did the app
            assert (desc.state, states) == (AppState.SUCCEEDED, [AppState.SUCCEEDED] * 2)
            assert "supervisor" not in desc.msg
        else:  # the replica left running is killed and failed, and so is the app
            assert (desc.state, states) == (AppState.FAILED, [AppState.SUCCEEDED, AppState.FAILED])
            assert desc.msg.startswith("supervisor died")
            assert leftover.wait(timeout=DEADLINE_S) == -signal.SIGKILL
    finally:
        if leftover is not None:
            leftover.kill()
            leftover.wait()


@pytest.mark.parametrize("use_inotify", [True, False])
def test_follow_streams_a_growing_file(tmp_path: Path, use_inotify: bool) -> None:
    path = tmp_path / "growing.log"
    path.write_bytes(b"")
    finished = threading.Event()
    proceed = threading.Event()

    def writer() -> None:
        with open(path, "ab", buffering=0) as f:
            f.write(b"one\n")
            proceed.wait(DEADLINE_S)
            f.write(b"tw")
            f.write(b"o\nthree")
        finished.set()

    thread = threading.Thread(target=writer)
    thread.start()
    lines = iter_lines(follow(str(path), 0, finished.is_set, use_inotify=use_inotify))
    assert next(lines) == (0, b"one\n")
    proceed.set()
    assert list(lines) == [(4, b"two\n"), (8, b"three")]
    thread.join()


# --- arguments, env, options ---------------------------------------------------------------

HOSTILE = [
    "it's",
    'say "hi"',
    "$(touch pwned1)",
    "`touch pwned2`",
    "line1\nline2",
    "*",
    "?.py",
    "[a-z]*",
    "  spaced  out  ",
    "",
    "$HOME ${HOME}",
    "; rm -rf /tmp/nothing && echo x | cat",
    "back\\slash",
    "ünïcödé ✓",
    "-c",
]


def test_hostile_arguments_reach_the_program_unchanged(
    sched: LocalScheduler, tmp_path: Path
) -> None:
    out = tmp_path / "argv.json"
    code = "import json, sys\njson.dump(sys.argv[2:], open(sys.argv[1], 'w'))"
    role = py_role("w", code, str(out), *HOSTILE, image=str(tmp_path))
    info = sched.submit_dryrun(AppDef("hostile", roles=[role]), CFG)
    assert shlex.join(info.request.roles[0].replicas[0].cmd) in str(info)
    assert shlex.split(shlex.join(info.request.roles[0].replicas[0].cmd))[4:] == HOSTILE
    app_id = sched.schedule(info)
    assert wait_done(sched, app_id).state == AppState.SUCCEEDED
    assert json.loads(out.read_text()) == HOSTILE
    assert not list(tmp_path.glob("pwned*"))


def test_nul_byte_in_args_is_rejected_at_dryrun(sched: LocalScheduler) -> None:
    app = AppDef("x", roles=[Role("w", image=".", entrypoint="echo", args=["a\x00b"])])
    with pytest.raises(InvalidSpecError, match=r"Role\[w\]\.args\[0\]"):
        sched.submit_dryrun(app, CFG)
    app = AppDef("x", roles=[Role("w", image=".", entrypoint="echo")])
    with pytest.raises(
        InvalidSpecError, match=r"log_dir='/tmp/a\\x00b' is invalid: contains a NUL"
    ):
        sched.submit_dryrun(app, {**CFG, "log_dir": "/tmp/a\x00b"})


def test_dryrun_masks_secret_env_values(sched: LocalScheduler) -> None:
    secrets = {
        "API_TOKEN": "tok-111",
        "db_password": "pw-222",
        "SSH_KEY": "key-333",
        "AWS_CREDENTIALS": "cred-444",
        "client_secret": "sec-555",
    }
    role = Role("w", image=".", entrypoint="echo", env={**secrets, "LR": "0.1"})
    info = sched.submit_dryrun(AppDef("x", roles=[role]), CFG)
    text = str(info)
    assert "LR=0.1" in text
    for name, value in secrets.items():
        assert f"{name}=***" in text
        assert value not in text
        assert value not in repr(info.request)
    assert isinstance(info.request, LocalAppRequest)
    assert info.request.roles[0].replicas[0].env["API_TOKEN"] == "tok-111"  # still passed on


@pytest.mark.parametrize("prepend", [True, False])
def test_prepend_cwd_puts_the_working_dir_on_path(
    sched: LocalScheduler, tmp_path: Path, prepend: bool
) -> None:
    image = tmp_path / "image"
    image.mkdir()
    tool = image / "anylaunch-probe-tool"
    tool.write_text(f"#!{PY}\nimport os\nprint(os.environ['PATH'])\n")
    tool.chmod(0o755)
    role = Role("w", image=str(image), entrypoint="anylaunch-probe-tool")  # found via PATH
    app_id = run(sched, role, cfg={"prepend_cwd": prepend})
    assert wait_done(sched, app_id).state == AppState.SUCCEEDED
    [line] = sched.log_iter(app_id, "w")
    entries = line.rstrip("\n").split(os.pathsep)
    assert entries[0 if prepend else -1] == str(image)


def test_cuda_visible_devices_split_by_gpu_request(
    sched: LocalScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpu = Role(
        "g", image=".", entrypoint="true", num_replicas=2, resource=Resource(cpu=1, gpu=2, memMB=1)
    )
    cpu = Role("c", image=".", entrypoint="true", resource=Resource(cpu=1, gpu=0, memMB=1))
    app = AppDef("x", roles=[gpu, cpu])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")  # the GPUs this process may use
    info = sched.submit_dryrun(app, {"auto_set_cuda_visible_devices": True})
    envs = [rep.env.get("CUDA_VISIBLE_DEVICES") for r in info.request.roles for rep in r.replicas]
    assert envs == ["4,5", "6,7", None]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no visible GPU: a no-op
    info = sched.submit_dryrun(app, {"auto_set_cuda_visible_devices": True})
    assert all(
        "CUDA_VISIBLE_DEVICES" not in rep.env for r in info.request.roles for rep in r.replicas
    )


# --- list / describe / delete ---------------------------------------------------------------


def test_list_describe_delete(sched: LocalScheduler) -> None:
    done_id = run(sched, Role("w", image=".", entrypoint="true"), name="first")
    live_id = run(sched, Role("w", image=".", entrypoint="sleep", args=["60"]), name="second")
    wait_done(sched, done_id)
    wait_running(sched, live_id)
    listed = {app.app_id: app for app in sched.list()}
    assert set(listed) == {done_id, live_id}
    assert listed[done_id].name == "first" and listed[done_id].state == AppState.SUCCEEDED
    assert listed[live_id].state == AppState.RUNNING
    assert listed[live_id].app_handle == f"local_cwd://test/{live_id}"

    [pid] = replica_pids(sched, live_id)
    sched.delete(live_id)  # cancels first, then removes
    assert gone(pid)
    assert sched.describe(live_id) is None
    assert not (sched.state_root() / live_id).exists()
    sched.delete(done_id)
    assert sched.list() == []
    sched.delete(done_id)  # deleting twice is a no-op


def test_unknown_ids(sched: LocalScheduler) -> None:
    assert sched.describe("nope-12345678") is None
    assert sched.describe("../etc") is None
    assert sched.describe("") is None
    assert not sched.exists("nope-12345678")
    sched.cancel("nope-12345678")  # a no-op
    assert sched.list() == []


ESCAPE = """
import os, sys, time
# double fork + setsid: the grandchild leaves the replica's process group and session
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(sys.argv[1], "w") as f:
            f.write(str(os.getpid()))
        time.sleep(300)
        os._exit(0)
    os._exit(0)
os.wait()
print("escaped", flush=True)
time.sleep(float(sys.argv[2]))
"""


@pytest.mark.parametrize("how", ["cancel", "app ends"])
def test_a_process_that_escapes_its_session_does_not_survive_the_app(
    sched: LocalScheduler, tmp_path: Path, how: str
) -> None:
    pid_file = tmp_path / "escaped.pid"
    duration = "300" if how == "cancel" else "0"
    app_id = run(sched, py_role("w", ESCAPE, str(pid_file), duration), name="escape")
    pid = int(wait_until(lambda: pid_file.exists() and pid_file.read_text(), "the escape"))
    assert not gone(pid)
    if how == "cancel":
        wait_running(sched, app_id)
        sched.cancel(app_id)
    final = wait_done(sched, app_id)
    assert final.state == (AppState.CANCELLED if how == "cancel" else AppState.SUCCEEDED)
    wait_until(lambda: gone(pid), "the escaped process to be gone")
