"""lsf's capacity check through the stand-in's ``bhosts -w``: each replica's job needs its
``-n cpu`` slots free on one open host; a check submits nothing. The stand-in's ``bhosts`` is
tested first against LSF's output contract (OpenLava's fixed columns)."""

from __future__ import annotations

import re
import stat
import subprocess
from typing import Any

import pytest

from anylaunch.runner import get_runner
from anylaunch.schedulers.common.capacity import CanRun, Capacity
from anylaunch.schedulers.lsf_scheduler import LsfScheduler
from anylaunch.specs import AppDef, Resource, Role
from anylaunch.specs.arrays import ArraySpec
from tests.schedulers.lsf.conftest import STANDINS, LsfCluster, load_standin, wait_until

HEADER = "HOST_NAME          STATUS          JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV "
SHORT_HEADER = "HOST_NAME          STATUS       JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV "


@pytest.fixture(autouse=True)
def _bhosts_executable() -> None:
    """A checkout may lose the executable bit (conftest restores it for bsub/bjobs/bkill)."""
    path = STANDINS / "bhosts"
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)


def app(cpu: int, replicas: int = 1, gpu: int = 0, **kw: Any) -> AppDef:
    role = Role("w", "", entrypoint="true", num_replicas=replicas, resource=Resource(cpu, gpu, 128))
    return AppDef("cap", [role], **kw)


def check(a: AppDef) -> Capacity:
    sched = LsfScheduler("cap")
    return sched.check_capacity(a, sched.run_opts().resolve({}))


def start_job(slots: int) -> int:
    proc = run("bsub", "-n", str(slots), "-R", "span[hosts=1]", "sleep 30")
    assert proc.returncode == 0, proc.stderr
    match = re.search(r"Job <(\d+)>", proc.stdout)
    assert match, proc.stdout
    job_id = int(match.group(1))
    wait_until(
        lambda: run("bjobs", "-o", "stat", "-noheader", str(job_id)).stdout.strip() == "RUN",
        f"job {job_id} to run",
    )
    return job_id


# --- the stand-in's bhosts ----------------------------------------------------------------------


def test_bhosts_prints_lsfs_fixed_columns(lsf_cluster: LsfCluster) -> None:
    lsf_cluster.configure(
        hosts=[
            {"name": "hostb", "ncpus": 4, "status": "closed_Adm", "jl_u": 2},
            {"name": "hosta-with-a-very-long-name", "ncpus": 8, "max_slots": None},
        ]
    )
    wide = run("bhosts", "-w")
    assert wide.returncode == 0, wide.stderr
    assert wide.stdout.splitlines() == [
        HEADER,
        "hosta-with-a-very-long-name ok                 -      -      0      0      0      0      0",
        "hostb              closed_Adm         2      4      0      0      0      0      0",
    ]
    short = run("bhosts")
    assert short.stdout.splitlines() == [
        SHORT_HEADER,
        "hosta-with-a-very- ok              -      -      0      0      0      0      0",
        "hostb              closed          2      4      0      0      0      0      0",
    ]
    assert run("bhosts", "-w", "hostb").stdout.splitlines()[1].startswith("hostb ")


def test_bhosts_counts_the_slots_of_started_jobs_and_shows_a_full_host(
    lsf_cluster: LsfCluster,
) -> None:
    host = load_standin().DEFAULT_CONFIG["hosts"][0]["name"]
    lsf_cluster.configure(hosts=[{"name": host, "ncpus": 4}])
    start_job(3)
    row = run("bhosts", "-w").stdout.splitlines()[1].split()
    assert row == [host, "ok", "-", "4", "3", "3", "0", "0", "0"]
    start_job(1)
    row = run("bhosts", "-w").stdout.splitlines()[1].split()
    assert row == [host, "closed_Full", "-", "4", "4", "4", "0", "0", "0"]


