"""A Dagster run worker for the tests: executes one job of dagster_jobs.py against a
persistent instance, in this process's main thread, the way a launched run executes.

Usage: python run_worker.py INSTANCE_DIR JOB_NAME RUN_ID

Terminating a run (``dagster run terminate``, the UI) marks it CANCELING in the instance and
the run worker interrupts its main thread (Dagster's run launchers and code servers do it with
SIGINT); the running step sees DagsterExecutionInterruptedError. The watcher thread below does
the same here.
"""

import importlib.util
import os
import signal
import sys
import threading
from pathlib import Path

import dagster as dg
from dagster._core.instance.ref import InstanceRef


def interrupt_when_canceling(instance_dir: str, run_id: str, stop: threading.Event) -> None:
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(instance_dir)) as instance:
        while not stop.wait(0.2):
            run = instance.get_run_by_id(run_id)
            if run is not None and run.status == dg.DagsterRunStatus.CANCELING:
                print(f"run {run_id} is CANCELING: interrupting the main thread", flush=True)
                os.kill(os.getpid(), signal.SIGINT)
                return


def main() -> int:
    instance_dir, job_name, run_id = sys.argv[1:4]
    spec = importlib.util.spec_from_file_location(
        "dagster_jobs", Path(__file__).with_name("dagster_jobs.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    job = getattr(module, job_name)
    stop = threading.Event()
    watcher = threading.Thread(
        target=interrupt_when_canceling, args=(instance_dir, run_id, stop), daemon=True
    )
    watcher.start()
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(instance_dir)) as instance:
        try:
            result = job.execute_in_process(instance=instance, run_id=run_id, raise_on_error=False)
            print(f"run {run_id} success={result.success}", flush=True)
        finally:
            stop.set()
            watcher.join(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
