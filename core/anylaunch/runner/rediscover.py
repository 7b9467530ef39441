"""Finding the live app an engine task launched in an earlier try, by a label in its env.

An engine that cannot keep an app's handle across tries (Airflow before 3.3) injects the
task's identity into every role's env when it launches; a retry then asks the scheduler
for its live apps (``Runner.list`` + ``Runner.describe``, which every scheduler offers) and
adopts the one carrying its identity, the way Kubernetes operators find their pods again by
label. Only apps that have not ended are considered: a finished app is never adopted.

>>> from anylaunch.runner import get_runner
>>> with get_runner() as runner:
...     find_live_apps(runner, "local_cwd", "ANYLAUNCH_NO_SUCH_LABEL", "x")
[]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from anylaunch.specs.errors import InvalidSpecError

if TYPE_CHECKING:
    from anylaunch.runner.api import Runner

__all__ = ["find_live_apps"]

logger: logging.Logger = logging.getLogger(__name__)


def find_live_apps(
    runner: Runner,
    scheduler: str,
    env_name: str,
    env_value: str,
    cfg: Mapping[str, Any] | None = None,
) -> list[str]:
    """Handles of ``scheduler``'s apps that have not ended and whose every role has
    ``env[env_name] == env_value``, oldest first.

    Args:
        runner: the runner to ask (its session name goes into handles the scheduler
            cannot name itself)
        scheduler: the scheduler to list, e.g. ``kubernetes``
        env_name: the label's env variable
        env_value: the value that identifies the caller
        cfg: options for listing (e.g. the kubernetes ``namespace``); the launch's cfg fits

    An app that cannot be described is skipped (logged): the caller then launches afresh.

    Raises:
        InvalidSpecError: ``env_name`` or ``env_value`` is not a non-empty str
        Exception: what listing the scheduler's apps raised
    """
    from anylaunch.specs.status import is_terminal

    for field, value in (("env_name", env_name), ("env_value", env_value)):
        if not isinstance(value, str) or not value:
            raise InvalidSpecError(field, value, "must be a non-empty str", "pass the label")
    found: list[str] = []
    for listed in runner.list(scheduler, cfg):
        if is_terminal(listed.state):
            continue
        try:
            app = runner.describe(listed.app_handle)
        except Exception as e:
            logger.warning("cannot describe %s: %s", listed.app_handle, type(e).__name__)
            continue
        if app is None or not app.roles:
            continue
        if all(role.env.get(env_name) == env_value for role in app.roles):
            found.append(listed.app_handle)
    return found