def test_bhosts_refuses_what_lsf_refuses(lsf_cluster: LsfCluster) -> None:
    bad_host = run("bhosts", "-w", "nosuchhost")
    assert bad_host.returncode == 255
    assert "nosuchhost: Bad host name, host group name or cluster name" in bad_host.stderr
    for option in ("-x", "-o", "-json"):
        proc = run("bhosts", option)
        assert proc.returncode == 255 and "illegal option" in proc.stderr


# --- the check ---------------------------------------------------------------------------------


def test_an_app_that_fits_is_a_yes_from_one_bhosts_and_nothing_is_submitted(
    lsf_cluster: LsfCluster,
) -> None:
    answer = check(app(2, replicas=3))
    assert answer.can_run == CanRun.YES, answer
    assert answer.calls == 1
    assert lsf_cluster.commands() == [["bhosts", "-w"]]
    assert lsf_cluster.jobs() == []


def test_more_slots_than_a_host_has_is_a_no_naming_the_replica(lsf_cluster: LsfCluster) -> None:
    host = load_standin().DEFAULT_CONFIG["hosts"][0]["name"]
    answer = check(app(64))
    assert answer.can_run == CanRun.NO
    assert (
        f"replica w/0 needs 64 CPU, 0 MB, 0 GPU; the most free on one host ({host}) is 8 CPU"
        in (answer.reason)
    )
    assert "LSF job slots" in answer.reason
    assert lsf_cluster.jobs() == []


def test_slots_in_use_are_not_free(lsf_cluster: LsfCluster) -> None:
    start_job(6)
    assert check(app(2)).can_run == CanRun.YES
    busy = check(app(4))
    assert busy.can_run == CanRun.NO and "is 2 CPU" in busy.reason
    assert len(lsf_cluster.jobs()) == 1  # only the job this test started


def test_replicas_spread_over_open_hosts_only(lsf_cluster: LsfCluster) -> None:
    lsf_cluster.configure(
        hosts=[
            {"name": "h1", "ncpus": 4},
            {"name": "h2", "ncpus": 4},
            {"name": "h3", "ncpus": 16, "status": "unavail"},
        ]
    )
    assert check(app(4, replicas=2)).can_run == CanRun.YES
    three = check(app(4, replicas=3))
    assert (
        three.can_run == CanRun.NO and "after placing 2 other replica(s) is 0 CPU" in three.reason
    )
    lsf_cluster.configure(hosts=[{"name": "h1", "ncpus": 4, "status": "closed_Adm"}])
    closed = check(app(1))
    assert closed.can_run == CanRun.NO
    assert "no LSF host takes jobs now (bhosts -w: h1 closed_Adm)" in closed.reason


def test_gpus_are_not_in_bhosts_so_a_gpu_app_is_unknown(lsf_cluster: LsfCluster) -> None:
    unknown = check(app(1, gpu=1))
    assert unknown.can_run == CanRun.UNKNOWN and "does not show GPUs" in unknown.reason
    assert check(app(64, gpu=1)).can_run == CanRun.NO


def test_an_array_is_checked_by_one_element(lsf_cluster: LsfCluster) -> None:
    assert check(app(2, array=ArraySpec(30, parallelism=3))).can_run == CanRun.YES
    assert check(app(64, array=ArraySpec(30))).can_run == CanRun.NO


def test_through_the_runner(lsf_cluster: LsfCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    with get_runner("cap") as runner:
        assert runner.check_capacity(app(1), "lsf").can_run == CanRun.YES
        no = runner.check_capacity(app(64), "lsf", {})
        assert no.can_run == CanRun.NO and "replica w/0" in no.reason
        monkeypatch.delenv(load_standin().STATE_ENV)  # the stand-in's "LSF is down"
        down = runner.check_capacity(app(1), "lsf")
    assert down.can_run == CanRun.UNKNOWN and "LSF is down" in down.reason
    assert lsf_cluster.jobs() == []
