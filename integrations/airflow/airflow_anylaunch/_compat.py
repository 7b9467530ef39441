"""One import surface over Airflow 2.10+, 3.0-3.2 and 3.3+ (every other module imports
Airflow through here).

Each name is looked up where the installed Airflow keeps it: the task SDK (``airflow.sdk``)
first, then Airflow 2's modules (``airflow.models``, ``airflow.sensors``, ``airflow.hooks``,
``airflow.exceptions``, ``airflow.configuration``). Names are resolved on first use, so
importing the operator imports only ``BaseOperator`` and ``conf``.

>>> from airflow_anylaunch._compat import AIRFLOW_VERSION, AirflowFailException, BaseOperator
>>> AIRFLOW_VERSION >= (2, 10)
True
>>> BaseOperator.__name__, AirflowFailException.__name__
('BaseOperator', 'AirflowFailException')
"""

from __future__ import annotations

import importlib
import re
from typing import TYPE_CHECKING, Any

from airflow import __version__ as _airflow_version

if TYPE_CHECKING:  # mypy checks against the newest Airflow (the task SDK)
    from airflow.sdk import (
        BaseHook,
        BaseOperator,
        BaseOperatorLink,
        BaseSensorOperator,
        PokeReturnValue,
        ResumableJobMixin,
        XComArg,
        conf,
    )
    from airflow.sdk.bases.xcom import BaseXCom
    from airflow.sdk.exceptions import (
        AirflowException,
        AirflowFailException,
        AirflowNotFoundException,
        AirflowTaskTimeout,
        TaskDeferralTimeout,
    )
    from airflow.sdk.execution_time.xcom import XCom

__all__ = [
    "AIRFLOW_VERSION",
    "AIRFLOW_V_3_0_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "AirflowException",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowTaskTimeout",
    "BaseHook",
    "BaseOperator",
    "BaseOperatorLink",
    "BaseSensorOperator",
    "BaseXCom",
    "PokeReturnValue",
    "ResumableJobMixin",
    "TaskDeferralTimeout",
    "XCom",
    "XComArg",
    "amask_secret",
    "conf",
    "is_deferral_timeout",
    "mask_secret",
]


def _version(text: str) -> tuple[int, int, int]:
    """``3.0.6`` / ``2.11.0rc1`` / ``3.3.0.dev0`` as (major, minor, micro).

    >>> _version("2.11.0rc1"), _version("3.3.2")
    ((2, 11, 0), (3, 3, 2))
    """
    parts = [int(p) for p in re.findall(r"\d+", text)[:3]]
    major, minor, micro = [*parts, 0, 0, 0][:3]
    return major, minor, micro


#: The installed Airflow's (major, minor, micro).
AIRFLOW_VERSION = _version(_airflow_version)
AIRFLOW_V_3_0_PLUS = AIRFLOW_VERSION >= (3, 0, 0)
#: ``ResumableJobMixin`` / ``task_state_store`` exist (durable reattach through Airflow).
AIRFLOW_V_3_3_PLUS = AIRFLOW_VERSION >= (3, 3, 0)

_EXC = ("airflow.sdk.exceptions", "airflow.exceptions")
#: name -> the modules that may hold it, newest Airflow first.
_WHERE: dict[str, tuple[str, ...]] = {
    "BaseOperator": ("airflow.sdk", "airflow.models.baseoperator"),
    "BaseSensorOperator": ("airflow.sdk", "airflow.sensors.base"),
    "PokeReturnValue": ("airflow.sdk", "airflow.sensors.base"),
    "conf": ("airflow.sdk", "airflow.configuration"),
    "BaseHook": ("airflow.sdk", "airflow.hooks.base"),
    "BaseOperatorLink": ("airflow.sdk", "airflow.models.baseoperatorlink"),
    # the XCom a link reads (its ``get_value(ti_key=, key=)``), and the cursor's store
    "XCom": ("airflow.sdk.execution_time.xcom", "airflow.models.xcom"),
    "BaseXCom": ("airflow.sdk.bases.xcom", "airflow.models.xcom"),
    "XComArg": ("airflow.sdk", "airflow.models.xcom_arg"),
    "AirflowException": _EXC,
    "AirflowFailException": _EXC,
    "AirflowNotFoundException": _EXC,
    "AirflowTaskTimeout": _EXC,
    # Airflow 2 fails a timed-out deferral with the broader TaskDeferralError
    "TaskDeferralTimeout": (*_EXC, "airflow.exceptions:TaskDeferralError"),
}


def __getattr__(name: str) -> Any:
    if name == "ResumableJobMixin":
        value = _resumable_job_mixin()
    elif name in _WHERE:
        value = _find(name, _WHERE[name])
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def _find(name: str, modules: tuple[str, ...]) -> Any:
    for where in modules:
        module, _, attr = where.partition(":")
        try:
            return getattr(importlib.import_module(module), attr or name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(
        f"Airflow {_airflow_version} has no {name} in {', '.join(modules)}; "
        "anylaunch supports apache-airflow>=2.10"
    )


def _resumable_job_mixin() -> type:
    """Airflow's ``ResumableJobMixin`` (3.3+), else our stand-in that reattaches a retry by
    the task instance's identity carried in the app's env (see ``_reattach``)."""
    if AIRFLOW_V_3_3_PLUS:
        try:
            from airflow.sdk import ResumableJobMixin as mixin

            return mixin
        except ImportError:  # an early 3.3 build without it
            pass
    from airflow_anylaunch._reattach import IdentityReattachMixin

    return IdentityReattachMixin


def is_deferral_timeout(error: BaseException) -> bool:
    """Whether a resumed deferral failed because its trigger timed out (Airflow 3 raises
    ``TaskDeferralTimeout``; Airflow 2 a ``TaskDeferralError`` saying "timeout")."""
    if type(error).__name__ == "TaskDeferralTimeout":
        return True
    return "timeout" in str(error).lower()


def _masker(name: str) -> Any:
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
