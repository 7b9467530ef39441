"""Reaping apps whose Airflow task ended without cancelling them.

Apps launched by :class:`~airflow_anylaunch.operators.AnylaunchOperator` carry their owner
``airflow:{dag_id}/{run_id}/{task_id}``. A task instance that is no longer running, queued,
deferred or waiting for a retry has ended; one that Airflow does not know is gone.

- :class:`AirflowOwnerChecker` asks through a function returning task states; in a task,
  :class:`AnylaunchReapOperator` uses the Task SDK (``RuntimeTaskInstance.get_task_states``),
  and :class:`AirflowRestChecker` asks the REST API (what ``anylaunch reap --engine airflow``
  uses).
- :class:`AnylaunchReapOperator`: put it in a DAG on a schedule to reap periodically.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_anylaunch._compat import BaseOperator

if TYPE_CHECKING:
    from airflow.sdk.definitions.context import Context

    from anylaunch.runner.reap import OwnerState

__all__ = ["AirflowOwnerChecker", "AirflowRestChecker", "AnylaunchReapOperator", "owner_checker"]

#: The environment variable holding the api-server's bearer token for :func:`owner_checker`.
TOKEN_ENV = "ANYLAUNCH_AIRFLOW_TOKEN"

#: Task instance states in which the task may still use its app.
_LIVE_STATES = frozenset(
    {
        "running",
        "queued",
        "scheduled",
        "deferred",
        "up_for_retry",
        "up_for_reschedule",
        "restarting",
        "none",
        "",
    }
)


def parse_owner(owner: str) -> tuple[str, str, str] | None:
    """``airflow:{dag_id}/{run_id}/{task_id}`` as (dag_id, run_id, task_id), or None.

    >>> parse_owner("airflow:etl/manual__2026-01-01/train")
    ('etl', 'manual__2026-01-01', 'train')
    """
    body = owner.partition(":")[2]
    dag_id, _, rest = body.partition("/")
    run_id, _, task_id = rest.rpartition("/")
    return (dag_id, run_id, task_id) if dag_id and run_id and task_id else None


class AirflowOwnerChecker:
    """Decides owners' states from a lookup ``(dag_id, run_id, task_id) -> state or None``
    (None: Airflow does not know the task instance)."""

    engine = "airflow"

    def __init__(self, task_state: Callable[[str, str, str], str | None]) -> None:
        self.task_state = task_state

    def check(self, owners: Sequence[str]) -> Mapping[str, OwnerState]:
        from anylaunch.runner.reap import OwnerState

        states: dict[str, OwnerState] = {}
        for owner in owners:
            parsed = parse_owner(owner)
            if parsed is None:
                states[owner] = OwnerState.UNKNOWN
                continue
            state = self.task_state(*parsed)
            if state is None:
                states[owner] = OwnerState.GONE
            else:
                live = str(state).lower().rpartition(".")[2] in _LIVE_STATES
                states[owner] = OwnerState.ALIVE if live else OwnerState.ENDED
        return states


class AirflowRestChecker(AirflowOwnerChecker):
    """Asks an api-server (``base_url``, with a bearer ``token``) through the REST API v2."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        super().__init__(self._rest_state)

    def _rest_state(self, dag_id: str, run_id: str, task_id: str) -> str | None:
        quote = urllib.parse.quote
        path = f"/api/v2/dags/{quote(dag_id)}/dagRuns/{quote(run_id, safe='')}/taskInstances/{quote(task_id)}"
        request = urllib.request.Request(self.base_url + path)
        request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return str(json.load(response).get("state") or "none")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise


