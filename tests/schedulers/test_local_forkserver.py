"""The local_cwd fork-server on real processes: reuse, idle exit, stale sockets, fallback,
environment isolation, supervisor deaths, a killed server, concurrent first launches.

Every test gets its own state root (so its own server). Process relations are read from
/proc (Linux). Waits poll with a generous deadline as a safety net only.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from anylaunch.schedulers.local import forkserver as lf
from anylaunch.schedulers.local import state as ls
from anylaunch.schedulers.local_scheduler import LocalAppRequest, LocalScheduler, create_scheduler
from anylaunch.specs import AppDef, AppState, Role
from anylaunch.specs.errors import InvalidSpecError
from tests.schedulers.local_helpers import CFG, DEADLINE_S, PY, gone, wait_until

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads process relations from /proc"
)

# a replica that waits until a file exists, then prints a line
WAIT_FOR = (
    "import os, sys, time\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.01)\n"
    "print('released', flush=True)\n"
)


def parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return int(stat[stat.rfind(b")") + 2 :].split()[1])


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def servers_of(root: Path) -> list[int]:
    """Pids of the fork-servers of ``root`` (their spares, forked copies, are left out)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            line = cmdline(int(entry))
            if lf.MODULE in line and f" {root} " in line:
                parent = parent_of(int(entry))
                if parent is not None and lf.MODULE not in cmdline(parent):
                    found.append(int(entry))
    return found


def waiting_app(sched: LocalScheduler, go: Path, name: str = "w") -> str:
    role = Role("w", image=".", entrypoint=PY, args=["-c", WAIT_FOR, str(go)])
    return sched.submit(AppDef(name, roles=[role]), CFG)


def supervisor_pid(sched: LocalScheduler, app_id: str) -> int:
    desc = sched.describe(app_id)
    assert desc is not None
    return int(desc.metadata["supervisor_pid"])


def dryrun(sched: LocalScheduler, app: AppDef) -> LocalAppRequest:
    request = sched.submit_dryrun(app, CFG).request
    assert isinstance(request, LocalAppRequest)
    return request


def wait_done(sched: LocalScheduler, app_id: str) -> AppState:
    def done() -> AppState | None:
        desc = sched.describe(app_id)
        assert desc is not None
        return desc.state if desc.state.is_terminal() else None

    state: AppState = wait_until(done, f"{app_id} to end")
    return state


