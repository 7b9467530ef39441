"""The lsf scheduler end to end through the stand-in LSF cluster: the jobs really run as local
processes, so states, exit codes, logs, kills and rollbacks are real.

Waits poll with a generous deadline as a safety net only: nothing asserts on durations.
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import anylaunch
from anylaunch.runner import get_runner
from anylaunch.runner.reap import OwnerState, reap
from anylaunch.schedulers.api import DescribeAppResponse, Stream
from anylaunch.schedulers.common.job_metadata import JOB_METADATA_KEYS, OWNER_KEY
from anylaunch.schedulers.common.roles import RANK0_ENV
from anylaunch.schedulers.lsf.names import LsfSchedulerError, LsfSubmitError
from anylaunch.schedulers.lsf_scheduler import LsfRequest, LsfScheduler, create_scheduler
from anylaunch.specs import AppDef, AppState, Resource, Role, macros
from anylaunch.specs.errors import InvalidSpecError, UnknownAppException
from anylaunch.specs.metadata_keys import ANYLAUNCH_CONTEXT_NAME, app_metadata
from tests.backends import require_backend
from tests.schedulers.lsf.conftest import HOSTILE, LsfCluster, wait_until

PY = sys.executable
HOST = socket.gethostname()
# prints its argv, replica id and rank-0 host as JSON on stdout, a line on stderr
REPORT = (
    "import json, os, sys; "
    "print(json.dumps({'argv': sys.argv[1:], 'rank0': os.environ.get('" + RANK0_ENV + "'), "
    "'v': os.environ.get('V'), 'job': os.environ.get('LSB_JOBID')})); "
    "print('to stderr', file=sys.stderr)"
)
# writes its pid to the file given as argv[1], then sleeps
SLEEPER = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(300)"


def cfg(cluster: LsfCluster, **extra: Any) -> dict[str, Any]:
    return {"jobdir": str(cluster.jobdir), **extra}


def role(name: str, *args: str, replicas: int = 1, image: str = ".", **kw: Any) -> Role:
    return Role(name, image=image, entrypoint=PY, args=list(args), num_replicas=replicas, **kw)


def wait_state(sched: LsfScheduler, app_id: str, *states: AppState) -> DescribeAppResponse:
    def reached() -> DescribeAppResponse | None:
        desc = sched.describe(app_id)
        assert desc is not None
        return desc if desc.state in states else None

    desc: DescribeAppResponse = wait_until(reached, f"{app_id} to be {states}")
    return desc


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def pid_in(path: Path) -> int:
    return int(wait_until(lambda: path.exists() and path.read_text(), f"{path} to be written"))


# --- running apps ------------------------------------------------------------------------------


def test_multi_role_app_succeeds_with_logs_macros_and_rank0_host(lsf_cluster: LsfCluster) -> None:
    app = AppDef(
        "multi",
        roles=[
            role("trainer", "-c", REPORT, macros.app_id, macros.replica_id, replicas=2),
            role("ps", "-c", REPORT, "ps", macros.replica_id),
        ],
    )
    with get_runner("test-session") as runner:
        handle = runner.run(app, "lsf", cfg(lsf_cluster))
        status = runner.wait(handle, wait_interval=0.1, timeout=60)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        app_id = handle.rsplit("/", 1)[1]
        assert handle == f"lsf://test-session/{app_id}"
        assert [
            (r.role, [(rep.id, rep.state, rep.hostname) for rep in r.replicas])
            for r in status.roles
        ] == [
            ("trainer", [(0, AppState.SUCCEEDED, HOST), (1, AppState.SUCCEEDED, HOST)]),
            ("ps", [(0, AppState.SUCCEEDED, HOST)]),
        ]
        job_ids = set()
        for name, k, expected in [
            ("trainer", 0, [app_id, "0"]),
            ("trainer", 1, [app_id, "1"]),
            ("ps", 0, ["ps", "0"]),
        ]:
            out = json.loads(next(iter(runner.log_lines(handle, name, k, streams=Stream.STDOUT))))
            assert out["argv"] == expected
            assert out["rank0"] == HOST  # rank 0's host, read from the rendezvous file
            job_ids.add(out["job"])
            assert list(runner.log_lines(handle, name, k, streams=Stream.STDERR)) == ["to stderr\n"]
            combined = list(runner.log_lines(handle, name, k))
            assert sorted(combined) == sorted([json.dumps(out) + "\n", "to stderr\n"])
        assert len(job_ids) == 3  # one LSF job per replica
    # another process (a new scheduler, no shared memory) sees the same app
    other = create_scheduler("elsewhere")
    desc = other.describe(app_id)
    assert desc is not None and desc.state == AppState.SUCCEEDED
    assert [a.app_handle for a in other.list() if a.app_id == app_id] == [handle]
    # describe asked bjobs for exactly the app's jobs, as JSON
    bjobs = [c for c in lsf_cluster.commands() if c[0] == "bjobs"]
    assert bjobs[-1][:3] == ["bjobs", "-a", "-o"] and "-json" in bjobs[-1]
    assert bjobs[-2][-2:] == ["-Jd", f"anylaunch app={app_id} *"]  # [-1] is list()


def test_pending_then_running_then_succeeded(lsf_cluster: LsfCluster, tmp_path: Path) -> None:
    lsf_cluster.configure(dispatch_delay_s=1.0)
    go = tmp_path / "go"
    waiter = f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)"
    sched = create_scheduler("test")
    app_id = sched.submit(AppDef("steps", roles=[role("w", "-c", waiter)]), cfg(lsf_cluster))
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.PENDING
    assert "pending: New job is waiting for scheduling" in desc.msg
    wait_state(sched, app_id, AppState.RUNNING)
    go.touch()
    desc = wait_state(sched, app_id, AppState.SUCCEEDED)
    assert desc.roles_statuses[0].replicas[0].state == AppState.SUCCEEDED


def test_a_failing_replica_fails_the_app_and_its_other_jobs_are_killed(
    lsf_cluster: LsfCluster, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    fail = "import sys; print('bad input', file=sys.stderr); sys.exit(3)"
    app = AppDef(
        "fails", roles=[role("sleeper", "-c", SLEEPER, str(pid_file)), role("bad", "-c", fail)]
    )
    sched = create_scheduler("test")
    app_id = sched.submit(app, cfg(lsf_cluster))
    pid = pid_in(pid_file)
    desc = wait_state(sched, app_id, AppState.FAILED)
    assert "replica bad/0" in desc.msg and "exited with code 3" in desc.msg
    assert str(lsf_cluster.jobdir / app_id / "bad" / "0" / "stderr.log") in desc.msg
    bad = next(r for r in desc.roles_statuses if r.role == "bad").replicas[0]
    assert bad.state == AppState.FAILED and bad.structured_error_msg == "exit code 3"
    wait_until(lambda: gone(pid), "the other replica to be killed")
    # once everything ended, the app is still FAILED (the killed replica is a consequence)
    wait_until(lambda: all(j["stat"] == "EXIT" for j in lsf_cluster.jobs()), "every job to end")
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED
    sleeper = next(r for r in desc.roles_statuses if r.role == "sleeper").replicas[0]
    assert sleeper.state == AppState.CANCELLED
    assert list(sched.log_iter(app_id, "bad", 0, streams=Stream.STDERR)) == ["bad input\n"]


def test_cancel_kills_every_job_and_is_idempotent(lsf_cluster: LsfCluster, tmp_path: Path) -> None:
    app = AppDef(
        "cancel",
        roles=[role("w", "-c", SLEEPER, str(tmp_path / f"pid{macros.replica_id}"), replicas=2)],
    )
    with get_runner("test") as runner:
        handle = runner.run(app, "lsf", cfg(lsf_cluster))
        pids = [pid_in(tmp_path / f"pid{k}") for k in (0, 1)]
        status = runner.status(handle)
        assert status is not None and status.state == AppState.RUNNING
        runner.cancel(handle)
        status = runner.wait(handle, wait_interval=0.1, timeout=60)
        assert status is not None and status.state == AppState.CANCELLED
        assert "killed: w/0" in status.msg
        assert all(gone(pid) for pid in pids)
        bkills = [c for c in lsf_cluster.commands() if c[0] == "bkill"]
        runner.cancel(handle)  # finished: nothing left to kill, no error
        assert [c for c in lsf_cluster.commands() if c[0] == "bkill"] == bkills
    create_scheduler("test").cancel("never-submitted-12345678")
    create_scheduler("test").cancel("../not an id")


def test_cancel_a_pending_app(lsf_cluster: LsfCluster) -> None:
    lsf_cluster.configure(dispatch_delay_s=60)
    sched = create_scheduler("test")
    app_id = sched.submit(
        AppDef("p", roles=[role("w", "-c", "pass", replicas=2)]), cfg(lsf_cluster)
    )
    assert sched.describe(app_id).state == AppState.PENDING  # type: ignore[union-attr]
    sched.cancel(app_id)
    assert (
        wait_state(sched, app_id, AppState.CANCELLED, AppState.FAILED).state == AppState.CANCELLED
    )


def test_logs_follow_the_app_until_it_ends(
    lsf_cluster: LsfCluster, caplog: pytest.LogCaptureFixture
) -> None:
    chatty = (
        "import sys, time\n"
        "for i in range(5):\n"
        "    print(f'line {i}'); print(f'err {i}', file=sys.stderr); time.sleep(0.1)"
    )
    sched = create_scheduler("test")
    app_id = sched.submit(AppDef("logs", roles=[role("w", "-c", chatty)]), cfg(lsf_cluster))
    got: list[str] = []
    reader = threading.Thread(
        target=lambda: got.extend(sched.log_iter(app_id, "w", 0, should_tail=True)), daemon=True
    )
    reader.start()
    reader.join(60)
    assert not reader.is_alive()
    assert [line for line in got if line.startswith("line")] == [f"line {i}\n" for i in range(5)]
    assert [line for line in got if line.startswith("err")] == [f"err {i}\n" for i in range(5)]
    assert list(sched.log_iter(app_id, "w", 0, regex=r"^err [34]")) == ["err 3\n", "err 4\n"]
    assert list(sched.log_iter(app_id, "w", 0, streams=Stream.STDOUT))[-1] == "line 4\n"
    with pytest.raises(InvalidSpecError, match="Did you mean 'w'"):
        sched.log_iter(app_id, "ww", 0)
    with pytest.raises(InvalidSpecError) as info:
        sched.log_iter(app_id, "w", 1)
    assert info.value.field == "k"
    with pytest.raises(InvalidSpecError) as info:
        sched.log_iter(app_id, "w", 0, streams="both")  # type: ignore[arg-type]
    assert info.value.field == "streams"
    with pytest.raises(UnknownAppException):
        sched.log_iter("nope-12345678", "w", 0)
    # LSF's output files carry no timestamps: a time window is ignored, with a warning
    since = datetime.now(timezone.utc) + timedelta(hours=1)
    with caplog.at_level(logging.WARNING, logger="anylaunch.schedulers.api"):
        assert list(sched.log_iter(app_id, "w", 0, since=since, streams=Stream.STDOUT)) == [
            f"line {i}\n" for i in range(5)
        ]
    assert "carry no timestamps" in caplog.text


@pytest.mark.slow
def test_a_process_left_behind_does_not_keep_the_app_running(lsf_cluster: LsfCluster) -> None:
    # the background sleep keeps the replica's stdout open after the replica itself ended
    leaves = Role("w", image=".", entrypoint="sh", args=["-c", "sleep 300 & echo $!"])
    sched = create_scheduler("test")
    app_id = sched.submit(AppDef("leftover", roles=[leaves]), cfg(lsf_cluster))
    assert (
        wait_state(sched, app_id, AppState.SUCCEEDED, AppState.FAILED).state == AppState.SUCCEEDED
    )
    lines = list(sched.log_iter(app_id, "w", 0))
    assert len(lines) == 1
    wait_until(lambda: gone(int(lines[0])), "LSF to end what the replica left behind")


def test_hostile_arguments_reach_the_program_unchanged(
    lsf_cluster: LsfCluster, tmp_path: Path
) -> None:
    workdir = tmp_path / "a dir with 'quotes' and $(x)"
    workdir.mkdir()
    jobdir = tmp_path / "job dir; `rm -rf /` 'q'"
    value = "$(touch /tmp/anylaunch-pwned) `id` 'single' \"double\" \n *"
    app = AppDef(
        "hostile",
        roles=[role("w", "-c", REPORT, *HOSTILE, image=str(workdir), env={"V": value})],
    )
    sched = create_scheduler("test")
    app_id = sched.submit(app, {"jobdir": str(jobdir)})
    assert (
        wait_state(sched, app_id, AppState.SUCCEEDED, AppState.FAILED).state == AppState.SUCCEEDED
    )
    out = json.loads(next(iter(sched.log_iter(app_id, "w", 0, streams=Stream.STDOUT))))
    assert out["argv"] == HOSTILE
    assert out["v"] == value
    assert not Path("/tmp/anylaunch-pwned").exists()
    assert (jobdir / app_id / "w" / "0" / "stdout.log").exists()


# --- submission is all or nothing --------------------------------------------------------------


def test_a_rejected_bsub_rolls_back_the_jobs_already_submitted(lsf_cluster: LsfCluster) -> None:
    # MAX_PEND_JOBS=2: LSF refuses the third job while the first two are pending
    lsf_cluster.configure(dispatch_delay_s=60, max_pend_jobs=2)
    app = AppDef("partial", roles=[role("w", "-c", "pass", replicas=4)])
    sched = create_scheduler("test")
    info = sched.submit_dryrun(app, cfg(lsf_cluster))
    with pytest.raises(LsfSubmitError) as err:
        sched.schedule(info)
    message = str(err.value)
    assert "failed at job 3 of 4" in message
    assert "Pending job threshold reached. Job not submitted." in message
    jobs = lsf_cluster.jobs()
    assert len(jobs) == 2  # the 4th bsub was never attempted
    assert (
        f"The 2 job(s) already submitted were killed ({jobs[0]['id']}, {jobs[1]['id']})" in message
    )
    assert all(j["stat"] == "EXIT" for j in jobs)
    desc = sched.describe(info.request.app_id)
    assert desc is not None and desc.state == AppState.CANCELLED


def test_rollback_kills_jobs_that_already_run(lsf_cluster: LsfCluster, tmp_path: Path) -> None:
    app = AppDef(
        "edited",
        roles=[role("w", "-c", SLEEPER, str(tmp_path / f"pid{macros.replica_id}"), replicas=3)],
    )
    sched = create_scheduler("test")
    info = sched.submit_dryrun(app, cfg(lsf_cluster))
    request = info.request
    assert isinstance(request, LsfRequest)
    request.jobs[2].options += ["-R", "rusage[mem=2XB]"]  # an edited request LSF rejects
    with pytest.raises(LsfSubmitError, match="Bad resource requirement syntax") as err:
        sched.schedule(info)
    assert "job 3 of 3" in str(err.value)
    for k in (0, 1):
        path = tmp_path / f"pid{k}"
        if path.exists():  # it had started: it must be gone
            pid = pid_in(path)
            wait_until(lambda pid=pid: gone(pid), f"replica {k} to be killed")
    wait_until(lambda: all(j["stat"] == "EXIT" for j in lsf_cluster.jobs()), "every job to end")


# --- bad inputs, clear errors ------------------------------------------------------------------


def test_lsf_errors_are_clear(lsf_cluster: LsfCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    sched = create_scheduler("test")
    app = AppDef("x", roles=[role("w", "-c", "pass")])
    with pytest.raises(LsfSubmitError, match="nosuch: No such queue") as err:
        sched.submit(app, cfg(lsf_cluster, lsf_queue="nosuch"))
    assert "No job of the app had been submitted" in str(err.value)
    info = sched.submit_dryrun(app, cfg(lsf_cluster))
    sched.schedule(info)
    with pytest.raises(LsfSchedulerError, match="already scheduled"):
        sched.schedule(info)
    assert sched.describe("nope-12345678") is None
    assert sched.describe("../etc") is None
    monkeypatch.setenv("PATH", str(Path(PY).parent))
    with pytest.raises(LsfSchedulerError, match="`bsub` was not found on PATH"):
        sched.submit(app, cfg(lsf_cluster))
    with pytest.raises(LsfSchedulerError, match="`bjobs` was not found on PATH"):
        sched.describe(info.request.app_id)


def test_lsf_down_is_reported_with_its_message(
    lsf_cluster: LsfCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(lsf_cluster.standin.STATE_ENV)
    with pytest.raises(LsfSchedulerError, match="LSF is down"):
        create_scheduler("test").list()


def test_no_job_found_as_a_message_means_no_app(lsf_cluster: LsfCluster) -> None:
    lsf_cluster.configure(json_when_empty="message")
    sched = create_scheduler("test")
    assert sched.describe("nope-12345678") is None
    assert sched.list() == []


# --- states ------------------------------------------------------------------------------------


def test_every_lsf_state_is_mapped(lsf_cluster: LsfCluster, tmp_path: Path) -> None:
    sched = create_scheduler("test")
    app_id = sched.submit(
        AppDef("st", roles=[role("w", "-c", SLEEPER, str(tmp_path / "pid"))]), cfg(lsf_cluster)
    )
    pid_in(tmp_path / "pid")
    job_id = lsf_cluster.jobs()[0]["id"]
    for stat, state, msg in [
        ("PSUSP", AppState.PENDING, "held by its owner or an admin while pending"),
        ("USUSP", AppState.PENDING, "suspended by its owner or an admin"),
        ("SSUSP", AppState.PENDING, "suspended by LSF"),
        ("UNKWN", AppState.UNKNOWN, "lost contact with the host"),
        ("ZOMBI", AppState.UNKNOWN, "killed while its host was unreachable"),
        ("PROV", AppState.PENDING, ""),
        ("WAIT", AppState.PENDING, ""),
        (None, AppState.RUNNING, ""),
    ]:
        lsf_cluster.force_stat(job_id, stat)
        desc = sched.describe(app_id)
        assert desc is not None and desc.state == state, stat
        assert msg in desc.msg, (stat, desc.msg)
        assert desc.roles_statuses[0].replicas[0].state == state
    sched.cancel(app_id)
    assert wait_state(sched, app_id, AppState.CANCELLED).msg.startswith("killed: w/0")


def test_a_replica_of_unknown_state_does_not_hide_the_others(
    lsf_cluster: LsfCluster, tmp_path: Path
) -> None:
    """The shared replica rule: one replica UNKWN (its host unreachable) while the other runs
    is a running app (not UNKNOWN); all of them UNKWN is UNKNOWN."""
    sched = create_scheduler("test")
    pid_file = str(tmp_path / f"pid-{macros.replica_id}")
    app = AppDef("unk", roles=[role("w", "-c", SLEEPER, pid_file, replicas=2)])
    app_id = sched.submit(app, cfg(lsf_cluster))
    for k in range(2):
        pid_in(tmp_path / f"pid-{k}")
    first, second = (job["id"] for job in lsf_cluster.jobs())
    lsf_cluster.force_stat(first, "UNKWN")
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING, desc
    assert [r.state for r in desc.roles_statuses[0].replicas] == [
        AppState.UNKNOWN,
        AppState.RUNNING,
    ]
    assert "lost contact with the host" in desc.msg
    lsf_cluster.force_stat(second, "UNKWN")
    assert sched.describe(app_id).state == AppState.UNKNOWN  # type: ignore[union-attr]
    for job_id in (first, second):
        lsf_cluster.force_stat(job_id, None)
    sched.cancel(app_id)
    wait_state(sched, app_id, AppState.CANCELLED)


def test_resources_no_host_has_keep_the_app_pending_with_the_reason(
    lsf_cluster: LsfCluster,
) -> None:
    sched = create_scheduler("test")
    big = role("w", "-c", "pass", resource=Resource(cpu=1, gpu=0, memMB=10**8))
    app_id = sched.submit(AppDef("big", roles=[big]), cfg(lsf_cluster))
    desc = wait_state(sched, app_id, AppState.PENDING)
    wait_until(
        lambda: "resource reservation not satisfied" in sched.describe(app_id).msg,  # type: ignore[union-attr]
        "the pending reason",
    )
    assert desc.state == AppState.PENDING
    sched.cancel(app_id)
    wait_state(sched, app_id, AppState.CANCELLED)


def test_describe_many_and_list_use_one_bjobs_call(lsf_cluster: LsfCluster) -> None:
    sched = create_scheduler("s1")
    other = create_scheduler("s2")
    a = sched.submit(AppDef("a", roles=[role("w", "-c", "pass")]), cfg(lsf_cluster))
    b = other.submit(
        AppDef("b", roles=[role("w", "-c", "import sys; sys.exit(1)")]), cfg(lsf_cluster)
    )
    wait_state(sched, a, AppState.SUCCEEDED)
    wait_state(sched, b, AppState.FAILED)
    before = len(lsf_cluster.commands())
    many = sched.describe_many([a, b, "nope-12345678"])
    assert len(lsf_cluster.commands()) == before + 1
    assert many[a].state == AppState.SUCCEEDED  # type: ignore[union-attr]
    assert many[b].state == AppState.FAILED  # type: ignore[union-attr]
    assert many["nope-12345678"] is None
    listed = {app.app_id: app for app in sched.list()}
    assert listed[a].app_handle == f"lsf://s1/{a}" and listed[a].name == "a"
    assert listed[b].app_handle == f"lsf://s2/{b}" and listed[b].state == AppState.FAILED


# --- job metadata and owner ---------------------------------------------------------------------


class _EndedOwners:
    """An engine that says every owner it is asked about has ended."""

    engine = "prefect"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def check(self, owners: Sequence[str]) -> Mapping[str, OwnerState]:
        self.asked += owners
        return {owner: OwnerState.ENDED for owner in owners}


def test_describe_returns_the_job_metadata_and_the_owner_reap_acts_on(
    lsf_cluster: LsfCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ANYLAUNCH_CONTEXT_NAME, "ctx with spaces/ü")
    owner = "prefect:flow-run/1 ü"
    app = AppDef("owned", roles=[role("w", "-c", SLEEPER, str(tmp_path / "pid"), replicas=2)])
    with get_runner("meta") as runner:
        handle = runner.run(app, "lsf", cfg(lsf_cluster), parent_run_id=owner)
        app_id = handle.rsplit("/", 1)[1]
        pid = pid_in(tmp_path / "pid")
        # another process reads it back from the jobs' descriptions (bjobs shows no job env)
        desc = create_scheduler("elsewhere").describe(app_id)
        assert desc is not None and not desc.roles
        assert {k: desc.metadata.get(k) for k in (*JOB_METADATA_KEYS, OWNER_KEY)} == {
            app_metadata.CONTEXT: "ctx with spaces/ü",
            app_metadata.VERSION: anylaunch.__version__,
            app_metadata.SCHEDULER: "lsf",
            OWNER_KEY: owner,
        }
        assert create_scheduler("x").describe_many([app_id, "nope-12345678"])[app_id] == desc
        # so the reaper knows whom to ask, and cancels the app of an ended owner
        checker = _EndedOwners()
        report = reap(runner, ["lsf"], [checker])
        assert checker.asked == [owner]
        assert report.cancelled == [handle], report
        wait_state(create_scheduler("meta"), app_id, AppState.CANCELLED)
        wait_until(lambda: gone(pid), f"pid {pid} to exit")


# --- containers --------------------------------------------------------------------------------


def _docker_ok() -> bool:
    if shutil.which("docker") is None:
        return False
    proc = subprocess.run(
        ["docker", "image", "inspect", "busybox:latest"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return proc.returncode == 0


@pytest.mark.slow
def test_container_jobs_run_in_docker_and_cancel_stops_them(lsf_cluster: LsfCluster) -> None:
    require_backend(
        "dockerd", _docker_ok(), "bash scripts/provision/10-docker.sh (exports DOCKER_HOST)"
    )
    sched = create_scheduler("test")
    echo = Role(
        "c",
        image="busybox:latest",
        entrypoint="sh",
        args=["-c", f'echo "rank0=${RANK0_ENV} v=$V" "$@"', "sh", *HOSTILE[:4]],
        env={"V": "it's $(x)"},
    )
    app_id = sched.submit(AppDef("ctr", roles=[echo]), cfg(lsf_cluster))
    desc = wait_state(sched, app_id, AppState.SUCCEEDED, AppState.FAILED)
    logs = "".join(sched.log_iter(app_id, "c", 0))
    assert desc.state == AppState.SUCCEEDED, logs
    assert logs == f"rank0={HOST} v=it's $(x) {' '.join(HOSTILE[:4])}\n"

    sleeper = Role("s", image="busybox:latest", entrypoint="sleep", args=["300"])
    app_id = sched.submit(AppDef("ctr-cancel", roles=[sleeper]), cfg(lsf_cluster))
    container = f"anylaunch-{app_id}-s-0"

    def running() -> bool:
        proc = subprocess.run(
            ["docker", "ps", "-q", "--filter", f"name={container}"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        return bool(proc.stdout.strip())

    wait_until(running, "the container to run")
    sched.cancel(app_id)
    wait_state(sched, app_id, AppState.CANCELLED)
    wait_until(lambda: not running(), "the container to be stopped")