def owner_checker(*, airflow_url: str | None = None, **options: str | None) -> AirflowRestChecker:
    """The ``airflow`` owner-checker plugin (``anylaunch reap --engine airflow``): asks the
    api-server at ``airflow_url`` with the token in ``$ANYLAUNCH_AIRFLOW_TOKEN``.

    Raises:
        InvalidSpecError: no URL, or no token
    """
    token = os.environ.get(TOKEN_ENV, "")
    if not airflow_url or not token:
        from anylaunch.specs.errors import InvalidSpecError

        raise InvalidSpecError(
            f"--airflow-url/${TOKEN_ENV}",
            airflow_url,
            "the airflow engine is asked through an api-server's REST API",
            f"pass --airflow-url http://host:8080 and export {TOKEN_ENV}=<a JWT>",
        )
    return AirflowRestChecker(airflow_url, token)


def _sdk_task_state(dag_id: str, run_id: str, task_id: str) -> str | None:
    try:
        from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
    except ImportError:  # Airflow 2: a task may read the metadata DB itself
        return _db_task_state(dag_id, run_id, task_id)

    states = RuntimeTaskInstance.get_task_states(
        dag_id=dag_id, run_ids=[run_id], task_ids=[task_id]
    )
    by_task = states.get(run_id) or {}
    if task_id not in by_task:
        return None
    return str(by_task[task_id] or "none")


def _db_task_state(dag_id: str, run_id: str, task_id: str) -> str | None:
    from airflow.models.taskinstance import TaskInstance  # type: ignore[attr-defined,unused-ignore]
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        found = session.scalars(
            select(TaskInstance.state).where(
                TaskInstance.dag_id == dag_id,
                TaskInstance.run_id == run_id,
                TaskInstance.task_id == task_id,
            )
        ).all()
    if not found:
        return None
    live = [str(state or "none") for state in found]  # mapped: live if any map index is
    return next((s for s in live if s.rpartition(".")[2] in _LIVE_STATES), live[0])


class AnylaunchReapOperator(BaseOperator):
    """Cancels the live apps of ``schedulers`` whose Airflow task ended (or only reports them
    with ``dry_run``); returns the report (orphans, cancelled, errors) as its XCom.

    Args:
        schedulers: where to look, e.g. ``["kubernetes"]``
        dry_run: report only, cancel nothing
    """

    template_fields: Sequence[str] = ("schedulers",)

    def __init__(self, *, schedulers: Sequence[str], dry_run: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(schedulers, str) or not all(isinstance(s, str) for s in schedulers):
            from anylaunch.specs.errors import InvalidSpecError

            raise InvalidSpecError(
                "schedulers", schedulers, "must be a list of scheduler names", "e.g. ['kubernetes']"
            )
        if not isinstance(dry_run, bool):
            from anylaunch.specs.errors import InvalidSpecError

            raise InvalidSpecError("dry_run", dry_run, "must be a bool", "pass True or False")
        from airflow_anylaunch._common import is_template
        from anylaunch.runner.engine_names import check_scheduler_name

        for i, scheduler in enumerate(schedulers):
            if not is_template(scheduler):  # a template is checked once rendered
                check_scheduler_name(f"schedulers[{i}]", scheduler)
        self.schedulers = list(schedulers)
        self.report_only = dry_run  # BaseOperator.dry_run is a method

    def execute(self, context: Context) -> dict[str, Any]:
        from anylaunch.runner import get_runner
        from anylaunch.runner.engine_names import check_scheduler_name
        from anylaunch.runner.reap import reap
        from anylaunch.specs.errors import InvalidSpecError

        try:  # the rendered names (a template was not checked when the DAG was parsed)
            for i, scheduler in enumerate(self.schedulers):
                check_scheduler_name(f"schedulers[{i}]", scheduler)
        except InvalidSpecError as e:
            from airflow_anylaunch.exceptions import AnylaunchInputError

            raise AnylaunchInputError(f"{type(e).__name__}: {e}") from e
        with get_runner() as runner:
            report = reap(
                runner,
                self.schedulers,
                [AirflowOwnerChecker(_sdk_task_state)],
                dry_run=self.report_only,
            )
        self.log.info("%s", report.summary())
        return {
            "orphans": [a.handle for a in report.actions if a.action == "cancel"],
            "cancelled": report.cancelled,
            "errors": report.errors,
            "dry_run": self.report_only,
        }
