"""The one policy for the metadata every scheduler stamps into a submitted job: the
:mod:`anylaunch.specs.metadata_keys` keys and their values. Each backend only translates the
mapping into its native form (labels, tags, a comment), with that backend's value rules.

>>> meta = job_metadata(AppDef("t", [Role("r", "img")]), "slurm", env={})
>>> meta[app_metadata.SCHEDULER], meta[app_metadata.CONTEXT]
('slurm', '<<NA>>')
>>> plain_values(meta)[app_metadata.CONTEXT]
'NA'
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from anylaunch.settings import ENV_ANYLAUNCH_PARENT_RUN_ID
from anylaunch.specs.api import AppDef, Role  # noqa: F401 -- Role: doctest
from anylaunch.specs.metadata_keys import ANYLAUNCH_CONTEXT_NAME, NA, app_metadata
from anylaunch.specs.secrets import MASK, MIN_SECRET_LEN, secret_values

__all__ = [
    "JOB_METADATA_KEYS",
    "MAX_VALUE_LEN",
    "OWNER_KEY",
    "PLAIN_NA",
    "context_name",
    "job_metadata",
    "owner_metadata",
    "plain_values",
]

#: Longest value stamped: AWS tag values hold at most 256 characters (backends with shorter
#: limits, e.g. Kubernetes labels at 63, cut further in their own translation).
MAX_VALUE_LEN = 256
#: :data:`~anylaunch.specs.metadata_keys.NA` where a backend's values cannot hold ``<`` or
#: ``>`` (Kubernetes label values, AWS tag values).
PLAIN_NA = "NA"

#: The keys :func:`job_metadata` stamps (what describe reads back from a job).
JOB_METADATA_KEYS = (app_metadata.CONTEXT, app_metadata.VERSION, app_metadata.SCHEDULER)

#: The app's owner (the parent run id the runner put into every role's env as
#: ``ANYLAUNCH_PARENT_RUN_ID``), stamped by the backends whose describe cannot return role env,
#: so that ``anylaunch reap`` can still ask the owner's engine about the app.
OWNER_KEY = "anylaunch/parent_run_id"

_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def context_name(app: AppDef, env: Mapping[str, str] | None = None) -> str:
    """The calling context from ``$ANYLAUNCH_CONTEXT_NAME`` (``NA`` when unset or blank):
    control characters replaced, at most :data:`MAX_VALUE_LEN` long, and never a secret of
    the app (a value holding one of its roles' secret env values is masked whole).

    >>> app = AppDef("t", [Role("r", "img", env={"API_TOKEN": "tok-123"})])
    >>> context_name(app, {"ANYLAUNCH_CONTEXT_NAME": "airflow\\ndag"})
    'airflow_dag'
    >>> context_name(app, {"ANYLAUNCH_CONTEXT_NAME": "run tok-123"}), context_name(app, {})
    ('***', '<<NA>>')
    """
    raw = (os.environ if env is None else env).get(ANYLAUNCH_CONTEXT_NAME, "")
    value = _CONTROL.sub("_", str(raw).strip()).strip()
    if not value:
        return NA
    secrets = [s for role in app.roles for s in secret_values(role.env)]
    if any(len(s) >= MIN_SECRET_LEN and s in value for s in secrets):
        return MASK
    return value[:MAX_VALUE_LEN]


def job_metadata(
    app: AppDef, scheduler: str, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The metadata ``scheduler`` stamps into the job of ``app``: the calling context
    (:func:`context_name`), anylaunch's version and the scheduler's name.

    Read at dryrun time (the request carries it); ``env`` defaults to ``os.environ``.
    """
    import anylaunch

    return {
        app_metadata.CONTEXT: context_name(app, env),
        app_metadata.VERSION: anylaunch.__version__,
        app_metadata.SCHEDULER: scheduler,
    }


def plain_values(metadata: Mapping[str, str]) -> dict[str, str]:
    """``metadata`` with :data:`~anylaunch.specs.metadata_keys.NA` written as
    :data:`PLAIN_NA`, for backends whose values cannot hold ``<`` or ``>``.

    >>> plain_values({"k": "<<NA>>", "j": "v"})
    {'k': 'NA', 'j': 'v'}
    """
    return {k: PLAIN_NA if v == NA else v for k, v in metadata.items()}


def owner_metadata(app: AppDef) -> dict[str, str]:
    """``{OWNER_KEY: owner}`` when every role of ``app`` names the same parent run id in its
    env, else ``{}`` (no owner, or roles that disagree: the reaper then keeps the app).

    >>> owner_metadata(AppDef("t", [Role("r", "img", env={"ANYLAUNCH_PARENT_RUN_ID": "prefect:1"})]))
    {'anylaunch/parent_run_id': 'prefect:1'}
    >>> owner_metadata(AppDef("t", [Role("r", "img")]))
    {}
    """
    owners = {role.env.get(ENV_ANYLAUNCH_PARENT_RUN_ID) for role in app.roles}
    if len(owners) != 1:
        return {}
    owner = owners.pop()
    if not owner or _CONTROL.search(owner):
        return {}
    return {OWNER_KEY: owner[:MAX_VALUE_LEN]}
