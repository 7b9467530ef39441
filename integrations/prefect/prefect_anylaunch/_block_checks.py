"""The name checks of the blocks: run by their validators, so on construction, on
``save`` and on ``load`` (a saved document is validated again as it is read).

A typo in a scheduler or component name, or an env name no process can have, fails where the
block is defined, naming the field, with a did-you-mean; a secret's value is never shown.
"""

from __future__ import annotations

from collections.abc import Mapping

from anylaunch.runner.engine_names import (
    check_component_name,
    check_env_names,
    check_scheduler_name,
)
from anylaunch.specs.errors import InvalidSpecError

__all__ = ["check_job_names", "check_settings_names"]


def check_settings_names(
    scheduler: object, cfg: Mapping[str, object], secret_cfg: Mapping[str, object], env: object
) -> None:
    """``AnylaunchSchedulerSettings``: a known scheduler, each run option in cfg or in
    secret_cfg (not both), and ``secret_env`` names that are env names with str values.

    >>> check_settings_names("local_cwd", {}, {}, {"HF_TOKEN": "x"})
    >>> check_settings_names("local_cwd", {}, {}, {"HF TOKEN": "x"})
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: AnylaunchSchedulerSettings.secret_env='HF***' is invalid: is not an environment variable name (printable, no '=' and no space). Fix: rename it, e.g. 'HF_TOKEN'
    """
    check_scheduler_name("AnylaunchSchedulerSettings.scheduler", scheduler)
    both = sorted(set(cfg) & set(secret_cfg))
    if both:
        raise InvalidSpecError(
            "AnylaunchSchedulerSettings.secret_cfg",
            both,
            "these options are also in cfg",
            "keep each option in cfg or in secret_cfg, not both",
        )
    check_env_names("AnylaunchSchedulerSettings.secret_env", env, secret=True)


def check_job_names(component: object, scheduler: object) -> None:
    """``AnylaunchJob``: a known component (or ``path/file.py:fn``) and scheduler, if set.

    >>> check_job_names("utils.echo", None)
    >>> check_job_names("utils.ehco", None)
    Traceback (most recent call last):
    ...
    anylaunch.runner.engine_names.UnknownComponentNameError: AnylaunchJob.component='utils.ehco' is invalid: unknown component 'utils.ehco'. Did you mean 'utils.echo'? Fix: ...
    """
    if component is not None:
        check_component_name("AnylaunchJob.component", component)
    if scheduler is not None:
        check_scheduler_name("AnylaunchJob.scheduler", scheduler)