def launch_in_subprocess(root: Path, code: str, env: dict[str, str] | None = None) -> str:
    """Runs ``code`` (which prints an app id last) in a new launcher process; returns the id."""
    out = subprocess.run(
        [PY, "-c", code],
        env={**os.environ, ls.STATE_DIR_ENV: str(root), **(env or {})},
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    state = tmp_path / "state"
    monkeypatch.setenv(ls.STATE_DIR_ENV, str(state))
    monkeypatch.delenv(lf.DISABLE_ENV, raising=False)
    monkeypatch.setenv(lf.IDLE_ENV, "5")  # do not leave servers behind for long
    yield state
    # never leave processes behind, whatever the test did
    sched = create_scheduler("cleanup")
    for app in sched.list():
        if not app.state.is_terminal():
            sched.cancel(app.app_id)
            wait_done(sched, app.app_id)
    lf.close_connections()  # give up reservations: their spares exit
    for pid in servers_of(state):
        os.kill(pid, signal.SIGTERM)


@pytest.fixture
def sched(root: Path) -> LocalScheduler:
    return create_scheduler("fs")


def test_launches_reuse_one_server(sched: LocalScheduler, root: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    first = waiting_app(sched, go)
    second = waiting_app(sched, go)
    parents = {parent_of(supervisor_pid(sched, app)) for app in (first, second)}
    assert parents == set(servers_of(root))  # both forked by the one server of this root
    [server] = servers_of(root)
    assert server != os.getpid() and lf.MODULE in cmdline(server)
    assert (root / (lf.server_name() + ".sock")).is_socket()
    go.touch()
    assert wait_done(sched, first) == wait_done(sched, second) == AppState.SUCCEEDED
    assert list(sched.log_iter(first, "w")) == ["released\n"]
    third = waiting_app(sched, go)  # later launches find the same server
    assert parent_of(supervisor_pid(sched, third)) == server
    assert wait_done(sched, third) == AppState.SUCCEEDED


def test_server_exits_when_idle(
    sched: LocalScheduler, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(lf.IDLE_ENV, "0.3")  # read by the launch that starts the server
    app_id = sched.submit(AppDef("x", roles=[Role("w", image=".", entrypoint="true")]), CFG)
    [server] = wait_until(lambda: servers_of(root), "the server to run")
    assert wait_done(sched, app_id) == AppState.SUCCEEDED
    wait_until(lambda: gone(server), "the idle server to exit", timeout=15)
    assert not (root / (lf.server_name() + ".sock")).exists()
    # the next launch starts a new one
    app_id = sched.submit(AppDef("y", roles=[Role("w", image=".", entrypoint="true")]), CFG)
    assert wait_done(sched, app_id) == AppState.SUCCEEDED
    assert parent_of(supervisor_pid(sched, app_id)) not in (server, os.getpid())


@pytest.mark.parametrize("value", ["soon", "0", "-1", "inf", "nan"])
def test_bad_idle_setting_is_rejected(
    sched: LocalScheduler, root: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(lf.IDLE_ENV, value)
    app = AppDef("x", roles=[Role("w", image=".", entrypoint="true")])
    with pytest.raises(InvalidSpecError, match=lf.IDLE_ENV) as err:
        sched.submit(app, CFG)
    assert "positive number of seconds" in str(err.value)
    assert sched.list() == []  # nothing was launched


def test_stale_socket_of_a_killed_server_is_replaced(
    sched: LocalScheduler, root: Path, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    go.touch()
    assert wait_done(sched, waiting_app(sched, go)) == AppState.SUCCEEDED
    [server] = servers_of(root)
    os.kill(server, signal.SIGKILL)
    wait_until(lambda: gone(server), "the server to die")
    assert (root / (lf.server_name() + ".sock")).is_socket()  # left behind: stale
    # a launcher that never saw the old server, then this one (its connection is dead now)
    code = (
        "from anylaunch.schedulers.local_scheduler import create_scheduler\n"
        "from anylaunch.specs import AppDef, Role\n"
        "print(create_scheduler('sub').submit(AppDef('s', roles=[Role('w', image='.', "
        "entrypoint='true')]), {}))\n"
    )
    other = launch_in_subprocess(root, code)
    mine = sched.submit(AppDef("m", roles=[Role("w", image=".", entrypoint="true")]), CFG)
    for app_id in (other, mine):
        assert wait_done(sched, app_id) == AppState.SUCCEEDED
    [new_server] = servers_of(root)
    assert new_server != server


def test_stale_socket_file_without_server(sched: LocalScheduler, root: Path) -> None:
    root.mkdir(parents=True)
    path = root / (lf.server_name() + ".sock")
    with lf._address(str(root), path.name) as address:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(address)  # a socket file nobody listens on
        sock.close()
    assert path.is_socket()
    app_id = sched.submit(AppDef("x", roles=[Role("w", image=".", entrypoint="true")]), CFG)
    assert wait_done(sched, app_id) == AppState.SUCCEEDED
    assert len(servers_of(root)) == 1


def test_falls_back_to_a_direct_start_when_the_server_cannot_start(
    sched: LocalScheduler, root: Path, tmp_path: Path
) -> None:
    (root / (lf.server_name() + ".sock")).mkdir(parents=True)  # in the socket's way
    go = tmp_path / "go"
    app_id = waiting_app(sched, go)
    pid = supervisor_pid(sched, app_id)
    assert parent_of(pid) == os.getpid()  # started by this process, as a new interpreter
    assert "anylaunch.schedulers.local.supervisor" in cmdline(pid)
    assert servers_of(root) == []
    go.touch()
    assert wait_done(sched, app_id) == AppState.SUCCEEDED
    assert list(sched.log_iter(app_id, "w")) == ["released\n"]


def test_can_be_turned_off(
    sched: LocalScheduler, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(lf.DISABLE_ENV, "0")
    go = tmp_path / "go"
    app_id = waiting_app(sched, go)
    assert parent_of(supervisor_pid(sched, app_id)) == os.getpid()
    go.touch()
    assert wait_done(sched, app_id) == AppState.SUCCEEDED
    assert servers_of(root) == []


def test_each_app_gets_its_launchers_environment(root: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    code = (
        "import sys\n"
        "from anylaunch.schedulers.local_scheduler import create_scheduler\n"
        "from anylaunch.specs import AppDef, Role\n"
        'c = "import os, sys, time\\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.01)\\n'
        "print(os.environ.get('LAUNCHER_VALUE'), os.environ.get('ONLY_IN_A'), os.getcwd())\"\n"
        f"role = Role('w', image={str(tmp_path)!r}, entrypoint=sys.executable,"
        f" args=['-c', c, {str(go)!r}])\n"
        "print(create_scheduler('env').submit(AppDef('e', roles=[role]), {}))\n"
    )
    first = launch_in_subprocess(root, code, {"LAUNCHER_VALUE": "from-a", "ONLY_IN_A": "1"})
    second = launch_in_subprocess(root, code, {"LAUNCHER_VALUE": "from-b"})
    sched = create_scheduler("env")
    # one server forked both supervisors, each from its own launcher's environment
    assert parent_of(supervisor_pid(sched, first)) == parent_of(supervisor_pid(sched, second))
    assert servers_of(root) == [parent_of(supervisor_pid(sched, first))]
    go.touch()
    for app_id in (first, second):
        assert wait_done(sched, app_id) == AppState.SUCCEEDED
    assert list(sched.log_iter(first, "w")) == [f"from-a 1 {tmp_path}\n"]
    assert list(sched.log_iter(second, "w")) == [f"from-b None {tmp_path}\n"]


def test_the_launchers_environment_is_not_written_to_disk(
    sched: LocalScheduler, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cr3t-" + os.urandom(8).hex()
    monkeypatch.setenv("LAUNCHER_API_TOKEN", secret)
    # the replica gets the value (it checks its hash: the value itself is written nowhere)
    check = (
        "import hashlib, os, sys\n"
        "got = hashlib.sha256(os.environ['LAUNCHER_API_TOKEN'].encode()).hexdigest()\n"
        "sys.exit(0 if got == sys.argv[1] else 3)\n"
    )
    expected = hashlib.sha256(secret.encode()).hexdigest()
    role = Role("w", image=".", entrypoint=PY, args=["-c", check, expected])
    go = tmp_path / "go"
    holder = waiting_app(sched, go)  # the server forked this supervisor (it runs a while)
    assert parent_of(supervisor_pid(sched, holder)) in servers_of(root)
    app_id = sched.submit(AppDef("secret", roles=[role]), CFG)
    go.touch()
    assert wait_done(sched, app_id) == AppState.SUCCEEDED
    assert wait_done(sched, holder) == AppState.SUCCEEDED
    files = [path for path in root.rglob("*") if path.is_file()]
    assert any(path.name == ls.REQUEST_FILE for path in files)
    for path in files:
        assert secret.encode() not in path.read_bytes(), path


def test_dead_supervisor_from_the_server_is_detected(
    sched: LocalScheduler, root: Path, tmp_path: Path
) -> None:
    app_id = waiting_app(sched, tmp_path / "never")
    pid = supervisor_pid(sched, app_id)
    assert parent_of(pid) in servers_of(root)
    state = wait_until(lambda: ls.read_json(root / app_id / ls.STATE_FILE), "its first state")
    [replica] = [r["pid"] for r in state["replicas"]]
    os.kill(pid, signal.SIGKILL)
    assert wait_done(sched, app_id) == AppState.FAILED
    desc = sched.describe(app_id)
    assert desc is not None and desc.msg.startswith("supervisor died")
    wait_until(lambda: gone(replica), "the orphaned replica to be killed")


def test_a_spare_killed_before_its_app_starts_fails_the_app(
    sched: LocalScheduler, root: Path
) -> None:
    # what a launch records when its reservation dies before it assigned the app: the
    # supervisor is known and dead at once (no wait for the start timeout)
    reservation = lf.reserve(root)
    assert reservation is not None and reservation.usable()
    request = dryrun(sched, AppDef("x", roles=[Role("w", image=".", entrypoint="true")]))
    sched._create_app_dir(request, request.app_dir, reservation.identity())
    os.kill(reservation.pid, signal.SIGKILL)
    wait_until(lambda: gone(reservation.pid), "the spare to die")
    assert not reservation.usable()
    assert not reservation.assign(request.app_dir)  # nobody reads its pipe any more
    assert wait_done(sched, request.app_id) == AppState.FAILED
    desc = sched.describe(request.app_id)
    assert desc is not None and desc.msg.startswith("supervisor died")


def test_killing_the_server_does_not_affect_running_apps(
    sched: LocalScheduler, root: Path, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    running = waiting_app(sched, go)
    to_cancel = waiting_app(sched, tmp_path / "never")
    pids = {app: supervisor_pid(sched, app) for app in (running, to_cancel)}
    [server] = servers_of(root)
    os.kill(server, signal.SIGKILL)
    wait_until(lambda: gone(server), "the server to die")
    assert all(not gone(pid) for pid in pids.values())
    go.touch()
    assert wait_done(sched, running) == AppState.SUCCEEDED
    assert list(sched.log_iter(running, "w")) == ["released\n"]
    sched.cancel(to_cancel)
    assert wait_done(sched, to_cancel) == AppState.CANCELLED


def test_concurrent_first_launches_start_one_server(root: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    start = tmp_path / "start"
    code = (
        "import os, sys, time\n"
        "from anylaunch.schedulers.local_scheduler import create_scheduler\n"
        "from anylaunch.specs import AppDef, Role\n"
        "wait_for, go, ready, start = sys.argv[1:]\n"
        "role = Role('w', image='.', entrypoint=sys.executable, args=['-c', wait_for, go])\n"
        "sched = create_scheduler('c')\n"
        "open(ready, 'w').close()\n"
        "while not os.path.exists(start): time.sleep(0.001)\n"
        "print(sched.submit(AppDef('c', roles=[role]), {}), flush=True)\n"
    )
    env = {**os.environ, ls.STATE_DIR_ENV: str(root)}
    launchers = [
        subprocess.Popen(
            [PY, "-c", code, WAIT_FOR, str(go), str(tmp_path / f"ready{i}"), str(start)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    wait_until(lambda: len(list(tmp_path.glob("ready*"))) == 4, "the launchers to be ready")
    start.touch()  # all launch at once, with no server running yet
    app_ids = []
    for launcher in launchers:
        out, _ = launcher.communicate(timeout=DEADLINE_S)
        assert launcher.returncode == 0
        app_ids.append(out.strip())
    sched = create_scheduler("c")
    parents = {parent_of(supervisor_pid(sched, app)) for app in app_ids}
    assert len(parents) == 1 and parents == set(servers_of(root))
    go.touch()
    assert {wait_done(sched, app) for app in app_ids} == {AppState.SUCCEEDED}


def test_a_burst_of_launches_runs_every_app(
    sched: LocalScheduler, root: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    code = "import sys\nopen(sys.argv[1], 'w').write(sys.argv[2])"
    app_ids = [
        sched.submit(
            AppDef(
                f"b{i}",
                roles=[
                    Role(
                        "w", image=".", entrypoint=PY, args=["-c", code, str(out / str(i)), str(i)]
                    )
                ],
            ),
            CFG,
        )
        for i in range(20)
    ]
    assert {wait_done(sched, app) for app in app_ids} == {AppState.SUCCEEDED}
    assert sorted(int(p.read_text()) for p in out.iterdir()) == list(range(20))
    assert len(servers_of(root)) == 1


def test_long_state_root_paths_still_use_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / ("long-" * 20) / "state"
    assert len(str(root / (lf.server_name() + ".sock"))) > 108  # too long for sun_path
    monkeypatch.setenv(ls.STATE_DIR_ENV, str(root))
    monkeypatch.setenv(lf.IDLE_ENV, "5")
    sched = create_scheduler("long")
    go = tmp_path / "go"
    app_id = waiting_app(sched, go)
    try:
        assert parent_of(supervisor_pid(sched, app_id)) in servers_of(root)
    finally:
        go.touch()
    assert wait_done(sched, app_id) == AppState.SUCCEEDED
    lf.close_connections()
    for pid in servers_of(root):
        os.kill(pid, signal.SIGTERM)


def test_a_second_supervisor_of_the_same_app_does_not_run_it(
    sched: LocalScheduler, root: Path, tmp_path: Path
) -> None:
    # what a launch that fell back after the server had started a supervisor may lead to
    starts = tmp_path / "starts"
    code = "import sys, time\nopen(sys.argv[1], 'a').write('start\\n')\ntime.sleep(0.3)"
    role = Role("w", image=".", entrypoint=PY, args=["-c", code, str(starts)])
    request = dryrun(sched, AppDef("dup", roles=[role]))
    sched._create_app_dir(request, request.app_dir)
    package_root = Path(ls.__file__).resolve().parents[3]
    supervisors = [
        subprocess.Popen(
            [PY, "-S", "-E", "-m", "anylaunch.schedulers.local.supervisor", request.app_dir],
            cwd=package_root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=DEADLINE_S)[0] for p in supervisors]
    assert all(p.returncode == 0 for p in supervisors), outputs
    assert starts.read_text() == "start\n"  # the replica ran once
    assert sum("another supervisor runs this app" in out for out in outputs) == 1
    assert wait_done(sched, request.app_id) == AppState.SUCCEEDED


def test_the_supervisor_and_server_import_only_what_they_need() -> None:
    # Both start as `python -S -E -m ...` (the server once per state root, a supervisor once
    # per app when the server cannot be used): their imports are their start-up cost. The
    # specs, typing and threading (which makes each fork of the server slower) stay out.
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import anylaunch.schedulers.local.forkserver_server\n"
        "import anylaunch.schedulers.local.supervisor\n"
        "print('\\n'.join(sorted(set(sys.modules) - before)))\n"
    )
    package_root = Path(ls.__file__).resolve().parents[3]
    out = subprocess.run(
        [PY, "-S", "-E", "-c", code],
        cwd=package_root,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=True,
    ).stdout.split()
    ours = {name for name in out if name.startswith("anylaunch")}
    assert ours == {
        "anylaunch",
        "anylaunch.schedulers",
        "anylaunch.schedulers.common",  # (empty)
        "anylaunch.schedulers.common.processes",  # pid + start time identity (stdlib only)
        "anylaunch.schedulers.local",
        "anylaunch.schedulers.local.forkserver",
        "anylaunch.schedulers.local.forkserver_server",
        "anylaunch.schedulers.local.state",
        "anylaunch.schedulers.local.supervisor",
    }
    heavy = {"typing", "threading", "subprocess", "pathlib", "logging", "dataclasses", "socket"}
    assert heavy & set(out) == set()


def test_a_change_of_the_launchers_environment_reaches_the_next_app(
    sched: LocalScheduler, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the launcher encodes its environment for a spare once and reuses it while unchanged
    code = "import os; print(os.environ.get('CHANGING_VALUE'))"
    role = Role("w", image=str(tmp_path), entrypoint=PY, args=["-c", code])
    seen = []
    for value in ("one", "one", "two", None):
        if value is None:
            monkeypatch.delenv("CHANGING_VALUE")
        else:
            monkeypatch.setenv("CHANGING_VALUE", value)
        app_id = sched.submit(AppDef("env", roles=[role]), CFG)
        assert wait_done(sched, app_id) == AppState.SUCCEEDED
        seen += list(sched.log_iter(app_id, "w"))
    assert seen == ["one\n", "one\n", "two\n", "None\n"]
    assert servers_of(sched.state_root()), "the apps came from the fork-server"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc are Linux")
def test_a_prepared_spare_leaks_nothing_and_is_a_subreaper() -> None:
    # what a spare runs before its app is assigned, in a process of its own
    code = (
        "import ctypes, os\n"
        "from anylaunch.schedulers.local import supervisor as local_supervisor\n"
        "before = sorted(os.listdir('/proc/self/fd'))\n"
        "local_supervisor.prepare_spare()\n"
        "after = sorted(os.listdir('/proc/self/fd'))\n"
        "flag = ctypes.c_int(0)\n"
        "ctypes.CDLL(None).prctl(37, ctypes.byref(flag), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER\n"
        "print(before == after, flag.value)\n"
    )
    package_root = Path(ls.__file__).resolve().parents[3]
    out = subprocess.run(
        [PY, "-S", "-E", "-c", code],
        cwd=package_root,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=True,
    )
    assert out.stdout.split() == ["True", "1"]
