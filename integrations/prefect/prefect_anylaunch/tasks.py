"""Prefect tasks over the anylaunch lifecycle: launch, wait (stream logs), cancel, read logs.

Launching and waiting are separate task runs: the handle is the launch task's result, so a
retried wait attaches to the same app instead of launching another.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext

from anylaunch.runner import get_runner
from anylaunch.specs.api import AppHandle, AppStatus, parse_app_handle
from anylaunch.specs.checks import check_seconds, check_type
from anylaunch.specs.errors import InvalidSpecError
from prefect_anylaunch import _prefect
from prefect_anylaunch.arrays import end_table, sweep_params
from prefect_anylaunch.blocks import AnylaunchJob

__all__ = ["cancel_app", "get_app_logs", "launch_app", "stop_app", "wait_for_app"]

_STREAMS = ("combined", "stdout", "stderr")


def _check_job(job: AnylaunchJob) -> AnylaunchJob:
    # Prefect passes flow and task parameters as they are: a job may be anything at run time
    check_type(
        "job",
        job,
        AnylaunchJob,
        "must be an AnylaunchJob block",
        "pass AnylaunchJob(component=..., ...) or AnylaunchJob.load('name')",
    )
    return job


# Launching has a side effect: never answer it from a cache, even with results persisted.
@task(cache_policy=NO_CACHE)
def launch_app(job: AnylaunchJob) -> AppHandle:
    """Dry-runs and launches the job's app and returns its handle.

    The flow run gets a label with the handle (cancel hooks find the app by it), a markdown
    artifact shows the request, a link artifact the app's UI.

    Raises:
        InvalidSpecError (and subclasses): bad input; nothing was launched
    """
    return _check_job(job)._trigger().app_handle


@task(cache_policy=NO_CACHE)
def wait_for_app(app_handle: AppHandle, job: AnylaunchJob | None = None) -> dict[str, Any]:
    """Waits for a launched app, streaming its logs into this task's log; returns its final
    status as a dict. With ``retries``, a retry attaches to the same app.

    Args:
        app_handle: what ``launch_app`` returned
        job: the watch settings (poll interval, timeouts, which logs); default: the defaults
            of AnylaunchJob

    Raises:
        AnylaunchAppFailedError: the app ended FAILED or CANCELLED (with its message)
        AnylaunchAppTimeoutError: a startup or run timeout of ``job`` expired
        AnylaunchAppLostError: the scheduler no longer knows the app, or kept failing
    """
    parse_app_handle(app_handle)
    run = _check_job(job if job is not None else AnylaunchJob()).attach(app_handle)
    ctx = TaskRunContext.get()
    if ctx is not None and ctx.task_run.run_count > 1:
        get_run_logger().info(
            "attempt %d: attaching to %s (launched before)", ctx.task_run.run_count, app_handle
        )
    return run.result_of(run._wait())


def stop_app(
    app_handle: AppHandle,
    wait_timeout_s: float = 30.0,
    job: AnylaunchJob | None = None,
    logger: logging.Logger | logging.LoggerAdapter[Any] | None = None,
) -> AppStatus | None:
    """Cancels the app unless it has ended, and waits up to ``wait_timeout_s`` for its end.
    Returns its last status (None if the scheduler does not know it). Plain function: usable
    in ``finally`` blocks and hooks, where a task cannot run.
    """
    wait_timeout_s = check_seconds("wait_timeout_s", wait_timeout_s, positive=False)
    job = job if job is not None else AnylaunchJob()
    log = logger if logger is not None else logging.getLogger(__name__)
    from anylaunch.runner.session import cancel_app as cancel_by_rule

    with job.runner() as runner:
        log.warning("cancelling %s unless it ended", app_handle)
        status = cancel_by_rule(app_handle, wait_timeout_s, runner=runner)
        if status is not None and not status.is_terminal():
            log.warning("%s did not stop within %gs", app_handle, wait_timeout_s)
    if status is not None:
        log.info("%s ended %s", app_handle, status.state.name)
        if job.create_artifacts:
            run = job.attach(app_handle)
            params = sweep_params(run.app)
            _prefect.create_artifact(
                "table", **end_table(status, run.app_name, app_handle, run.redact, params)
            )
    return status


@task(cache_policy=NO_CACHE)
def cancel_app(
    app_handle: AppHandle, wait_timeout_s: float = 30.0, job: AnylaunchJob | None = None
) -> dict[str, Any] | None:
    """Cancels an app and waits up to ``wait_timeout_s`` seconds for it to end; returns its
    last status as a dict (None if the scheduler does not know it), secrets of ``job``
    masked. A no-op for an app that has ended."""
    parse_app_handle(app_handle)
    wait = check_seconds("wait_timeout_s", wait_timeout_s, positive=False)
    job = _check_job(job if job is not None else AnylaunchJob())
    status = stop_app(app_handle, wait, job, logger=get_run_logger())
    return None if status is None else job.attach(app_handle).result_of(status)


@task(cache_policy=NO_CACHE)
def get_app_logs(
    app_handle: AppHandle,
    role_name: str | None = None,
    k: int | None = None,
    regex: str | None = None,
    streams: str | None = None,
    job: AnylaunchJob | None = None,
) -> dict[str, list[str]]:
    """The log lines the app has written so far, by ``role/replica``, secrets of ``job``
    masked.

    Args:
        app_handle: the app
        role_name: only this role (default: every role)
        k: only this replica of ``role_name``
        regex: only lines matching it
        streams: "combined" (default), "stdout" or "stderr"
        job: whose secrets are masked and whose session is used
    """
    from anylaunch.runner.logs import find_replicas
    from anylaunch.schedulers.api import Stream

    parse_app_handle(app_handle)
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
        raise InvalidSpecError("k", k, "must be a replica index >= 0", "e.g. k=0")
    if k is not None and role_name is None:
        raise InvalidSpecError("k", k, "needs role_name", "pass role_name with k")
    if streams is not None and streams not in _STREAMS:
        raise InvalidSpecError("streams", streams, "is not a stream", f"use one of {_STREAMS}")
    if regex is not None:
        try:
            re.compile(regex)
        except (re.error, TypeError) as e:
            raise InvalidSpecError("regex", regex, f"is not a regex ({e})", "fix it") from None
    job = _check_job(job if job is not None else AnylaunchJob())
    redact = job.attach(app_handle).redact
    logs: dict[str, list[str]] = {}
    with get_runner(job.session_name) as runner:
        replicas = find_replicas(runner, app_handle, role_name, None if k is None else [k])
        for role, i in replicas:
            lines = runner.log_lines(
                app_handle,
                role,
                i,
                regex=regex,
                streams=None if streams is None else Stream(streams),
            )
            logs[f"{role}/{i}"] = [redact(line.rstrip("\n")) for line in lines]
    return logs
