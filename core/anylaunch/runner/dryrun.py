"""What ``Runner.dryrun`` does to an app before its scheduler renders the request.

One pipeline, in order: check the arguments, work on a deep copy of the app, validate it for
the scheduler, fill and resolve ``cfg``, build the workspace into the first role, inject the
launch env (``ANYLAUNCH_JOB_ID``, the session, the parent run id, the configured trackers),
then ask the scheduler for its request. ``Runner.dryrun``, ``Runner.run(..., dryrun=True)``
and ``Runner.dryrun_component`` all go through :func:`prepare_and_render`.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from anylaunch.schedulers.api import ARCHIVE_URL_OPT, backend_cfg
from anylaunch.schedulers.common.capacity import Capacity
from anylaunch.specs.api import AppDef, AppDryRunInfo, Workspace, macros, make_app_handle
from anylaunch.specs.checks import check_type
from anylaunch.specs.errors import InvalidRunConfigException, InvalidSpecError
from anylaunch.specs.runopts import CfgVal
from anylaunch.tracker.api import ENV_ANYLAUNCH_JOB_ID, ENV_ANYLAUNCH_PARENT_RUN_ID

if TYPE_CHECKING:
    from anylaunch.runner.api import Runner
    from anylaunch.schedulers.api import Scheduler

__all__ = ["build_workspace", "check_capacity", "check_dryrun_args", "prepare_and_render"]

logger: logging.Logger = logging.getLogger(__name__)


def check_dryrun_args(
    app: object, cfg: object, parent_run_id: object
) -> tuple[AppDef, Mapping[str, CfgVal] | None]:
    """The arguments every dry run takes, checked before anything is built.

    >>> check_dryrun_args("not an app", None, None)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: app='str' is invalid: must be an AppDef. ...
    """
    check_type("app", app, AppDef, "must be an AppDef", "pass specs.AppDef(...)")
    if cfg is not None and not isinstance(cfg, Mapping):
        raise InvalidRunConfigException(
            "cfg", cfg, "must be a mapping of option name to value", "pass a dict"
        )
    if parent_run_id is not None and not isinstance(parent_run_id, str):
        raise InvalidSpecError("parent_run_id", parent_run_id, "must be a str", "pass a str")
    assert isinstance(app, AppDef)  # check_type raised otherwise
    return app, cfg


def prepare_and_render(
    runner: Runner,
    app: AppDef,
    scheduler: str,
    cfg: Mapping[str, CfgVal] | None,
    workspace: str | Workspace | None,
    parent_run_id: str | None,
) -> AppDryRunInfo[Any]:
    """The request ``runner`` would submit for ``app`` on ``scheduler`` (see
    ``Runner.dryrun``); ``app`` itself is never modified: the request's ``info.app`` is the
    patched copy."""
    app, cfg = check_dryrun_args(app, cfg, parent_run_id)
    app = copy.deepcopy(app)  # the caller's AppDef is never modified
    app.validate()
    sched = runner._scheduler(scheduler)
    sched.check_array_support(app)
    resolved = runner.resolve_cfg(scheduler, cfg)
    runner._archive.for_run(app, resolved.get(ARCHIVE_URL_OPT))
    resolved = backend_cfg(resolved)

    sched._pre_build_validate(app, scheduler, resolved)
    build_workspace(sched, app, workspace, resolved)
    sched._validate(app, scheduler, resolved)
    _inject_launch_env(app, scheduler, runner.session_name, parent_run_id)

    info = sched.submit_dryrun(app, resolved)
    # route by the name this runner knows the scheduler by (may differ from its backend)
    info._scheduler = scheduler
    return info


def check_capacity(
    runner: Runner, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal] | None
) -> Capacity:
    """``runner.check_capacity``: the app is validated for the scheduler as a dry run
    validates it, then the scheduler is asked; a backend that cannot be asked answers
    ``unknown`` with the error as the reason (no signal, not a verdict)."""
    app, cfg = check_dryrun_args(app, cfg, None)
    app = copy.deepcopy(app)
    app.validate()
    sched = runner._scheduler(scheduler)
    resolved = backend_cfg(runner.resolve_cfg(scheduler, cfg))
    sched._pre_build_validate(app, scheduler, resolved)
    sched._validate(app, scheduler, resolved)
    try:
        return sched.check_capacity(app, resolved)
    except (InvalidSpecError, InvalidRunConfigException):
        raise
    except Exception as e:  # unreachable backend, refused call
        logger.warning("capacity check on %s failed: %s", scheduler, e)
        return Capacity.unknown(f"could not ask {scheduler}: {type(e).__name__}: {e}")


def _inject_launch_env(
    app: AppDef, scheduler: str, session_name: str, parent_run_id: str | None
) -> None:
    from anylaunch.runner.api import ENV_ANYLAUNCH_SESSION
    from anylaunch.runner.config import load_sections
    from anylaunch.tracker.config import configured_trackers, tracker_env

    parent = os.environ.get(ENV_ANYLAUNCH_PARENT_RUN_ID) or parent_run_id
    job_id = make_app_handle(scheduler, session_name, macros.app_id)
    tracking = tracker_env(configured_trackers(load_sections))  # the app's own env wins
    for role in app.roles:
        role.env[ENV_ANYLAUNCH_JOB_ID] = job_id
        role.env[ENV_ANYLAUNCH_SESSION] = session_name
        if parent:
            role.env[ENV_ANYLAUNCH_PARENT_RUN_ID] = parent
        role.env.update({k: v for k, v in tracking.items() if k not in role.env})


def build_workspace(
    sched: Scheduler[Any],
    app: AppDef,
    workspace: str | Workspace | None,
    cfg: Mapping[str, CfgVal],
) -> None:
    """Builds the first role's workspace (``workspace`` overrides ``role.workspace``; ``""``
    disables it) into its image, when the scheduler supports workspaces."""
    from anylaunch.schedulers.api import as_workspace
    from anylaunch.workspace.api import WorkspaceMixin

    role = app.roles[0]
    ws = role.workspace if workspace is None else as_workspace(workspace)
    role.workspace = ws
    if not ws:  # None, or an empty Workspace (allowed, and falsy, as in TorchX)
        return
    if not isinstance(sched, WorkspaceMixin):
        logger.warning(
            "the %s scheduler does not support workspaces; ignoring workspace %s",
            sched.backend,
            ws,
        )
        return
    old_image = role.image
    sched.build_workspace_and_update_role(role, ws, cfg)
    logger.info("workspace %s: role %s image %s -> %s", ws, role.name, old_image, role.image)
