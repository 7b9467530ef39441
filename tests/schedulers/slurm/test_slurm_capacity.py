"""slurm's capacity check on the real two-node cluster: ``sbatch --test-only`` with the app's
very script (plain, heterogeneous and array jobs) makes no job and answers with Slurm's
expected start or its refusal; and a job whose node goes down fails as ``infrastructure``.

Waits poll with generous deadlines as a safety net only: nothing asserts on durations.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from anylaunch.runner import get_runner
from anylaunch.runner.failures import FailureCategory, failure_category
from anylaunch.schedulers.common.capacity import CanRun, Capacity
from anylaunch.schedulers.slurm.capacity import START_MARGIN_S
from anylaunch.schedulers.slurm.query import SlurmJob
from anylaunch.schedulers.slurm.scheduler import _describe
from anylaunch.schedulers.slurm_scheduler import SlurmScheduler, create_scheduler
from anylaunch.specs import AppDef, AppState, AppStatus, Resource, Role
from anylaunch.specs.arrays import ArraySpec
from tests.schedulers.slurm.cluster import SlurmCluster, wait_until

#: Every app of this module has this name, so the tests can tell its jobs from other tests'.
NAME = f"cap{uuid.uuid4().hex[:8]}"


def role(name: str, cpu: int, replicas: int = 1) -> Role:
    return Role(
        name,
        "",
        entrypoint="sleep",
        args=["30"],
        num_replicas=replicas,
        resource=Resource(cpu=cpu, gpu=0, memMB=128),
    )


def check(sched: SlurmScheduler, app: AppDef, **cfg: object) -> Capacity:
    return sched.check_capacity(app, sched.run_opts().resolve(cfg))  # type: ignore[arg-type]


def slurm(*argv: str) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def jobs_named(prefix: str) -> list[str]:
    """Jobs of the controller (every state) and of accounting whose name starts with prefix."""
    names = slurm("squeue", "--states=all", "-h", "-o", "%j").split()
    names += slurm("sacct", "-X", "-n", "-P", "-o", "JobName", "-S", "now-10minutes").split()
    return [n for n in names if n.startswith(prefix)]


@pytest.fixture
def sched(slurm_cluster: SlurmCluster) -> SlurmScheduler:
    return create_scheduler("cap")


def test_an_app_that_fits_is_a_yes_with_slurms_expected_start_and_no_job_is_made(
    sched: SlurmScheduler,
) -> None:
    before = datetime.now().astimezone()
    answer = check(sched, AppDef(NAME, [role("w", 1)]))
    assert answer.can_run == CanRun.YES, answer
    assert answer.calls in (1, 2)  # sbatch --test-only (and sbatch --version once a process)
    assert isinstance(answer.expected_start, datetime)
    assert answer.expected_start.tzinfo is not None
    # Slurm says "now" to the second: within the margin of the check
    assert before - timedelta(seconds=2) <= answer.expected_start
    assert answer.expected_start <= datetime.now().astimezone() + timedelta(seconds=START_MARGIN_S)
    assert "partition" in answer.reason
    assert check(sched, AppDef(NAME, [role("w", 1)])).calls == 1
    assert jobs_named(NAME) == []


def test_more_cpus_than_any_node_has_is_a_no_in_slurms_words(sched: SlurmScheduler) -> None:
    answer = check(sched, AppDef(NAME, [role("w", 64)]))
    assert answer.can_run == CanRun.NO
    assert "Requested node configuration is not available" in answer.reason
    assert "w: 1 replica(s) of 64 CPU" in answer.reason
    assert answer.expected_start is None
    assert jobs_named(NAME) == []


def test_a_two_role_heterogeneous_app(sched: SlurmScheduler) -> None:
    yes = check(sched, AppDef(NAME, [role("trainer", 1, replicas=2), role("ps", 2)]))
    assert yes.can_run == CanRun.YES, yes
    assert yes.expected_start is not None
    no = check(sched, AppDef(NAME, [role("trainer", 1), role("ps", 64)]))
    assert no.can_run == CanRun.NO
    assert (
        "trainer: 1 replica(s) of 1 CPU" in no.reason and "ps: 1 replica(s) of 64 CPU" in no.reason
    )
    assert jobs_named(NAME) == []


def test_an_array_app(sched: SlurmScheduler) -> None:
    yes = check(sched, AppDef(NAME, [role("w", 1)], array=ArraySpec(20, parallelism=4)))
    assert yes.can_run == CanRun.YES, yes
    assert yes.expected_start is not None
    no = check(sched, AppDef(NAME, [role("w", 64)], array=ArraySpec(20)))
    assert no.can_run == CanRun.NO and "not available" in no.reason
    assert jobs_named(NAME) == []


def test_through_the_runner(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    with get_runner("cap") as runner:
        cfg = {"job_dir": str(tmp_path / "job")}
        yes = runner.check_capacity(AppDef(NAME, [role("w", 1)]), "slurm", cfg)
        no = runner.check_capacity(AppDef(NAME, [role("w", 64)]), "slurm", cfg)
    assert yes.can_run == CanRun.YES and yes.expected_start is not None
    assert no.can_run == CanRun.NO
    assert not (tmp_path / "job").exists()  # nothing is prepared for a job that is not made
    assert jobs_named(NAME) == []


@pytest.fixture
def full_cluster(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[str]:
    """Both nodes taken by one exclusive job with a 10-minute limit, for as long as the test
    runs (it is cancelled at once afterwards)."""
    job = slurm(
        "sbatch",
        "--parsable",
        "--nodes=2",
        "--exclusive",
        "--time=10",
        f"--job-name=blocker{NAME}",
        f"--output={tmp_path}/blocker-%j.out",
        "--wrap=sleep 300",
    ).strip()
    try:
        wait_until(
            lambda: slurm("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING",
            "the blocking job to run",
        )
        yield job
    finally:
        subprocess.run(["scancel", job], capture_output=True, timeout=60, check=False)


def test_busy_nodes_are_a_no_with_the_start_slurm_expects(
    sched: SlurmScheduler, full_cluster: str
) -> None:
    answer = check(sched, AppDef(NAME, [role("w", 1)]))
    assert answer.can_run == CanRun.NO, answer
    assert answer.expected_start is not None
    # the blocker may run 10 minutes: Slurm expects to start the app only then
    assert answer.expected_start > datetime.now().astimezone() + timedelta(seconds=START_MARGIN_S)
    assert "busy" in answer.reason
    assert jobs_named(NAME) == []


# --- a node lost under a running job --------------------------------------------------------


def node_state(node: str) -> str:
    return slurm("sinfo", "-h", "-N", "-n", node, "-o", "%T").split()[0]


def restore(node: str) -> None:
    """Resumes ``node`` if it is down (Slurm refuses to resume a node that is not) and waits
    until it takes jobs again."""
    if any(s in node_state(node) for s in ("down", "drain", "fail")):
        subprocess.run(
            ["scontrol", "update", f"nodename={node}", "state=resume"],
            capture_output=True,
            timeout=60,
            check=False,
        )
    wait_until(
        lambda: not any(s in node_state(node) for s in ("down", "drain", "fail", "*")),
        f"{node} to take jobs again",
    )


def test_a_job_whose_node_goes_down_fails_as_infrastructure(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    app = AppDef(f"nf{NAME}", [role("w", 1)])
    cfg = {"job_dir": str(tmp_path / "job"), "sbatch_args": ["--nodelist=node1"]}
    with get_runner("nf") as runner:
        handle = runner.run(app, "slurm", cfg)  # max_retries=0: --no-requeue
        app_id = handle.rsplit("/", 1)[1]
        try:
            wait_until(
                lambda: (s := runner.status(handle)) is not None and s.state == AppState.RUNNING,
                "the app to run",
            )

            def others() -> set[str]:
                return set(slurm("squeue", "-h", "-w", "node1", "-o", "%A").split()) - {app_id}

            # other tests' jobs must not be lost with the node: wait until only ours is there
            wait_until(lambda: not others(), "node1 to run no other test's job", timeout=300)
            slurm("scontrol", "update", "nodename=node1", "state=down", "reason=anylaunch-test")
            status = wait_until(
                lambda: (s := runner.status(handle)) is not None and s.state.is_terminal() and s,
                "the app to end",
            )
        finally:
            runner.cancel(handle)
            restore("node1")
    assert status.state == AppState.FAILED, status
    assert "NODE_FAIL" in status.msg
    error = json.loads(status.structured_error_msg)
    assert error["category"] == "infrastructure" and error["slurm_state"] == "NODE_FAIL"
    assert failure_category(status) == FailureCategory.INFRASTRUCTURE
    # the cluster is whole again: both nodes take jobs
    assert all(not any(s in node_state(n) for s in ("down", "drain")) for n in ("node1", "node2"))


@pytest.mark.parametrize(
    ("slurm_state", "category"),
    [
        ("NODE_FAIL", FailureCategory.INFRASTRUCTURE),
        ("PREEMPTED", FailureCategory.INFRASTRUCTURE),
        ("BOOT_FAIL", FailureCategory.INFRASTRUCTURE),
        ("OUT_OF_MEMORY", FailureCategory.OUT_OF_MEMORY),
        ("FAILED", FailureCategory.APPLICATION),
        ("TIMEOUT", FailureCategory.APPLICATION),
    ],
)
def test_each_slurm_end_state_declares_its_failure_category(
    slurm_state: str, category: FailureCategory
) -> None:
    # (preemption and boot failures cannot be caused on this cluster: the records are Slurm's)
    job = SlurmJob("9", "9", 0, "a:w", slurm_state, reason="None", exit_code=1, num_tasks=1)
    desc = _describe("9", [job])
    status = AppStatus(desc.state, msg=desc.msg, structured_error_msg=desc.structured_error_msg)
    assert status.state == AppState.FAILED
    assert failure_category(status) == category
