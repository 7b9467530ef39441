"""Stand-ins for Airflow features newer than the installed Airflow (imported only there).

On Airflow < 3.3 there is no ``ResumableJobMixin`` / ``task_state_store``: the operator then
submits and waits without reattaching on retry (a retry launches a new app).
"""

from __future__ import annotations

from typing import Any


class ResumableJobMixin:
    """The shape of Airflow 3.3's ``ResumableJobMixin`` without its durability."""

    external_id_key: str = "remote_job_id"

    def __init__(self, *, durable: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.durable = durable

    def execute_resumable(self, context: Any) -> Any:
        external_id = self.submit_job(context)  # type: ignore[attr-defined]
        self.poll_until_complete(external_id, context)  # type: ignore[attr-defined]
        return self.get_job_result(external_id, context)  # type: ignore[attr-defined]


def _masker(name: str) -> Any:
    import importlib

    # Airflow 3 (the task SDK), then Airflow 2
    for module in ("airflow.sdk.log", "airflow.utils.log.secrets_masker"):
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    return None


def mask_secret(value: str) -> None:
    """Registers ``value`` with Airflow's own secrets masker (every Airflow log line then
    masks it too), on Airflow 3 (``airflow.sdk.log``) or 2 (``airflow.utils.log``). Without a
    masker to tell, our own redactor still masks our lines."""
    register = _masker("mask_secret")
    if register is not None:
        register(value)


async def amask_secret(value: str) -> None:
    """:func:`mask_secret` for a trigger: on the triggerer's event loop, Airflow's masker must
    be told asynchronously (its sync form would block the loop on the supervisor channel)."""
    register = _masker("amask_secret")
    if register is not None:
        await register(value)
        return
    mask_secret(value)
