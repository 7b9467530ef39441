"""The incumbent way to wait on Slurm jobs from Airflow, for the engine-scale benchmark: submit
with ``sbatch``, then defer to a trigger that polls its own job every ``poll_interval`` seconds
with ``squeue -j ID`` and, once squeue no longer knows the job, ``sacct -j ID`` (what TorchX's
Slurm scheduler does per ``describe``). One subprocess per job per poll: the cost grows with
the number of waiting jobs."""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
from collections.abc import AsyncIterator, Mapping
from typing import Any

from airflow.sdk import BaseOperator
from airflow.triggers.base import BaseTrigger, TriggerEvent

TERMINAL = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
}


async def _run(*argv: str) -> str:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    out, _ = await process.communicate()
    return out.decode().strip()


class NaiveSlurmTrigger(BaseTrigger):
    """Polls one Slurm job until it ends; fires ``{"job_id", "state"}``."""

    def __init__(self, job_id: str, poll_interval: float) -> None:
        super().__init__()
        self.job_id = job_id
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"job_id": self.job_id, "poll_interval": self.poll_interval},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            state = await _run("squeue", "-h", "-j", self.job_id, "-o", "%T")
            if not state:  # squeue forgot the job: ask accounting
                lines = await _run("sacct", "-n", "-X", "-P", "-j", self.job_id, "-o", "State")
                state = lines.split()[0] if lines else ""
            state = state.split()[0] if state else ""
            if state in TERMINAL:
                yield TriggerEvent({"job_id": self.job_id, "state": state})
                return
            await asyncio.sleep(self.poll_interval)


class NaiveSlurmOperator(BaseOperator):
    """``sbatch --wrap script`` with ``env``, then waits deferred on ``NaiveSlurmTrigger``."""

    template_fields = ("env",)

    def __init__(
        self, *, script: str, env: Mapping[str, str], poll_interval: float, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.script = script
        self.env = env
        self.poll_interval = poll_interval

    def execute(self, context: Any) -> None:
        job_dir = tempfile.mkdtemp(prefix="naive-slurm-")
        result = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "--export=ALL",
                f"--chdir={job_dir}",
                "-c",
                "1",
                "--mem=64M",
                "--wrap",
                self.script,
            ],
            env={**os.environ, **dict(self.env)},
            capture_output=True,
            text=True,
            check=True,
        )
        job_id = result.stdout.strip().split(";")[0]
        self.defer(
            trigger=NaiveSlurmTrigger(job_id, self.poll_interval), method_name="execute_complete"
        )

    def execute_complete(self, context: Any, event: dict[str, Any]) -> None:
        if event["state"] != "COMPLETED":
            raise RuntimeError(f"slurm job {event['job_id']} ended {event['state']}")
