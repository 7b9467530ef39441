"""The few Prefect calls the blocks, tasks and flow share: run context, artifacts, and the
flow-run labels that remember which apps a flow run launched."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any
from uuid import UUID

from anylaunch.specs.api import NONE, AppHandle, AppStatus, parse_app_handle

#: Flow-run label under which a launched app's handle is kept (one label per app): visible
#: in the UI while the app runs, and read by the cancel hooks, possibly in another process.
LABEL_PREFIX = "anylaunch.app."
_ARTIFACT_KEY_UNSAFE = re.compile(r"[^a-z0-9-]+")

_log = logging.getLogger(__name__)


def current_flow_run_id() -> str | None:
    """The id of the flow run this code runs in (directly or in one of its tasks), or None."""
    from prefect.context import FlowRunContext, TaskRunContext

    task_ctx = TaskRunContext.get()
    if task_ctx is not None:
        flow_run_id = task_ctx.task_run.flow_run_id
        return str(flow_run_id) if flow_run_id else None
    flow_ctx = FlowRunContext.get()
    if flow_ctx is not None and flow_ctx.flow_run is not None:
        return str(flow_ctx.flow_run.id)
    return None


def current_owner() -> str | None:
    """The owner an app launched here carries (``prefect:{flow_run_id}``), for the reaper."""
    from anylaunch.runner.reap import owner_id

    flow_run_id = current_flow_run_id()
    return owner_id("prefect", flow_run_id) if flow_run_id else None


def in_run_context() -> bool:
    """True inside a flow run or a task run (where artifacts can be attached)."""
    from prefect.context import FlowRunContext, TaskRunContext

    return TaskRunContext.get() is not None or FlowRunContext.get() is not None


def artifact_key(app_name: str, kind: str) -> str:
    """An artifact key (lowercase letters, digits, dashes) for an app and a kind of artifact.

    >>> artifact_key("My_Train.v2", "request")
    'anylaunch-my-train-v2-request'
    """
    slug = _ARTIFACT_KEY_UNSAFE.sub("-", app_name.lower()).strip("-") or "app"
    return f"anylaunch-{slug}-{kind}"


def create_artifact(kind: str, **kwargs: Any) -> None:
    """Creates a link, markdown or table artifact in the current run; logs (never raises) if
    the API refuses: an artifact must not fail or orphan a launched app."""
    from prefect import artifacts

    creators: dict[str, Callable[..., Any]] = {
        "link": artifacts.create_link_artifact,
        "markdown": artifacts.create_markdown_artifact,
        "table": artifacts.create_table_artifact,
    }
    create = creators[kind]
    if not in_run_context():
        return
    try:
        # _sync: this code also runs on worker threads of async flows, where the dispatcher
        # would otherwise hand back an un-awaited coroutine
        create(**kwargs, _sync=True)
    except Exception as e:
        _log.warning("could not create the %s artifact: %s", kind, e)


#: How many flow runs up the chain a launch is recorded on (a guard against a cycle).
_MAX_ANCESTORS = 32


def _flow_run_chain(client: Any, flow_run_id: UUID) -> list[UUID]:
    """The flow run and its ancestors (the flow runs whose task or subflow call started it),
    nearest first."""
    chain = [flow_run_id]
    flow_run = client.read_flow_run(flow_run_id)
    while flow_run.parent_task_run_id is not None and len(chain) < _MAX_ANCESTORS:
        parent_id = client.read_task_run(flow_run.parent_task_run_id).flow_run_id
        if parent_id is None or parent_id in chain:
            break
        chain.append(parent_id)
        flow_run = client.read_flow_run(parent_id)
    return chain


def remember_launch(app_handle: AppHandle) -> None:
    """Labels the current flow run and every ancestor flow run with the app's handle (best
    effort): whichever flow in the chain crashes or is cancelled, its hooks find the app. A
    parent flow killed with its subflow (one process) is the one whose hooks run."""
    flow_run_id = current_flow_run_id()
    if flow_run_id is None:
        return
    from prefect.client.orchestration import get_client

    app_id = parse_app_handle(app_handle).app_id
    try:
        with get_client(sync_client=True) as client:
            for run_id in _flow_run_chain(client, UUID(flow_run_id)):
                client.update_flow_run_labels(run_id, {LABEL_PREFIX + app_id: app_handle})
    except Exception as e:
        _log.warning("could not label flow run %s with %s: %s", flow_run_id, app_handle, e)


def launched_handles(flow_run_id: UUID) -> list[AppHandle]:
    """The handles of the apps a flow run or any of its subflow runs launched, from its
    labels."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        labels = client.read_flow_run(flow_run_id).labels
    return [
        str(value)
        for key, value in sorted(labels.items())
        if key.startswith(LABEL_PREFIX) and isinstance(value, str)
    ]


def replica_rows(
    status: AppStatus, redact: Callable[[str], str] | None = None
) -> list[dict[str, Any]]:
    """One row per replica: role, replica id, state, host and error (a table artifact),
    secrets masked by ``redact``.

    >>> from anylaunch.specs.api import AppState, ReplicaStatus, RoleStatus
    >>> s = AppStatus(AppState.SUCCEEDED, roles=[RoleStatus("w", [
    ...     ReplicaStatus(0, AppState.SUCCEEDED, "w", "localhost")])])
    >>> replica_rows(s)
    [{'role': 'w', 'replica': 0, 'state': 'SUCCEEDED', 'host': 'localhost', 'error': ''}]
    """
    if redact is not None:
        from anylaunch.runner.outcome import masked_status

        status = masked_status(status, redact)
    return [
        {
            "role": role.role,
            "replica": rep.id,
            "state": rep.state.name,
            "host": rep.hostname,
            "error": "" if rep.structured_error_msg == NONE else rep.structured_error_msg,
        }
        for role in status.roles
        for rep in role.replicas
    ]
