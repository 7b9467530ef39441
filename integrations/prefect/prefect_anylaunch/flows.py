"""The ``run_app`` flow: launch, wait, and never leave the app running when the flow does
not finish normally.

Two layers make sure of it. The flow's ``finally`` cancels the app when the wait fails or
times out, and when the flow is interrupted in-process (a Prefect timeout, SIGTERM, Ctrl-C):
Python unwinds through it before the process ends. The ``on_cancellation`` / ``on_crashed``
hooks cancel every app the flow run launched, found through the flow run's labels, so they
also work where no ``finally`` runs: in a user's own flow, or in the runner or worker process
that runs the hooks of a flow run whose process was killed.
"""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from prefect import Flow, flow, get_run_logger
from prefect.client.schemas.objects import FlowRun, State

from anylaunch.specs.checks import check_seconds
from anylaunch.specs.errors import InvalidSpecError
from prefect_anylaunch import _prefect
from prefect_anylaunch.blocks import AnylaunchJob
from prefect_anylaunch.tasks import launch_app, stop_app, wait_for_app

__all__ = ["cancel_launched_apps", "run_app"]


def cancel_launched_apps(flow: Flow[..., Any], flow_run: FlowRun, state: State[Any]) -> None:
    """Flow hook for ``on_cancellation`` and ``on_crashed``: cancels every app the flow run
    launched (with ``launch_app`` or ``AnylaunchJob.trigger``) that is still running.

    Example:
        ```python
        @flow(on_cancellation=[cancel_launched_apps], on_crashed=[cancel_launched_apps])
        def my_flow(): ...
        ```
    """
    from prefect.logging.loggers import flow_run_logger

    logger = flow_run_logger(flow_run, flow)
    handles = _prefect.launched_handles(flow_run.id)
    for handle in handles:
        try:
            # no waiting: a runner may kill this process soon, the request is what matters
            stop_app(handle, wait_timeout_s=0, logger=logger)
        except Exception as e:  # try the other apps before giving up
            logger.error("could not cancel %s: %s", handle, e)


def _load_job(job: AnylaunchJob | str) -> AnylaunchJob:
    if isinstance(job, AnylaunchJob):
        return job
    if isinstance(job, str) and job:
        loaded = AnylaunchJob.load(job)
        if isinstance(loaded, AnylaunchJob):
            return loaded
    raise InvalidSpecError(
        "job",
        job if isinstance(job, str) else type(job).__name__,
        "must be an AnylaunchJob or the name of a saved one",
        "pass AnylaunchJob(...) or a block document name such as 'my-job'",
    )


@flow(on_cancellation=[cancel_launched_apps], on_crashed=[cancel_launched_apps])
def run_app(
    job: AnylaunchJob | str,
    wait_retries: int = 0,
    wait_retry_delay_s: float = 10.0,
    cancel_wait_s: float = 30.0,
) -> dict[str, Any]:
    """Launches the job's app, waits for it (its logs stream into the run log) and returns
    its final status as a dict. The app is cancelled if the wait fails or times out, or the
    flow is cancelled, times out or crashes.

    Args:
        job: the job, or the name of a saved AnylaunchJob block
        wait_retries: how often the wait is retried (each retry attaches to the same app)
        wait_retry_delay_s: seconds between wait retries
        cancel_wait_s: how long to wait for a cancelled app to stop

    Raises:
        AnylaunchAppFailedError: the app ended FAILED or CANCELLED (with its message)
        AnylaunchAppTimeoutError: a startup or run timeout of the job expired
        AnylaunchAppLostError: the scheduler no longer knows the app, or kept failing
        InvalidSpecError (and subclasses): bad input; nothing was launched
    """
    if isinstance(wait_retries, bool) or not isinstance(wait_retries, int) or wait_retries < 0:
        raise InvalidSpecError("wait_retries", wait_retries, "must be an int >= 0", "e.g. 2")
    wait_retry_delay_s = check_seconds("wait_retry_delay_s", wait_retry_delay_s, positive=False)
    cancel_wait_s = check_seconds("cancel_wait_s", cancel_wait_s, positive=False)
    the_job = _load_job(job)
    handle: str | None = None
    finished = False
    try:
        handle = launch_app(the_job)
        result = wait_for_app.with_options(
            retries=wait_retries, retry_delay_seconds=wait_retry_delay_s
        )(handle, the_job)
        finished = True
        return result
    finally:
        if not finished:
            logger = get_run_logger()
            # interrupted after the launch but before the handle came back: the flow run's
            # label (written right after the launch) still names the app
            for launched in [handle] if handle else _launched_here(logger):
                stop_app(launched, cancel_wait_s, the_job, logger)


def _launched_here(logger: logging.Logger | logging.LoggerAdapter[Any]) -> list[str]:
    flow_run_id = _prefect.current_flow_run_id()
    if flow_run_id is None:
        return []
    try:
        return _prefect.launched_handles(UUID(flow_run_id))
    except Exception as e:
        logger.error("could not read which apps flow run %s launched: %s", flow_run_id, e)
        return []
