"""The slurm scheduler on a real two-node Slurm cluster (scripts/provision/20-slurm.sh).

Every app writes into its own ``job_dir`` under tmp_path (both nodes see this filesystem).
Waits poll with generous deadlines as a safety net only: nothing asserts on durations.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from anylaunch.runner import get_runner
from anylaunch.schedulers import get_scheduler_factory
from anylaunch.schedulers.api import Stream
from anylaunch.schedulers.slurm.query import SlurmQuery, parse_scontrol
from anylaunch.schedulers.slurm.scheduler import _describe
from anylaunch.schedulers.slurm_scheduler import SlurmScheduler, create_scheduler
from anylaunch.specs import AppDef, AppState, Resource, Role, Workspace, macros
from anylaunch.specs.errors import (
    InvalidRunConfigException,
    InvalidSpecError,
    UnknownAppException,
)
from tests.schedulers.slurm.cluster import SlurmCluster, wait_done, wait_until

PY = sys.executable
SMALL = Resource(cpu=1, gpu=0, memMB=128)
#: Arguments a shell would mangle: every one must reach the program unchanged.
HOSTILE = [
    "it's",
    '"double"',
    "$(touch /tmp/anylaunch-slurm-pwned)",
    "`touch /tmp/anylaunch-slurm-pwned`",
    "line1\nline2",
    "line\n#SBATCH --partition=nope",
    "*",
    "/*",
    "  spaced  out  ",
    "",
    "--flag=$HOME",
    "${HOME}",
    "$1 $@ $# $? $!",
    "back\\slash\\",
    "semi;colon&&and|pipe>redirect",
    "tab\there",
    "ünïcødé ✓",
    "-n",
    "EOF",
]
DUMP = (
    "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], "
    "'env': {k: v for k, v in os.environ.items() if k.startswith('T_') or k == 'weird.name'}}))"
)


@pytest.fixture(scope="module", autouse=True)
def early_app(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path]:
    """A het app that fails, submitted first: the accounting tests at the end of this module
    look at it once slurmctld forgot it (MinJobAge) and slurmdbd has its full record (for a
    short job that takes up to a minute), which the tests in between leave time for."""
    job_dir = tmp_path_factory.mktemp("early") / "job"
    trainer = py_role("trainer", "print('trainer ok')", num_replicas=2)
    # (ps fails after the trainers finished, so they are not stopped before they print)
    ps = py_role("ps", "import sys, time; time.sleep(2); print('ps fails'); sys.exit(2)")
    sched = create_scheduler("test")
    app_id = sched.submit(AppDef("early", [trainer, ps]), {"job_dir": str(job_dir)})
    return app_id, job_dir


@pytest.fixture
def sched(slurm_cluster: SlurmCluster) -> Iterator[SlurmScheduler]:
    scheduler = create_scheduler("test", squeue_ttl=0.5)
    yield scheduler
    scheduler.close()


def py_role(name: str, code: str, *args: str, **kwargs: Any) -> Role:
    kwargs.setdefault("resource", SMALL)
    return Role(name=name, image="", entrypoint=PY, args=["-c", code, *args], **kwargs)


def run_app(sched: SlurmScheduler, app: AppDef, job_dir: Path, **cfg: Any) -> tuple[str, Any]:
    """Schedules ``app`` with its own job_dir and waits for its end."""
    app_id = sched.submit(app, {"job_dir": str(job_dir), **cfg})
    return app_id, wait_done(sched, app_id)


def logs(sched: SlurmScheduler, app_id: str, role: str, k: int = 0, **kw: Any) -> list[str]:
    return list(sched.log_iter(app_id, role, k, **kw))


# --- running apps -----------------------------------------------------------------------------


def test_single_role_replicas_run_with_their_macros_and_logs(
    sched: SlurmScheduler, tmp_path: Path
) -> None:
    code = (
        "import os, sys; print('out', sys.argv[1], sys.argv[2], os.environ['T_RID'], os.getcwd()); "
        "print('err', sys.argv[1], file=sys.stderr)"
    )
    role = py_role(
        "worker",
        code,
        macros.replica_id,
        macros.app_id,
        num_replicas=2,
        env={"T_RID": "r" + macros.replica_id},
    )
    app_id, desc = run_app(sched, AppDef("single", [role]), tmp_path / "job")

    assert desc.state == AppState.SUCCEEDED, desc
    assert [(rs.role, len(rs.replicas)) for rs in desc.roles_statuses] == [("worker", 2)]
    for k in (0, 1):
        out = logs(sched, app_id, "worker", k, streams=Stream.STDOUT)
        assert out == [f"out {k} {app_id} r{k} {tmp_path / 'job'}\n"]
        assert logs(sched, app_id, "worker", k, streams=Stream.STDERR) == [f"err {k}\n"]
        combined = logs(sched, app_id, "worker", k)
        assert sorted(combined) == sorted([*out, f"err {k}\n"])
        assert logs(sched, app_id, "worker", k, regex="^err") == [f"err {k}\n"]
    # the batch script's own output sits next to the replica logs
    assert (tmp_path / "job" / f"slurm-{app_id}.out").exists()


def test_multi_role_het_job_puts_roles_on_their_own_nodes(
    sched: SlurmScheduler, tmp_path: Path
) -> None:
    code = (
        "import os, socket; print(os.environ['SLURMD_NODENAME'], "
        "os.environ['ANYLAUNCH_RANK0_HOST'], os.environ['T_RANK0_VAR'])"
    )
    trainer = py_role("trainer", code, num_replicas=2, env={"T_RANK0_VAR": macros.rank0_env})
    ps = py_role("ps", code, env={"T_RANK0_VAR": macros.rank0_env})
    app_id, desc = run_app(sched, AppDef("het", [trainer, ps]), tmp_path / "job")

    assert desc.state == AppState.SUCCEEDED, desc
    assert [(rs.role, len(rs.replicas)) for rs in desc.roles_statuses] == [
        ("trainer", 2),
        ("ps", 1),
    ]
    seen = {
        (role, k): logs(sched, app_id, role, k)[0].split()
        for role, k in [("trainer", 0), ("trainer", 1), ("ps", 0)]
    }
    trainer_node = seen[("trainer", 0)][0]
    assert seen[("trainer", 1)][0] == trainer_node
    assert seen[("ps", 0)][0] != trainer_node  # a het component per node
    # every replica knows the first node of the first role, through the env var the macro names
    assert {v[1] for v in seen.values()} == {trainer_node}
    assert {v[2] for v in seen.values()} == {"ANYLAUNCH_RANK0_HOST"}
    hosts = {rs.role: {r.hostname for r in rs.replicas} for rs in desc.roles_statuses}
    assert hosts == {"trainer": {trainer_node}, "ps": {seen[("ps", 0)][0]}}


def test_hostile_arguments_and_env_reach_the_program_byte_for_byte(
    sched: SlurmScheduler, tmp_path: Path
) -> None:
    env = {f"T_{i}": value for i, value in enumerate(HOSTILE)}
    env["weird.name"] = "dotted $(name)"
    role = py_role("w", DUMP, *HOSTILE, env=env)
    app_id, desc = run_app(sched, AppDef("hostile", [role]), tmp_path / "job")

    assert desc.state == AppState.SUCCEEDED, desc
    got = json.loads("".join(logs(sched, app_id, "w", streams=Stream.STDOUT)))
    assert got == {"argv": HOSTILE, "env": env}
    assert not os.path.exists("/tmp/anylaunch-slurm-pwned")


def test_100_kb_arguments_and_env_values_reach_the_program(
    sched: SlurmScheduler, tmp_path: Path
) -> None:
    big_arg = "a'b\"c $(x) " * 8192  # 98 KiB, with quotes that grow when shell-quoted
    big_env = "v\n;`y` " * 12_800  # 100 KiB
    role = py_role("w", DUMP, big_arg, "ANYLAUNCH_EOF", env={"T_BIG": big_env})
    app_id, desc = run_app(sched, AppDef("bigargs", [role]), tmp_path / "job")

    assert desc.state == AppState.SUCCEEDED, desc
    got = json.loads("".join(logs(sched, app_id, "w", streams=Stream.STDOUT)))
    assert got == {"argv": [big_arg, "ANYLAUNCH_EOF"], "env": {"T_BIG": big_env}}


def test_failure_reports_the_exit_code_and_stops_the_other_replicas(
    sched: SlurmScheduler, tmp_path: Path
) -> None:
    # replica 1 fails at once; replica 0 would sleep for minutes unless Slurm kills it
    code = "import sys, time; r = int(sys.argv[1]); time.sleep(300) if r == 0 else sys.exit(3)"
    role = py_role("w", code, macros.replica_id, num_replicas=2)
    start = time.monotonic()
    _, desc = run_app(sched, AppDef("fails", [role]), tmp_path / "job")

    assert desc.state == AppState.FAILED, desc
    assert "exit code 3" in desc.msg, desc.msg
    assert desc.num_restarts == 0
    assert time.monotonic() - start < 120  # the sleeper was killed (safety net, not a timing)


def test_signal_death_is_a_failure(sched: SlurmScheduler, tmp_path: Path) -> None:
    role = py_role("w", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    _, desc = run_app(sched, AppDef("killed", [role]), tmp_path / "job")
    assert desc.state == AppState.FAILED, desc


def test_cancel_is_idempotent(sched: SlurmScheduler, tmp_path: Path) -> None:
    code = "import time; print('started', flush=True); time.sleep(300)"
    app = AppDef("cancel", [py_role("w", code), py_role("ps", code)])
    app_id = sched.submit(app, {"job_dir": str(tmp_path / "job")})
    wait_until(lambda: logs(sched, app_id, "w") and logs(sched, app_id, "ps"), "replicas to start")
    # (describe may lag by the snapshot's ttl)
    wait_until(lambda: sched.describe(app_id).state == AppState.RUNNING, "RUNNING")  # type: ignore[union-attr]

    sched.cancel(app_id)
    desc = wait_done(sched, app_id)
    assert desc.state == AppState.CANCELLED, desc
    sched.cancel(app_id)  # a no-op on a finished app
    sched.cancel("999999999")  # and on an unknown one
    assert sched.describe("999999999") is None


def test_cancel_a_pending_app(sched: SlurmScheduler, tmp_path: Path) -> None:
    # the escape hatch holds the job back for an hour: it stays PENDING until cancelled
    role = Role(name="w", image="", entrypoint="true", resource=SMALL)
    cfg = {"job_dir": str(tmp_path / "job"), "sbatch_args": ["--begin=now+1hour"]}
    app_id = sched.submit(AppDef("pending", [role]), cfg)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.PENDING, desc
    assert "BeginTime" in desc.msg
    sched.cancel(app_id)
    assert wait_done(sched, app_id).state == AppState.CANCELLED


def test_requeue_retries_until_success(sched: SlurmScheduler, tmp_path: Path) -> None:
    counter = tmp_path / "attempts"
    code = (
        "import sys; from pathlib import Path; p = Path(sys.argv[1]); "
        "n = int(p.read_text()) + 1 if p.exists() else 1; p.write_text(str(n)); "
        "print('attempt', n); sys.exit(0 if n == 3 else 5)"
    )
    role = py_role("w", code, str(counter), max_retries=2)
    app_id, desc = run_app(sched, AppDef("retry", [role]), tmp_path / "job")

    assert desc.state == AppState.SUCCEEDED, desc
    assert desc.num_restarts == 2
    assert counter.read_text() == "3"
    # the replica's logs keep every attempt
    assert logs(sched, app_id, "w") == ["attempt 1\n", "attempt 2\n", "attempt 3\n"]


def test_retries_of_a_het_job_run_out(sched: SlurmScheduler, tmp_path: Path) -> None:
    # --kill-on-bad-exit stops "ps" as soon as "w" fails: "w" fails only once this attempt's
    # "ps" has printed (a marker per attempt), else whether "ps" got to print is a race
    sync = tmp_path / "sync"
    sync.mkdir()
    attempt = "import sys, time; from pathlib import Path; d = Path(sys.argv[1]); "
    fail = (
        attempt + "n = len(list(d.glob('w-*'))); (d / f'w-{n}').touch(); print('try'); "
        "deadline = time.monotonic() + 120\n"
        "while not (d / f'ps-{n}').exists() and time.monotonic() < deadline: time.sleep(0.1)\n"
        "sys.exit(4)"
    )
    show = (
        attempt + "n = len(list(d.glob('ps-*'))); print('ps', flush=True); "
        "(d / f'ps-{n}').touch(); time.sleep(120)"
    )
    failing = py_role("w", fail, str(sync), max_retries=1)
    other = py_role("ps", show, str(sync))
    app_id, desc = run_app(sched, AppDef("retry-out", [failing, other]), tmp_path / "job")
    assert desc.state == AppState.FAILED, desc
    assert "exit code 4" in desc.msg
    assert desc.num_restarts == 1
    assert logs(sched, app_id, "w") == ["try\n", "try\n"]
    assert logs(sched, app_id, "ps") == ["ps\n", "ps\n"]  # the whole app ran twice


def test_tail_follows_a_running_app_to_its_end(sched: SlurmScheduler, tmp_path: Path) -> None:
    code = "import time\nfor i in range(4):\n    print('tick', i, flush=True); time.sleep(0.5)"
    app_id = sched.submit(AppDef("tail", [py_role("w", code)]), {"job_dir": str(tmp_path / "j")})
    lines = list(sched.log_iter(app_id, "w", should_tail=True))
    assert lines == [f"tick {i}\n" for i in range(4)]
    desc = sched.describe(app_id)
    assert desc is not None and desc.state.is_terminal()


def test_log_iter_rejects_bad_arguments(
    sched: SlurmScheduler, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app_id, _ = run_app(sched, AppDef("args", [py_role("w", "print('hi')")]), tmp_path / "job")
    with pytest.raises(InvalidSpecError, match="Did you mean 'w'") as info:
        logs(sched, app_id, "ww")
    assert info.value.field == "role_name"
    with pytest.raises(InvalidSpecError, match="has 1 replica") as info:
        logs(sched, app_id, "w", 1)
    assert info.value.field == "k"
    with pytest.raises(InvalidSpecError) as info:
        logs(sched, app_id, "w", streams="both")
    assert info.value.field == "streams"
    with pytest.raises(UnknownAppException):
        logs(sched, "999999999", "w")
    # Slurm's log files carry no timestamps: a time window is ignored, with a warning
    since = datetime.now(timezone.utc) + timedelta(hours=1)
    with caplog.at_level(logging.WARNING, logger="anylaunch.schedulers.api"):
        assert logs(sched, app_id, "w", since=since) == ["hi\n"]
    assert "carry no timestamps" in caplog.text


# --- workspace -------------------------------------------------------------------------------


def test_workspace_is_copied_into_job_dir_and_runs_there(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text("import os; print('from workspace', os.getcwd())\n")
    (project / "junk.tmp").write_text("not copied")
    (project / ".anylaunchignore").write_text("*.tmp\n")
    job_dir = tmp_path / "jobs dir %j 'q'" / "run1"  # spaces, quotes, an sbatch pattern
    app = AppDef("ws", [Role(name="w", image="", entrypoint=PY, args=["main.py"], resource=SMALL)])

    with get_runner("ws-test") as runner:
        handle = runner.run(app, "slurm", {"job_dir": str(job_dir)}, workspace=str(project))
        status = runner.wait(handle, wait_interval=0.2, timeout=90)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        lines = list(runner.log_lines(handle, "w", 0))
        assert lines == [f"from workspace {job_dir}\n"]
        assert sorted(p.name for p in job_dir.iterdir() if not p.name.startswith("slurm-")) == [
            ".anylaunchignore",
            "main.py",
        ]
        app_id = handle.rsplit("/", 1)[1]
        assert (job_dir / f"slurm-{app_id}.out").exists()  # the batch log, pattern intact
        # the job dir of a workspace must be new
        with pytest.raises(InvalidRunConfigException, match="job_dir"):
            runner.dryrun(app, "slurm", {"job_dir": str(job_dir)}, workspace=str(project))


# --- state sources -----------------------------------------------------------------------------


def test_describe_many_costs_one_controller_query(sched: SlurmScheduler, tmp_path: Path) -> None:
    role = Role(name="w", image="", entrypoint="true", resource=SMALL)
    ids = [
        sched.submit(AppDef(f"many{i}", [role]), {"job_dir": str(tmp_path / "job")})
        for i in range(10)
    ]
    # a scheduler whose snapshots stay fresh for a minute (its own shared query)
    watcher = create_scheduler("test", squeue_ttl=60)
    calls = watcher.query.calls
    before = dict(calls)
    described = watcher.describe_many(ids)
    assert all(d is not None for d in described.values()), described
    assert calls["squeue"] - before["squeue"] == 1
    for app_id in ids:  # single describes reuse that snapshot
        assert watcher.describe(app_id) is not None
    assert calls["squeue"] - before["squeue"] == 1
    assert calls["sacct"] == before["sacct"]
    for app_id in ids:
        wait_done(sched, app_id)


def test_list_shows_this_users_apps(sched: SlurmScheduler, tmp_path: Path) -> None:
    role = Role(name="w", image="", entrypoint="true", resource=SMALL)
    app_id, _ = run_app(sched, AppDef("listed", [role]), tmp_path / "job")
    listed = {r.app_id: r for r in sched.list()}
    assert app_id in listed
    assert listed[app_id].name == "listed"
    assert listed[app_id].state == AppState.SUCCEEDED
    assert listed[app_id].app_handle == f"slurm://test/{app_id}"


def test_scontrol_and_squeue_agree(sched: SlurmScheduler, tmp_path: Path) -> None:
    """scontrol is the fallback for Slurm without ``squeue --json``: same jobs, same view."""
    trainer = py_role("trainer", "pass", num_replicas=2)
    ps = py_role("ps", "import sys; sys.exit(2)")
    app_id, desc = run_app(sched, AppDef("agree", [trainer, ps]), tmp_path / "job")
    assert desc.state == AppState.FAILED
    text = subprocess.run(
        ["scontrol", "show", "job", "-o", app_id], capture_output=True, text=True, check=True
    ).stdout
    from_scontrol = parse_scontrol(text)
    from_squeue = sched.query.jobs([app_id])[app_id]
    assert from_squeue is not None
    fields = ("job_id", "leader_id", "offset", "name", "state", "num_tasks", "workdir", "nodes")
    assert [tuple(getattr(j, f) for f in fields) for j in from_scontrol] == [
        tuple(getattr(j, f) for f in fields) for j in from_squeue
    ]
    assert [j.exit_code for j in from_scontrol] == [j.exit_code for j in from_squeue]


def test_without_accounting_apps_still_run_and_are_described(
    slurm_cluster: SlurmCluster, sched: SlurmScheduler, tmp_path: Path
) -> None:
    with slurm_cluster.accounting_stopped():
        role = py_role("w", "print('no accounting')")
        app_id, desc = run_app(sched, AppDef("noacct", [role]), tmp_path / "job")
        assert desc.state == AppState.SUCCEEDED, desc
        assert desc.metadata["source"] == "squeue"
        assert logs(sched, app_id, "w") == ["no accounting\n"]
        # an app the controller does not know: sacct fails, so it is unknown, not an error
        query = SlurmQuery()
        assert query.jobs(["999999998"]) == {"999999998": None}
        assert query.accounting_error is not None


def test_registry_and_runner_reach_the_cluster(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    assert isinstance(get_scheduler_factory("slurm")("s"), SlurmScheduler)
    app = AppDef("runner", [py_role("w", "print('via runner')")])
    with get_runner("rt") as runner:
        handle = runner.run(app, "slurm", {"job_dir": str(tmp_path / "job")})
        assert handle.startswith("slurm://rt/")
        status = runner.wait(handle, wait_interval=0.2, timeout=90)
        assert status is not None and status.state == AppState.SUCCEEDED
        assert list(runner.log_lines(handle, "w", 0)) == ["via runner\n"]
        described = runner.describe(handle)
        assert described is not None
        assert [(r.name, r.num_replicas) for r in described.roles] == [("w", 1)]
        assert described.metadata["app_name"] == "runner"


def test_concurrent_describes_share_snapshots(sched: SlurmScheduler, tmp_path: Path) -> None:
    role = Role(name="w", image="", entrypoint="true", resource=SMALL)
    app_id, _ = run_app(sched, AppDef("threads", [role]), tmp_path / "job")
    query = sched.query
    query.refresh()
    before = query.calls["squeue"]
    errors: list[BaseException] = []

    def describe() -> None:
        try:
            for _ in range(20):
                desc = sched.describe(app_id)
                assert desc is not None and desc.state == AppState.SUCCEEDED
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=describe) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    # 160 describes within a few ttl windows: a handful of squeue calls, not 160
    assert query.calls["squeue"] - before < 20


def test_workspace_without_job_dir_runs_in_place(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "hello.py").write_text("import os; print(os.getcwd())\n")
    monkeypatch.chdir(tmp_path)
    sched = create_scheduler("test")
    app = AppDef(
        "inplace", [Role(name="w", image="", entrypoint=PY, args=["hello.py"], resource=SMALL)]
    )
    app_id = sched.submit(app, {}, workspace=Workspace({str(project): ""}))
    desc = wait_done(sched, app_id)
    assert desc.state == AppState.SUCCEEDED, desc
    assert logs(sched, app_id, "w") == [f"{project}\n"]
    assert (tmp_path / f"slurm-{app_id}.out").exists()  # the job ran from the dryrun's cwd


# --- accounting (last: they look at the app submitted first) -----------------------------------


def test_accounting_agrees_with_the_controller(
    sched: SlurmScheduler, tmp_path: Path, early_app: tuple[str, Path]
) -> None:
    """sacct (for jobs the controller forgot) describes an app as squeue did."""
    trainer = py_role("trainer", "pass", num_replicas=2)
    ps = py_role("ps", "import sys; sys.exit(2)")
    _, desc = run_app(sched, AppDef("acct", [trainer, ps]), tmp_path / "job")
    assert desc.state == AppState.FAILED and "exit code 2" in desc.msg, desc
    early_id, _ = early_app

    def accounted() -> Any:  # a short job's full record reaches slurmdbd within a minute
        found = SlurmQuery().accounting([early_id]).get(early_id)
        return found if found and all(j.workdir for j in found) else None

    records: Any = wait_until(accounted, "slurmdbd to record the early app", timeout=120)
    from_sacct = _describe(early_id, records)
    # the early app is the same app as this one: the same description
    assert from_sacct.state == desc.state
    assert "exit code 2" in from_sacct.msg  # (sacct keeps no pending/finish reason)
    assert [(rs.role, [r.state for r in rs.replicas]) for rs in from_sacct.roles_statuses] == [
        (rs.role, [r.state for r in rs.replicas]) for rs in desc.roles_statuses
    ]
    assert [j.num_tasks for j in records] == [2, 1]


def test_a_role_of_unknown_size_accepts_any_replica_index(
    sched: SlurmScheduler, tmp_path: Path
) -> None:
    """A job cancelled before it started has no step, so accounting knows no task count: once
    the controller forgot it, log_iter accepts any replica index (and finds no lines)."""
    role = py_role("w", "print('never runs')", num_replicas=2)
    cfg: dict[str, Any] = {"job_dir": str(tmp_path / "job"), "sbatch_args": ["--begin=now+1hour"]}
    app_id = sched.submit(AppDef("unsized", [role]), cfg)
    sched.cancel(app_id)
    assert wait_done(sched, app_id).state == AppState.CANCELLED
    fresh = create_scheduler("test", squeue_ttl=0)  # a new process's view: nothing cached

    def forgotten() -> bool:
        return app_id not in fresh.query.snapshot(max_age=0)

    wait_until(forgotten, "slurmctld to purge the cancelled job (MinJobAge)", timeout=120)

    def accounted() -> Any:
        jobs = fresh.query.jobs([app_id]).get(app_id)
        return jobs if jobs and jobs[0].workdir else None

    jobs: Any = wait_until(accounted, "slurmdbd to have the job's record", timeout=120)
    assert [j.num_tasks for j in jobs] == [None]
    assert logs(fresh, app_id, "w", 5) == []
    with pytest.raises(InvalidSpecError) as info:
        logs(fresh, app_id, "w", -1)
    assert info.value.field == "k" and "an unknown number of" in str(info.value)


def test_forgotten_apps_are_described_from_accounting(early_app: tuple[str, Path]) -> None:
    """After MinJobAge the controller forgets a job; describe and logs then use sacct."""
    app_id, job_dir = early_app
    sched = create_scheduler("test", squeue_ttl=0)  # a new process's view: nothing cached

    def forgotten() -> bool:
        return app_id not in sched.query.snapshot(max_age=0)

    wait_until(forgotten, "slurmctld to purge the finished job (MinJobAge)", timeout=120)

    def described() -> Any:
        desc = sched.describe(app_id)
        return desc if desc is not None and desc.metadata["workdir"] else None

    desc: Any = wait_until(described, "slurmdbd to have the full record", timeout=120)
    assert desc.metadata["source"] == "sacct"
    assert desc.state == AppState.FAILED
    assert "exit code 2" in desc.msg
    assert desc.metadata["workdir"] == str(job_dir)
    assert [(rs.role, len(rs.replicas)) for rs in desc.roles_statuses] == [
        ("trainer", 2),
        ("ps", 1),
    ]
    assert logs(sched, app_id, "ps", streams=Stream.STDOUT) == ["ps fails\n"]
    assert logs(sched, app_id, "trainer", 1) == ["trainer ok\n"]
