"""The Runner: submits AppDefs to schedulers and manages the launched apps by handle.

A handle is ``{scheduler}://{session_name}/{app_id}``; every method that takes one routes to
the scheduler it names, so a handle from another process (or another session) works too.

>>> from anylaunch.runner import get_runner
>>> with get_runner() as runner:
...     "local_cwd" in runner.scheduler_backends()
True
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, overload

from anylaunch.runner.component_runner import (
    ComponentRunner,
    get_component_runner,
    get_configured_trackers,
)
from anylaunch.runner.errors import AppWaitTimeoutError
from anylaunch.runner.events.runner_hooks import recorded
from anylaunch.schedulers import get_scheduler_factories
from anylaunch.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    SchedulerFactory,
    Stream,
)
from anylaunch.schedulers.common.capacity import Capacity
from anylaunch.schedulers.common.changes import ChangeFeed
from anylaunch.schedulers.common.closing import Closing
from anylaunch.specs.api import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppHandle,
    AppState,
    AppStatus,
    Workspace,
    is_terminal,
    make_app_handle,
    parse_app_handle,
)
from anylaunch.specs.checks import check_seconds, check_session_name, check_type
from anylaunch.specs.errors import (
    InvalidRunConfigException,
    InvalidSpecError,
    UnknownAppException,
    UnknownSchedulerException,
    did_you_mean,
)
from anylaunch.specs.handles import is_placed
from anylaunch.specs.runopts import CfgVal, runopts
from anylaunch.specs.secrets import Redactor
from anylaunch.tracker.api import ENV_ANYLAUNCH_JOB_ID, ENV_ANYLAUNCH_PARENT_RUN_ID

if TYPE_CHECKING:
    from anylaunch.runner.archive import ArchiveKeeper
    from anylaunch.runner.placed import PlacedApps
    from anylaunch.runner.placement import Placement

__all__ = [
    "DEFAULT_SESSION_NAME",
    "ENV_ANYLAUNCH_JOB_ID",
    "ENV_ANYLAUNCH_PARENT_RUN_ID",
    "ENV_ANYLAUNCH_SESSION",
    "NONE",
    "AppWaitTimeoutError",
    "ComponentRunner",
    "Runner",
    "get_component_runner",
    "get_configured_trackers",
    "get_runner",
]

#: Session name of a runner created without a name (TorchX uses "torchx").
DEFAULT_SESSION_NAME = "anylaunch"
#: Injected into every role: the session (runner name) that launched the app.
ENV_ANYLAUNCH_SESSION = "ANYLAUNCH_SESSION"


logger: logging.Logger = logging.getLogger(__name__)


class Runner(Closing):
    """Submits AppDefs to schedulers and acts on the launched apps by handle.

    Schedulers are created lazily (one per name, with this runner's session name) and closed
    by :meth:`close` or on leaving a ``with`` block. Prefer :func:`get_runner`.

    Args:
        name: session name; it appears in every handle this runner creates
        scheduler_factories: scheduler name to factory (see ``anylaunch.schedulers``)
        component_defaults: component name to ``{param: value-as-on-the-CLI}`` defaults
            (override ``[component:NAME]`` sections of ``.anylaunchconfig``)
        scheduler_params: keyword arguments passed to every scheduler factory
    """

    def __init__(
        self,
        name: str,
        scheduler_factories: Mapping[str, SchedulerFactory],
        component_defaults: Mapping[str, Mapping[str, str]] | None = None,
        scheduler_params: Mapping[str, object] | None = None,
    ) -> None:
        check_session_name("name", name)
        if not isinstance(scheduler_factories, Mapping):
            raise InvalidSpecError(
                "scheduler_factories",
                scheduler_factories,
                "must be a mapping of scheduler name to factory",
                "use anylaunch.schedulers.get_scheduler_factories()",
            )
        self._name = name
        self._scheduler_factories = dict(scheduler_factories)
        self._scheduler_params: dict[str, object] = dict(scheduler_params or {})
        self._scheduler_instances: dict[str, Scheduler[Any]] = {}
        self._apps: dict[AppHandle, AppDef] = {}
        self._component_defaults = {k: dict(v) for k, v in (component_defaults or {}).items()}

    # --- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Closes every scheduler this runner created. Safe to call more than once."""
        instances, self._scheduler_instances = self._scheduler_instances, {}
        errors: list[BaseException] = []
        for sched in instances.values():
            try:
                sched.close()
            except Exception as e:  # close the others before reporting it
                errors.append(e)
        if errors:
            raise errors[0]

    @functools.cached_property
    def _placed(self) -> PlacedApps:
        from anylaunch.runner.placed import PlacedApps

        return PlacedApps(self)

    @functools.cached_property
    def _archive(self) -> ArchiveKeeper:
        from anylaunch.runner.archive import ArchiveKeeper, configured_archive

        return ArchiveKeeper(self, configured_archive())

    def note_secrets(self, app_handle: AppHandle, secrets: Redactor) -> None:
        """Secrets the caller knows for the app (an engine's declared secret env), masked in
        everything this runner writes about it (the archive) besides the built-in names."""
        parse_app_handle(app_handle)  # a malformed handle names its fix
        check_type("secrets", secrets, Redactor, "must be a Redactor", "pass Redactor([...])")
        self._archive.note_secrets(app_handle, secrets)

    @property
    def session_name(self) -> str:
        """The session name that appears in this runner's handles."""
        return self._name

    def name(self) -> str:
        """The session name (TorchX-compatible accessor)."""
        return self._name

    def sibling(self) -> Runner:
        """A new runner like this one (session name, schedulers and their parameters) that
        shares none of its scheduler instances: for another thread, since schedulers need
        not be thread-safe. Close it when done.

        >>> with get_runner("s") as runner, runner.sibling() as other:
        ...     other.session_name, other is runner
        ('s', False)
        """
        return Runner(
            self._name,
            self._scheduler_factories,
            self._component_defaults,
            self._scheduler_params,
        )

    def __repr__(self) -> str:
        return (
            f"Runner(name={self._name!r}, schedulers={sorted(self._scheduler_factories)}, "
            f"created={sorted(self._scheduler_instances)})"
        )

    # --- submission ------------------------------------------------------------------------

    def run_component(
        self,
        component: str,
        component_args: Sequence[str] | Mapping[str, object],
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        parent_run_id: str | None = None,
    ) -> AppHandle:
        """Materializes a named component with its arguments and runs it.

        Args:
            component: component name (e.g. ``utils.echo`` or ``path/file.py:fn``)
            component_args: CLI-style arguments (``["--msg", "hi"]``) or ``{param: value}``
            scheduler: scheduler name
            cfg: run options (win over ``.anylaunchconfig``)
            workspace: overrides the first role's workspace (``""`` disables it)
            parent_run_id: injected as ``ANYLAUNCH_PARENT_RUN_ID``

        Returns:
            the app handle
        """
        info = self.dryrun_component(
            component, component_args, scheduler, cfg, workspace, parent_run_id
        )
        return self.schedule(info)

    def dryrun_component(
        self,
        component: str,
        component_args: Sequence[str] | Mapping[str, object],
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        parent_run_id: str | None = None,
    ) -> AppDryRunInfo[Any]:
        """Dryrun version of :meth:`run_component`: returns what would be submitted."""
        app = self.materialize_component(component, component_args)
        return self.dryrun(app, scheduler, cfg, workspace, parent_run_id)

    def materialize_component(
        self,
        component: str,
        component_args: Sequence[str] | Mapping[str, object],
    ) -> AppDef:
        """Builds the AppDef of a named component, as :meth:`dryrun_component` would submit
        it, without dry-running it: edit it (env, name, image), then pass it to
        :meth:`dryrun` or :meth:`run`.

        Parameters the arguments leave out take their defaults from this runner's
        ``component_defaults``, then from the ``[component:NAME]`` section of
        ``.anylaunchconfig``, then from the component function.

        >>> with get_runner(component_defaults={"utils.echo": {"msg": "from-defaults"}}) as r:
        ...     r.materialize_component("utils.echo", {}).roles[0].args
        ...     r.materialize_component("utils.echo", ["--msg", "hi"]).roles[0].args
        ['from-defaults']
        ['hi']

        Args:
            component: component name (e.g. ``utils.echo`` or ``path/file.py:fn``)
            component_args: CLI-style arguments (``["--msg", "hi"]``) or ``{param: value}``
                (a list value of the ``*args`` parameter goes after ``--``; None: default)

        Raises:
            ComponentNotFoundException: no component has that name (with a did-you-mean)
            InvalidSpecError: bad arguments (naming the parameter), or the component does
                not return a valid AppDef
        """
        from anylaunch.runner.components import materialize

        return materialize(component, component_args, self._component_defaults)

    @overload
    def run(
        self,
        app: AppDef,
        scheduler: str | None = ...,
        cfg: Mapping[str, CfgVal] | None = ...,
        workspace: str | Workspace | None = ...,
        parent_run_id: str | None = ...,
        *,
        placement: Placement | None = ...,
        dryrun: Literal[False] = ...,
    ) -> AppHandle: ...

    @overload
    def run(
        self,
        app: AppDef,
        scheduler: str | None = ...,
        cfg: Mapping[str, CfgVal] | None = ...,
        workspace: str | Workspace | None = ...,
        parent_run_id: str | None = ...,
        *,
        placement: None = ...,
        dryrun: Literal[True],
    ) -> AppDryRunInfo[Any]: ...

    def run(
        self,
        app: AppDef,
        scheduler: str | None = None,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        parent_run_id: str | None = None,
        *,
        placement: Placement | None = None,
        dryrun: bool = False,
    ) -> AppHandle | AppDryRunInfo[Any]:
        """Dry-runs then schedules ``app``; everything is validated before submission.

        With ``dryrun=True`` nothing is submitted: the request is rendered exactly as
        :meth:`dryrun` renders it and returned (print it, or pass it to :meth:`schedule`).
        ``app`` is never modified: the patched copy (workspace image, injected env) is the
        returned request's ``info.app``.

        >>> from anylaunch.specs import AppDef, Role
        >>> app = AppDef("hi", roles=[Role("echo", image="/tmp", entrypoint="echo")])
        >>> with get_runner() as runner:
        ...     info = runner.run(app, "local_cwd", dryrun=True)
        >>> info.app.roles[0].env["ANYLAUNCH_SESSION"], "ANYLAUNCH_SESSION" in app.roles[0].env
        ('anylaunch', False)

        With ``placement`` (instead of ``scheduler`` and ``cfg``) the app goes to the first
        of its targets that can run it now and keeps one stable handle while it moves
        between targets (see :mod:`anylaunch.runner.placement`).

        Args:
            dryrun: only validate and render the request (keyword-only, as in TorchX)

        Returns:
            the app handle ``{scheduler}://{session_name}/{app_id}`` (a placed app's:
            ``placement://{session_name}/{app_id}``); with ``dryrun=True`` the
            :class:`~anylaunch.specs.AppDryRunInfo`

        Raises:
            NoTargetCanRunError: every target of ``placement`` said no (nothing submitted)
            InvalidSpecError: ``dryrun`` is not a bool, or is given with ``placement``
        """
        if not isinstance(dryrun, bool):
            raise InvalidSpecError("dryrun", dryrun, "must be True or False", "pass dryrun=True")
        if placement is not None:
            if scheduler is not None or cfg is not None:
                raise InvalidSpecError(
                    "scheduler",
                    scheduler,
                    "cannot be given with placement (its targets name the schedulers)",
                    "pass either scheduler (and cfg) or placement",
                )
            if dryrun:
                raise InvalidSpecError(
                    "dryrun",
                    dryrun,
                    "cannot be given with placement (which target runs is decided at launch)",
                    "dry-run a target instead: runner.run(app, target.scheduler, target.cfg, "
                    "dryrun=True)",
                )
            check_type("app", app, AppDef, "must be an AppDef", "pass specs.AppDef(...)")
            return self._placed.launch(app, placement, workspace, parent_run_id)
        if scheduler is None:
            raise InvalidSpecError(
                "scheduler", None, "is required", "pass a scheduler name, or placement=..."
            )
        info = self.dryrun(app, scheduler, cfg, workspace, parent_run_id)
        return info if dryrun else self.schedule(info)

    def attach(
        self,
        app_handle: AppHandle,
        app: AppDef,
        placement: Placement,
        workspace: str | Workspace | None = None,
        parent_run_id: str | None = None,
    ) -> None:
        """Makes this runner the driver of a placed app another process launched (a retried
        engine task reattaching): its status calls now move the app when its placement says
        so. Pass the same app and placement the launch had."""
        check_type("app", app, AppDef, "must be an AppDef", "pass specs.AppDef(...)")
        self._placed.attach(app_handle, app, placement, workspace, parent_run_id)

    def dryrun(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        parent_run_id: str | None = None,
    ) -> AppDryRunInfo[Any]:
        """Returns the scheduler request that :meth:`run` would submit, without submitting.

        Works on a copy of ``app``: fills ``cfg`` from ``.anylaunchconfig`` (explicit keys
        win), resolves and validates it, builds the workspace into the first role when the
        scheduler supports workspaces, and injects ``ANYLAUNCH_JOB_ID`` (and
        ``ANYLAUNCH_PARENT_RUN_ID``, and the trackers of :mod:`anylaunch.tracker.config`)
        into every role's env.

        Args:
            app: the app to submit (not modified)
            scheduler: scheduler name
            cfg: run options
            workspace: overrides ``app.roles[0].workspace``; ``""`` disables the workspace
            parent_run_id: injected as ``ANYLAUNCH_PARENT_RUN_ID`` (the launcher's own
                ``$ANYLAUNCH_PARENT_RUN_ID`` wins, so nested launches link up)

        Raises:
            UnknownSchedulerException: no scheduler has that name (with a did-you-mean)
            InvalidRunConfigException: cfg has an unknown, missing or mistyped option
            InvalidSpecError: the app cannot work on this scheduler
        """
        from anylaunch.runner.dryrun import prepare_and_render

        return prepare_and_render(self, app, scheduler, cfg, workspace, parent_run_id)

    def resolve_cfg(
        self, scheduler: str, cfg: Mapping[str, CfgVal] | None = None
    ) -> dict[str, CfgVal]:
        """``cfg`` filled from ``.anylaunchconfig`` (explicit keys win) and resolved against
        the scheduler's run options, as :meth:`dryrun` submits it.

        Raises:
            UnknownSchedulerException, InvalidRunConfigException: bad scheduler or cfg
        """
        from anylaunch.runner.config import apply

        if cfg is not None and not isinstance(cfg, Mapping):
            raise InvalidRunConfigException(
                "cfg", cfg, "must be a mapping of option name to value", "pass a dict"
            )
        opts = self._scheduler(scheduler).run_opts()
        merged: dict[str, CfgVal] = dict(cfg or {})
        apply(scheduler, merged, opts=opts)
        return dict(opts.resolve(merged))

    def check_capacity(
        self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal] | None = None
    ) -> Capacity:
        """Asks ``scheduler`` whether it can run ``app`` now (yes / no / unknown, with the
        reason); submits nothing. ``cfg`` is filled and resolved as :meth:`dryrun` does. A
        backend that cannot be asked answers ``unknown`` with the error as the reason.

        Raises:
            UnknownSchedulerException, InvalidRunConfigException, InvalidSpecError: bad input
        """
        from anylaunch.runner.dryrun import check_capacity

        return check_capacity(self, app, scheduler, cfg)

    @recorded("schedule")
    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> AppHandle:
        """Submits a request made by :meth:`dryrun` (possibly edited) and returns its handle."""
        scheduler = getattr(dryrun_info, "_scheduler", None)
        app = getattr(dryrun_info, "_app", None)
        if not isinstance(dryrun_info, AppDryRunInfo) or scheduler is None or app is None:
            raise InvalidSpecError(
                "dryrun_info",
                type(dryrun_info).__name__,
                "is not a request made by Runner.dryrun",
                "pass the object Runner.dryrun / Runner.dryrun_component returned",
            )
        app_id = self._scheduler(scheduler).schedule(dryrun_info)
        handle = make_app_handle(scheduler, self._name, app_id)
        self._apps[handle] = app
        self._archive.submitted(handle, app, str(dryrun_info))
        logger.info("launched %s", handle)
        return handle

    # --- queries ---------------------------------------------------------------------------

    @recorded("status")  # only a change of state is recorded
    def status(self, app_handle: AppHandle) -> AppStatus | None:
        """Returns the app's status, or None if the scheduler does not know the app."""
        if is_placed(app_handle):
            return self._placed.status(app_handle)
        sched, app_id = self._scheduler_app_id(app_handle)
        return self._to_status(app_handle, sched.describe(app_id))

    def cancel_requested(self, app_handle: AppHandle) -> bool:
        """True once someone asked to cancel the app (a durable mark on its backend), even
        while it is still stopping."""
        if is_placed(app_handle):
            return self._placed.cancel_requested(app_handle)
        sched, app_id = self._scheduler_app_id(app_handle)
        return sched.cancel_requested(app_id)

    @recorded("status")
    def status_many(self, app_handles: Iterable[AppHandle]) -> dict[AppHandle, AppStatus | None]:
        """The statuses of many apps, with one ``describe_many`` call per scheduler (a
        backend that supports it answers for all its apps at once).

        >>> with get_runner() as runner:
        ...     runner.status_many(["local_cwd://anylaunch/no-such-app-1"])
        {'local_cwd://anylaunch/no-such-app-1': None}

        Returns:
            handle to status (None: the scheduler does not know the app), in input order;
            a handle given twice appears once

        Raises:
            MalformedAppHandleException: a handle is malformed (nothing is queried)
            UnknownSchedulerException: a handle names no known scheduler (nothing is queried)
        """
        if isinstance(app_handles, (str, bytes)) or not isinstance(app_handles, Iterable):
            raise InvalidSpecError(
                "app_handles",
                app_handles,
                "must be a list of app handles",
                "pass e.g. [handle] (use Runner.status for one app)",
            )
        handles = list(app_handles)  # may be an iterator: it is walked twice
        by_scheduler: dict[str, dict[AppHandle, str]] = {}
        for handle in handles:
            backend, _, app_id = parse_app_handle(handle)
            if is_placed(handle):  # each follows its own current attempt
                continue
            by_scheduler.setdefault(backend, {})[handle] = app_id
        # every scheduler is created before any is queried: a bad name fails up front
        scheds = {backend: self._scheduler(backend) for backend in by_scheduler}
        found: dict[AppHandle, AppStatus | None] = {}
        for backend, ids in by_scheduler.items():
            descs = scheds[backend].describe_many(list(dict.fromkeys(ids.values())))
            for handle, app_id in ids.items():
                found[handle] = self._to_status(handle, descs.get(app_id))
        for handle in handles:
            if is_placed(handle):
                found[handle] = self._placed.status(handle)
        return {handle: found[handle] for handle in handles}

    def _to_status(
        self, app_handle: AppHandle, desc: DescribeAppResponse | None
    ) -> AppStatus | None:
        """The one conversion of a describe response into the status callers see."""
        if desc is None:
            self._apps.pop(app_handle, None)  # gone from the scheduler: forget it here too
            return self._archive.status(app_handle)
        status = AppStatus(
            state=desc.state,
            num_restarts=desc.num_restarts,
            msg="" if desc.msg == NONE else desc.msg,
            structured_error_msg=desc.structured_error_msg,
            ui_url=desc.ui_url,
            roles=desc.roles_statuses,
            array=desc.array,
        )
        if status.is_terminal():
            self._archive.ended(app_handle, status, desc.roles)
        return status

    def wait(
        self,
        app_handle: AppHandle,
        wait_interval: float = 10,
        timeout: float | None = None,
    ) -> AppStatus | None:
        """Blocks until the app is terminal and returns its final status (None if the app
        no longer exists). Polls with jittered exponential backoff capped at ``wait_interval``.

        Raises:
            AppWaitTimeoutError: ``timeout`` seconds passed first (the app is not cancelled)
        """
        from anylaunch.runner.session import AppSession
        from anylaunch.runner.session_options import OptionNames
        from anylaunch.runner.watch import Lost

        if timeout is not None:
            check_seconds("timeout", timeout, positive=False)
        session = AppSession(
            self,
            app_handle,
            poll_interval=wait_interval,
            names=OptionNames(interval="wait_interval"),
            run_deadline=None if timeout is None else time.time() + timeout,
            cancel_on_timeout=False,  # a plain wait never stops the app
            cancel_on_failure=False,
            logs="off",
        )
        outcome = session.run()
        if outcome.kind == "run_timeout":
            state = outcome.status.state if outcome.status is not None else AppState.UNKNOWN
            raise AppWaitTimeoutError(app_handle, state, float(timeout or 0))
        decision = outcome.decision
        if not isinstance(decision, Lost):
            return outcome.status
        if decision.reason == "vanished":
            return None
        # the backend kept failing, or failed for good: its own error says why
        assert decision.error is not None
        raise decision.error

    @recorded("retry")
    def retry_failed(self, app_handle: AppHandle) -> AppHandle:
        """Relaunches only the indices of array app ``app_handle`` that failed (or were
        cancelled), as one new array of the same definition, natively where the backend can
        (``sbatch --array=3,17,42``). Index ``i`` keeps its ``ANYLAUNCH_ARRAY_INDEX`` and
        parameters. Returns the new app's handle.

        Raises:
            InvalidSpecError: the app is not an array, is still running, or no index failed.
            UnknownAppException: the app no longer exists.
        """
        from anylaunch.runner.array_results import indices_to_retry

        sched, app_id = self._scheduler_app_id(app_handle)
        status = self._to_status(app_handle, sched.describe(app_id))
        if status is None:
            raise UnknownAppException(app_handle)
        failed = indices_to_retry(app_handle, status)
        new_id = sched.retry_indices(app_id, failed)
        return make_app_handle(sched.backend, self._name, new_id)

    def describe(self, app_handle: AppHandle) -> AppDef | None:
        """Rebuilds the app (as far as the scheduler can) from its handle, or None."""
        sched, app_id = self._scheduler_app_id(app_handle)
        desc = sched.describe(app_id)
        cached = self._apps.get(app_handle)
        if desc is None:
            self._apps.pop(app_handle, None)
            return self._archive.app(app_handle)
        from anylaunch.runner.array_results import described_app

        return described_app(desc, cached, app_id)

    def log_lines(
        self,
        app_handle: AppHandle,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterable[str]:
        """Returns the log lines of replica ``k`` of ``role_name``, each with the trailing
        newline the scheduler gives it (print with ``end=""``). With ``should_tail`` the
        iterator follows the log until the app ends.

        Raises:
            UnknownAppException: the scheduler does not know the app
        """
        if not isinstance(role_name, str) or not role_name:
            raise InvalidSpecError(
                "role_name", role_name, "must be a non-empty str", "e.g. 'trainer'"
            )
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InvalidSpecError("k", k, "must be a replica index >= 0", "e.g. k=0")
        sched, app_id = self._scheduler_app_id(app_handle)
        desc = sched.describe(app_id)
        # an ended app's archived logs outlive the backend's (purged files, expired streams)
        if desc is None or is_terminal(desc.state):
            roles = () if desc is None else desc.roles
            archived = self._archive.log_lines(app_handle, role_name, k, regex, streams, roles)
            if archived is not None:
                return archived
        if desc is None:
            raise UnknownAppException(app_handle)
        return sched.log_iter(app_id, role_name, k, regex, since, until, should_tail, streams)

    # --- control ---------------------------------------------------------------------------

    @recorded("cancel")
    def cancel(self, app_handle: AppHandle) -> None:
        """Requests cancellation and returns at once; a no-op for an unknown or finished app.

        The app ends CANCELLED once the scheduler has stopped it (or FAILED if it could not).
        """
        if is_placed(app_handle):
            return self._placed.cancel(app_handle)
        sched, app_id = self._scheduler_app_id(app_handle)
        sched.cancel(app_id)

    def delete(self, app_handle: AppHandle) -> None:
        """Deletes the app from the scheduler (cancelling it first if it runs)."""
        sched, app_id = self._scheduler_app_id(app_handle)
        sched.delete(app_id)
        self._apps.pop(app_handle, None)

    # --- schedulers and config -------------------------------------------------------------

    def scheduler_backends(self) -> list[str]:
        """Names of the schedulers this runner can use (none is created)."""
        return list(self._scheduler_factories)

    def scheduler_run_opts(self, scheduler: str) -> runopts:
        """The run options the scheduler accepts."""
        return self._scheduler(scheduler).run_opts()

    def cfg_from_str(self, scheduler: str, cfg_str: str) -> dict[str, CfgVal]:
        """Parses ``K1=V1,K2=V2`` (the CLI's ``-cfg``) into a typed cfg for ``scheduler``.

        Raises:
            InvalidRunConfigException: a key is not an option of the scheduler (with a
                did-you-mean) or a value does not cast to the option's type
        """
        from anylaunch.specs.runopts import cfg_str_to_pairs

        if not isinstance(cfg_str, str):
            raise InvalidRunConfigException(
                "cfg", cfg_str, "must be a str of KEY=VALUE pairs", "e.g. 'log_dir=/tmp'"
            )
        opts = self.scheduler_run_opts(scheduler)
        if cfg_str.strip():
            known = [name for name, _ in opts]
            for key in cfg_str_to_pairs(cfg_str.strip()):
                if key not in opts:
                    raise InvalidRunConfigException(
                        key,
                        "<not shown>",  # the value of a misspelt option may be a credential
                        f"not a run option of the {scheduler} scheduler.{did_you_mean(key, known)}",
                        f"use one of: {', '.join(sorted(known)) or '(none)'}",
                    )
        return opts.cfg_from_str(cfg_str)

    def _scheduler(self, scheduler: str) -> Scheduler[Any]:
        if not isinstance(scheduler, str):  # before any lookup: it may not even be hashable
            raise UnknownSchedulerException(str(scheduler), self._scheduler_factories)
        sched = self._scheduler_instances.get(scheduler)
        if sched is not None:
            return sched
        if scheduler not in self._scheduler_factories:
            raise UnknownSchedulerException(str(scheduler), self._scheduler_factories)
        sched = self._scheduler_factories[scheduler](self._name, **self._scheduler_params)
        self._scheduler_instances[scheduler] = sched
        return sched

    def _scheduler_app_id(self, app_handle: AppHandle) -> tuple[Scheduler[Any], str]:
        # the handle's session may be another runner's: the scheduler knows the app by id
        backend, _, app_id = parse_app_handle(app_handle)
        if is_placed(app_handle):  # a placed app: the attempt it runs as now
            current = self._placed.current(app_handle)
            if current is None:
                raise UnknownAppException(app_handle)
            backend, _, app_id = parse_app_handle(current)
        return self._scheduler(backend), app_id

    # defined last: inside the class body, the name `list` would shadow the builtin
    def list(
        self, scheduler: str, cfg: Mapping[str, CfgVal] | None = None
    ) -> list[ListAppResponse]:
        """Lists the scheduler's apps, each with its handle.

        Options from ``.anylaunchconfig`` fill in ``cfg`` (explicit keys win).
        """
        from anylaunch.runner.config import apply

        sched = self._scheduler(scheduler)
        merged: dict[str, CfgVal] = dict(cfg or {})
        apply(scheduler, merged, opts=sched.run_opts())
        apps = sched.list(merged or None)
        for listed in apps:
            if listed.app_handle == "<NOT_SET>":
                listed.app_handle = make_app_handle(scheduler, self._name, listed.app_id)
        return apps

    # --- change feeds (for the drivers' waits, anylaunch.runner.wake) ------------------------

    def change_feed(self, scheduler: str) -> ChangeFeed | None:
        """The change feed of ``scheduler`` (creating the scheduler), or None if it pushes none.

        A driver waits on it between polls instead of sleeping (see
        :mod:`anylaunch.runner.wake`); the poll stays the source of truth. May block: call it
        off event loops.

        Raises:
            UnknownSchedulerException: ``scheduler`` is not one of :meth:`scheduler_backends`
        """
        return self._scheduler(scheduler).change_feed()


def get_runner(
    name: str | None = None,
    component_defaults: Mapping[str, Mapping[str, str]] | None = None,
    **scheduler_params: Any,
) -> Runner:
    """Creates a Runner over every registered scheduler (created on first use).

    >>> with get_runner() as runner:
    ...     runner.session_name
    'anylaunch'

    Args:
        name: session name for the handles (default ``"anylaunch"``)
        component_defaults: component name to ``{param: value}`` defaults
        scheduler_params: keyword arguments passed to every scheduler factory; each
            scheduler takes those it knows (``kubeconfig``, ``state_dir``, ...; TorchX's,
            such as ``cache_size``, are accepted too)

    Raises:
        InvalidSpecError: a keyword that no scheduler takes (with a did-you-mean and the
            accepted ones)
    """
    from anylaunch.runner.scheduler_params import check_scheduler_params

    factories = get_scheduler_factories()
    check_scheduler_params(scheduler_params, factories)
    return Runner(
        name if name is not None else DEFAULT_SESSION_NAME,
        factories,
        component_defaults,
        scheduler_params,
    )
