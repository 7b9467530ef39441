"""The orphan reaper on real Slurm jobs: Slurm cannot describe a job's env, so the owner the
runner puts into every role's env is also stamped into the job (its comment), and the reaper
reads it from there. Without it a Slurm job whose engine run was lost would never be reaped."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import anylaunch.specs as specs
from anylaunch.runner import get_runner
from anylaunch.runner.reap import OwnerState, reap
from anylaunch.schedulers.common.job_metadata import OWNER_KEY
from tests.schedulers.slurm.cluster import SlurmCluster


class TableChecker:
    """The answers of an engine about its runs (the engines' own checkers are tested against
    the real engines in their suites)."""

    engine = "prefect"

    def __init__(self, answers: Mapping[str, OwnerState]) -> None:
        self.answers = answers

    def check(self, owners: Sequence[str]) -> Mapping[str, OwnerState]:
        return {o: self.answers[o] for o in owners if o in self.answers}


def test_a_slurm_job_whose_owner_is_gone_is_reaped_and_one_whose_owner_lives_is_kept(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    sleeper = specs.AppDef(
        name="reapme",
        roles=[
            specs.Role(
                name="s",
                image="",
                entrypoint=sys.executable,
                args=["-c", "import time; time.sleep(600)"],
                resource=specs.Resource(cpu=1, gpu=0, memMB=64),
            )
        ],
    )
    lost, alive = f"prefect:{uuid.uuid4()}", f"prefect:{uuid.uuid4()}"
    with get_runner("reaper") as runner:
        handles = {
            owner: runner.run(
                sleeper, "slurm", {"job_dir": str(tmp_path / owner[-8:])}, parent_run_id=owner
            )
            for owner in (lost, alive)
        }
        try:
            for owner, handle in handles.items():
                described = runner.describe(handle)
                assert described is not None
                assert described.metadata.get(OWNER_KEY) == owner  # read back from the job
            report = reap(
                runner,
                ["slurm"],
                [TableChecker({lost: OwnerState.GONE, alive: OwnerState.ALIVE})],
            )
            assert handles[lost] in report.cancelled
            assert handles[alive] not in report.cancelled
            deadline = time.monotonic() + 120
            while (status := runner.status(handles[lost])) is None or not specs.is_terminal(
                status.state
            ):
                assert time.monotonic() < deadline, f"the orphan never ended: {status}"
                time.sleep(0.5)
            assert status.state == specs.AppState.CANCELLED
            kept = runner.status(handles[alive])
            assert kept is not None and not specs.is_terminal(kept.state)
        finally:
            for handle in handles.values():
                runner.cancel(handle)
