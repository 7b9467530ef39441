"""Reattach on retry without ``task_state_store`` (Airflow < 3.3).

Airflow 3.3's ``ResumableJobMixin`` keeps the app handle in ``task_state_store``. Older
Airflow has no such store, so the operator labels its app instead, the way
KubernetesPodOperator labels its pods for ``reattach_on_restart``: every role's env carries
``ANYLAUNCH_AIRFLOW_TASK_INSTANCE={dag_id}/{run_id}/{task_id}/{map_index}``. A later try of
the same task instance (``try_number > 1``) lists the scheduler's live apps, adopts the
newest one carrying its label and waits for it instead of launching a second copy. A
finished app (or one being cancelled) is never adopted: the retry launches afresh.
``durable=False`` turns both the label and the search off.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ENV_TASK_INSTANCE", "IdentityReattachMixin", "task_instance_label"]

#: The env variable carrying the launching task instance's identity.
ENV_TASK_INSTANCE = "ANYLAUNCH_AIRFLOW_TASK_INSTANCE"


def task_instance_label(ti: Any) -> str:
    """The identity of a task instance, without its try number (a retry shares it).

    >>> from types import SimpleNamespace
    >>> task_instance_label(SimpleNamespace(dag_id="etl", run_id="manual__1", task_id="t"))
    'etl/manual__1/t/-1'
    """
    map_index = getattr(ti, "map_index", -1)
    return f"{ti.dag_id}/{ti.run_id}/{ti.task_id}/{-1 if map_index is None else map_index}"


class IdentityReattachMixin:
    """The shape of Airflow 3.3's ``ResumableJobMixin``, durable through the app's label.

    The operator provides ``submit_job``, ``get_job_status``, ``is_job_active``,
    ``poll_until_complete``, ``get_job_result`` and ``find_labelled_job`` (which returns
    the handle of its live labelled app, or None).
    """

    external_id_key: str = "remote_job_id"
    #: the operator labels its apps (see ``ENV_TASK_INSTANCE``) when this is True
    reattach_by_label: bool = True

    def __init__(self, *, durable: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.durable = durable

    def execute_resumable(self, context: Any) -> Any:
        external_id = self._adoptable(context) if self.durable else None
        if external_id is None:
            external_id = self.submit_job(context)  # type: ignore[attr-defined]
        self.poll_until_complete(external_id, context)  # type: ignore[attr-defined]
        return self.get_job_result(external_id, context)  # type: ignore[attr-defined]

    def _adoptable(self, context: Any) -> str | None:
        ti = context["ti"]
        if int(getattr(ti, "try_number", 1) or 1) <= 1:
            return None  # a first try has no earlier app
        log = self.log  # type: ignore[attr-defined]
        handle: str | None = self.find_labelled_job(context)  # type: ignore[attr-defined]
        if handle is None:
            log.info("No live job of an earlier try found, submitting fresh")
            return None
        status = self.get_job_status(handle, context)  # type: ignore[attr-defined]
        if self.is_job_active(status):  # type: ignore[attr-defined]
            log.info("Reconnecting to existing job %s (state %s)", handle, status)
            return handle
        log.info("Prior job in terminal state, resubmitting fresh (%s: %s)", handle, status)
        return None
