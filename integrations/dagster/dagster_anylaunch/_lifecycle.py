"""The lifecycle every Dagster entry point shares: launch (or reattach), stream the app's logs
into ``context.log`` while it runs, wait with startup/run timeouts, cancel it when the run is
terminated, and describe the outcome as Dagster metadata.

Everything scheduler-specific stays in :class:`anylaunch.runner.Runner`.
"""

from __future__ import annotations

import contextlib
import copy
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

import dagster as dg

from anylaunch.runner import Runner, get_runner
from anylaunch.runner.array_results import with_failed_indices
from anylaunch.runner.failures import FailureCategory, retryable
from anylaunch.runner.outcome import error_details
from anylaunch.runner.placed import NoTargetCanRunError
from anylaunch.runner.placement import Placement
from anylaunch.runner.reap import owner_id
from anylaunch.runner.session import AppSession
from anylaunch.runner.session_options import SECONDS_OPTION_NAMES
from anylaunch.runner.wake import first_word
from anylaunch.specs.api import NONE, AppDef, AppHandle, AppState, AppStatus, Workspace
from anylaunch.specs.errors import AnylaunchError, InvalidSpecError
from anylaunch.specs.handles import is_placed
from anylaunch.specs.runopts import CfgVal
from anylaunch.specs.secrets import Redactor, app_redactor
from dagster_anylaunch.arrays import array_metadata
from dagster_anylaunch.call_slots import CALL_SLOTS
from dagster_anylaunch.placement import placement_metadata, targets_text
from dagster_anylaunch.tracked import tracked_metadata

if TYPE_CHECKING:
    from dagster._core.pipes.reattach import PipesLaunchHandle


__all__ = [
    "AnylaunchRun",
    "LaunchSettings",
    "handle_from_run_tags",
    "run_tag_key",
]

#: Either kind of compute context: ops get the first, assets the second.
Context = dg.OpExecutionContext | dg.AssetExecutionContext

#: Launch-handle client name of apps launched by the resource, ops and assets.
CLIENT_NAME = "anylaunch"
#: The step's app handle is also kept in this run tag (visible in the UI while the app runs).
RUN_TAG_PREFIX = "anylaunch/"
# A run tag key is at most 63 of these characters after the prefix.
_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
# Dagster marks from-failure re-executions (UI, run retries daemon) with these run tags.
_RESUME_RETRY_TAGS = ("dagster/is_resume_retry", "dagster/is_asset_resume_retry")
_MAX_ANCESTRY = 64


@dataclass(frozen=True)
class LaunchSettings:
    """How apps are launched and watched (built from an AnylaunchResource's fields). With
    ``placement`` the app is placed on its targets (``scheduler`` and ``cfg``: its first
    target's, what a dryrun shows)."""

    scheduler: str
    cfg: Mapping[str, CfgVal]
    session_name: str
    poll_interval_s: float
    startup_timeout_s: float | None
    run_timeout_s: float | None
    cancel_timeout_s: float
    log_tail_lines: int
    stream_logs: bool
    env: Mapping[str, str]
    secret_env: Mapping[str, str]
    retry_only_infrastructure_failures: bool = False
    placement: Placement | None = None

    def allows_retry(self, category: FailureCategory | None) -> bool:
        """Whether a failure of this category may use the step's retry policy."""
        return not self.retry_only_infrastructure_failures or retryable(category)

    def runner(self) -> Runner:
        """A new Runner for this session (close it, or use it in a ``with`` block)."""
        return get_runner(self.session_name)

    def redactor(self) -> Redactor:
        """Masks the secret values of ``env`` and ``secret_env``: the core secret policy
        (declared ``secret_env`` names, and names that look secret such as ``*_TOKEN``)."""
        return Redactor.for_env({**self.env, **self.secret_env}, self.secret_env.keys())


@dataclass(frozen=True)
class AnylaunchRun:
    """How one app launched (or reattached to) by a Dagster step ended.

    >>> from anylaunch.specs import AppState, AppStatus
    >>> run = AnylaunchRun("local_cwd://dagster/echo-1", AppStatus(AppState.SUCCEEDED,
    ...                    ui_url="file:///tmp/logs"), duration_s=1.5)
    >>> run.state, sorted(run.metadata())
    (<AppState.SUCCEEDED: 4>, ['duration_s', 'final_state', 'handle', 'reattached', 'ui_url'])

    Args:
        handle: the app handle ``{scheduler}://{session}/{app_id}``
        status: the app's final status
        duration_s: seconds from launch (or reattach) to the end
        reattached: True if the step reattached to an app an earlier attempt launched
        last_log_lines: the last lines the app wrote (``role/replica line``)
        params: a sweep's per-index parameters (shown in the per-index metadata)
        mask: masks the app's secrets in what its job tracked
    """

    handle: AppHandle
    status: AppStatus
    duration_s: float
    reattached: bool = False
    last_log_lines: tuple[str, ...] = ()
    params: Sequence[Mapping[str, str]] = ()
    mask: Callable[[str], str] = field(default=str, repr=False, compare=False)

    @property
    def state(self) -> AppState:
        """The app's final state."""
        return self.status.state

    @property
    def ui_url(self) -> str | None:
        """Where the scheduler shows the app (None if it has no UI)."""
        return self.status.ui_url

    def metadata(self) -> dict[str, dg.MetadataValue]:
        """Dagster metadata: handle, final state, ui_url (a URL), duration, reattached; for
        an array app also its per-index metadata (:func:`~dagster_anylaunch.arrays.array_metadata`:
        counts by state, failed indices, a table of indices); for a placed app
        ``anylaunch/placement`` (every target tried, JSON) and ``anylaunch/attempt``; what
        its job tracked and its archive URL (:mod:`dagster_anylaunch.tracked`)."""
        meta: dict[str, dg.MetadataValue] = {
            "handle": dg.MetadataValue.text(self.handle),
            "final_state": dg.MetadataValue.text(self.state.name),
            "duration_s": dg.MetadataValue.float(round(self.duration_s, 3)),
            "reattached": dg.MetadataValue.bool(self.reattached),
        }
        if self.ui_url:
            meta["ui_url"] = dg.MetadataValue.url(self.ui_url)
        if self.status.array is not None:
            meta.update(array_metadata(self.status.array, self.params))
        if self.status.placement is not None:
            meta.update(placement_metadata(self.status.placement))
        meta.update(tracked_metadata(self.handle, self.status, self.mask))
        return meta


def run_tag_key(step_key: str, slot: str | None = None) -> str:
    """The run tag holding the handle of the app a step launched last or, with ``slot``, of
    that call of the step (:mod:`~dagster_anylaunch.call_slots`: what a retry reattaches by).

    >>> run_tag_key("train"), run_tag_key("fan_out[2]"), run_tag_key("train", "3f2a9c01b2c4.1")
    ('anylaunch/train', 'anylaunch/fan_out_2_', 'anylaunch/train/3f2a9c01b2c4.1')
    """
    step = _TAG_UNSAFE.sub("_", step_key)
    return RUN_TAG_PREFIX + (step[:63] if slot is None else f"{step[:48]}/{slot}")


def handle_from_run_tags(
    instance: dg.DagsterInstance, run: dg.DagsterRun, step_key: str, slot: str | None = None
) -> AppHandle | None:
    """The handle of the app ``step_key`` (its call ``slot``, if given) launched in ``run``
    or, across from-failure re-executions only, in its parent runs (the way Dagster's launch
    handles are looked up).

    Used where the installed Dagster has no launch-handle events (1.13.0 has none).
    The run is read again from the instance: the ``run`` a step's context holds is the one
    the run started with, without the tags earlier attempts of the step added since.
    """
    key = run_tag_key(step_key, slot)
    current: dg.DagsterRun | None = instance.get_run_by_id(run.run_id) or run
    seen: set[str] = set()
    while current is not None and current.run_id not in seen and len(seen) < _MAX_ANCESTRY:
        seen.add(current.run_id)
        if key in current.tags:
            return current.tags[key]
        if not any(current.tags.get(tag) == "true" for tag in _RESUME_RETRY_TAGS):
            return None
        parent = current.parent_run_id
        current = instance.get_run_by_id(parent) if parent else None
    return None


def _reattach_api() -> ModuleType | None:
    """Dagster's launch-handle primitives (in later 1.13 releases), or None without them."""
    try:
        from dagster._core.pipes import reattach
    except ImportError:
        return None
    needed = ("find_latest_launch_handle", "record_external_launch", "record_external_reattach")
    return reattach if all(hasattr(reattach, name) for name in needed) else None


def _step_key(context: Context) -> str | None:
    """The step's key, or None outside a run (an op invoked directly, e.g. in a unit test)."""
    try:
        return context.get_step_execution_context().step.key
    except Exception:  # direct invocation contexts have no step
        return None


def with_env(app: AppDef, env: Mapping[str, str]) -> AppDef:
    """A copy of ``app`` with ``env`` added to every role's environment (``env`` wins).

    >>> from anylaunch.specs import AppDef, Role
    >>> app = AppDef("a", [Role("r", image=".", entrypoint="true", env={"A": "1"})])
    >>> with_env(app, {"B": "2"}).roles[0].env, app.roles[0].env
    ({'A': '1', 'B': '2'}, {'A': '1'})
    """
    app = copy.deepcopy(app)
    for role in app.roles:
        role.env.update(env)
    return app


def failure(
    description: str,
    handle: AppHandle | None,
    status: AppStatus | None,
    last_lines: Sequence[str],
    duration_s: float,
    mask: Callable[[str], str],
    allow_retries: bool = True,
    reason: str = "failed",
    category: FailureCategory | None = None,
    params: Sequence[Mapping[str, str]] = (),
) -> dg.Failure:
    """A step Failure carrying handle, ui_url, state, error, the last log lines, the
    ``reason`` (``failed``, ``startup_timeout``, ``run_timeout``, ``lost``, ``invalid``,
    ``launch``: the kinds of :mod:`anylaunch.runner.watch`'s decisions) and the
    ``failure_category`` (:mod:`anylaunch.runner.failures`); for an array app, the failed
    indices in the description and the per-index metadata (``params``: a sweep's); for a
    placed app, where it ran (``anylaunch/placement``, ``anylaunch/attempt``); for an app
    that ended, what its job tracked and its archive URL (:mod:`dagster_anylaunch.tracked`)."""
    meta: dict[str, dg.MetadataValue] = {
        "reason": dg.MetadataValue.text(reason),
        "duration_s": dg.MetadataValue.float(round(duration_s, 3)),
    }
    if category is not None:
        meta["failure_category"] = dg.MetadataValue.text(category.value)
    if handle is not None:
        meta["handle"] = dg.MetadataValue.text(handle)
    if status is not None:
        meta["final_state"] = dg.MetadataValue.text(status.state.name)
        details = error_details(status)
        if "exit_code" in details:
            meta["exit_code"] = dg.MetadataValue.int(int(details["exit_code"]))
        if "stderr_tail" in details:
            meta["stderr_tail"] = dg.MetadataValue.text(mask("\n".join(details["stderr_tail"])))
        error = "\n".join(p for p in (status.msg, status.structured_error_msg) if p and p != NONE)
        meta["error"] = dg.MetadataValue.text(mask(error or f"app ended {status.state.name}"))
        if status.ui_url:
            meta["ui_url"] = dg.MetadataValue.url(status.ui_url)
        if status.placement is not None:
            meta.update(placement_metadata(status.placement, mask))
        if handle is not None:
            meta.update(tracked_metadata(handle, status, mask))
    meta["last_log_lines"] = dg.MetadataValue.text(mask("\n".join(last_lines)))
    array = status.array if status is not None else None
    if array is not None:
        meta.update(array_metadata(array, params, mask))
        description = with_failed_indices(description, array)
    return dg.Failure(description=mask(description), metadata=meta, allow_retries=allow_retries)


# pauses between tries of a reattach record write (the last entry is not slept)
_BOOKKEEPING_PAUSES_S = (0.2, 0.5, 1.0, 0.0)


class AppWatch:
    """Launches (or reattaches to) one app for a step and sees it to its end."""

    def __init__(
        self,
        context: Context,
        settings: LaunchSettings,
        client_name: str | None = CLIENT_NAME,
        reattach: bool = True,
        record_launch: bool | None = None,
    ) -> None:
        """``record_launch`` (default: ``reattach``): record the launch in Dagster's instance
        (a launch-handle event, and the run tags ``anylaunch/<step>`` and this call's
        ``anylaunch/<step>/<slot>``), which is what a retry of the step reattaches by. A step
        that never reattaches has nobody to read them, and at hundreds of apps per run these
        writes are most of the step's own CPU."""
        self.context = context
        self.settings = settings
        self.client_name = client_name
        self.reattach = reattach and client_name is not None
        self.record_launch = client_name is not None and (
            reattach if record_launch is None else record_launch
        )
        self.mask: Redactor = settings.redactor()
        self.handle: AppHandle | None = None
        self.reattached = False
        #: which of its step's launches this call is (set by :meth:`run` where recorded)
        self.slot: str | None = None

    @property
    def _op_context(self) -> dg.OpExecutionContext:
        # Dagster's launch-handle helpers read context.dagster_run, deprecated on assets
        return self.context.op_execution_context

    # --- launch ------------------------------------------------------------------------

    def _previous_launch(self) -> tuple[AppHandle, Any] | None:
        step_key = _step_key(self.context)
        if step_key is None:
            return None
        api = _reattach_api()
        if api is not None:
            found: PipesLaunchHandle | None = api.find_latest_launch_handle(
                self._op_context, client_name=self._slot_client_name()
            )
            return (found.external_run_id, found) if found is not None else None
        previous = handle_from_run_tags(
            self.context.instance, self._op_context.dagster_run, step_key, self.slot
        )
        return (previous, None) if previous else None

    def _drive(
        self, runner: Runner, handle: AppHandle, app: AppDef, workspace: str | Workspace | None
    ) -> None:
        """Makes ``runner`` the driver of the placed app an earlier attempt launched (its
        status calls move the app when the placement says so), with this step's targets."""
        placement = self.settings.placement
        if placement is None:
            self.context.log.warning(
                f"app {handle} of an earlier attempt is placed but this step has no targets:"
                " it is followed, not driven (a move it needs waits for a driver)"
            )
            return
        try:
            runner.attach(handle, app, placement, workspace, self._owner())
        except AnylaunchError as e:  # e.g. another checkpoint_root: the status call says more
            self.context.log.warning(f"cannot drive app {handle}: {self.mask(str(e))}")

    def _owner(self) -> str:
        return owner_id("dagster", self._op_context.run_id)

    def _try_reattach(
        self, runner: Runner, app: AppDef, workspace: str | Workspace | None
    ) -> AppHandle | None:
        previous = self._previous_launch()
        if previous is None:
            return None
        handle, launch_record = previous
        from anylaunch.runner.driver import AppBeingCancelledError, status_for_reattach

        if is_placed(handle):
            self._drive(runner, handle, app, workspace)
        try:  # the core reattach rule: an app being cancelled is never adopted
            status = status_for_reattach(runner, handle)
        except AppBeingCancelledError as e:  # neither adopt it nor launch a copy beside it
            raise failure(str(e), handle, None, (), 0.0, self.mask, reason="lost") from None
        except AnylaunchError as e:
            self.context.log.warning(
                f"cannot check app {handle} of an earlier attempt: {self.mask(str(e))}"
            )
            return None
        if status is None or status.state in (AppState.FAILED, AppState.CANCELLED):
            what = "is gone" if status is None else f"ended {status.state.name}"
            self.context.log.info(f"app {handle} of an earlier attempt {what}: launching anew")
            return None
        api = _reattach_api()
        if api is not None and launch_record is not None:
            self._bookkeep(
                "record the reattach",
                lambda: api.record_external_reattach(self._op_context, launch_record),
            )
        self._tag_run(handle)
        self.context.log.info(
            f"reattaching to app {handle} ({status.state.name}) launched by an earlier attempt"
        )
        return handle

    def _slot_client_name(self) -> str:
        """The launch-handle client name of this call of the step."""
        return f"{self.client_name}/{self.slot}" if self.slot else str(self.client_name)

    def _tag_run(self, handle: AppHandle) -> None:
        """Tags the run with the handle: the step's tag (the UI's, its last launch) and this
        call's (what a retry reattaches by), in one write."""
        step_key = _step_key(self.context)
        if step_key is not None:
            tags = {run_tag_key(step_key): handle}
            if self.slot is not None:
                tags[run_tag_key(step_key, self.slot)] = handle
            self._bookkeep(
                "tag the run with the app's handle",
                lambda: self.context.instance.add_run_tags(self._op_context.run_id, tags),
            )

    def _bookkeep(self, what: str, write: Callable[[], object]) -> None:
        """Writes a reattach record to Dagster's instance storage, retrying briefly.

        The app is already launched when these writes happen: failing the step over them
        (a SQLite instance says "database table is locked" under load) would leave the app
        running unwatched. Without the record, only a retried step's reattach is lost (it
        launches anew), so a write that keeps failing is a warning.
        """
        for attempt, pause in enumerate(_BOOKKEEPING_PAUSES_S):
            try:
                write()
                return
            except Exception as e:  # any storage's error: the record is best effort
                if attempt == len(_BOOKKEEPING_PAUSES_S) - 1:
                    self.context.log.warning(
                        f"could not {what} (a retried step will launch anew instead of"
                        f" reattaching): {self.mask(str(e))}"
                    )
                    return
                time.sleep(pause)

    def _record_launch(
        self, runner: Runner, handle: AppHandle, request: str | None = None
    ) -> AppState | None:
        """Logs the launch in one entry (the app's state then, its link, the request it was
        launched with): each entry is a row of Dagster's event log, and at hundreds of apps
        per step those rows are most of the step's CPU. Returns the state it told, which the
        session does not tell again."""
        ui_url: str | None = None
        state: AppState | None = None
        with contextlib.suppress(Exception):  # the link is a convenience: the wait polls anyway
            first_word(runner, handle)  # then a feed's cache answers, not the backend
            status = runner.status(handle)
            if status is not None:
                ui_url, state = status.ui_url, status.state
        if self.record_launch:
            self._record_for_reattach(handle, ui_url)
        text = f"launched {handle}" + (f": {state.name}" if state is not None else "")
        text += f" ({ui_url})" if ui_url else ""
        self.context.log.info(text + (f"\n{request}" if request else ""))
        return state

    def _record_for_reattach(self, handle: AppHandle, ui_url: str | None) -> None:
        """The launch-handle event and the run tag a retry of the step reattaches by."""
        step_key = _step_key(self.context)
        api = _reattach_api()
        if step_key is not None and api is not None and self.client_name is not None:
            client_name = self._slot_client_name()
            self._bookkeep(
                "record the launch",
                lambda: api.record_external_launch(
                    self._op_context,
                    client_name=client_name,
                    external_run_id=handle,
                    external_run_url=ui_url or None,
                ),
            )
        self._tag_run(handle)

    def launch(
        self,
        runner: Runner,
        app: AppDef,
        extra_env: Mapping[str, str] | None = None,
        workspace: str | Workspace | None = None,
    ) -> tuple[AppHandle, list[tuple[str, int]] | None, AppState | None]:
        """Dry-runs, schedules and records the app (its launch line holds the request);
        returns its handle, its replicas as ``(role, k)`` and the state the launch line
        told."""
        env = {**self.settings.env, **self.settings.secret_env, **(extra_env or {})}
        app = with_env(app, env) if env else app
        if self.settings.placement is not None:
            handle = self._place(runner, app, self.settings.placement, workspace)
            self.handle = handle
            return handle, _replicas(app), self._record_launch(runner, handle)
        try:
            info = runner.dryrun(
                app,
                self.settings.scheduler,
                self.settings.cfg,
                workspace=workspace,
                parent_run_id=self._owner(),
            )
        except AnylaunchError as e:
            # an invalid request (scheduler, run options, app) does not get better by retrying
            raise self._refused(e, invalid=True) from e
        request = f"anylaunch request for scheduler {self.settings.scheduler}:\n" + self.mask(
            str(info)
        )
        try:
            handle = runner.schedule(info)
        except AnylaunchError as e:  # e.g. the scheduler is unreachable: a retry may work
            self.context.log.info(request)  # what was refused
            raise self._refused(e, invalid=False) from e
        self.handle = handle
        return handle, _replicas(app), self._record_launch(runner, handle, request)

    def _refused(self, error: AnylaunchError, *, invalid: bool) -> dg.Failure:
        """The step's failure when the launch is refused: an invalid request (scheduler, run
        options, app) does not get better by retrying; anything else (an unreachable
        scheduler) may."""
        if invalid:
            return failure(
                f"invalid request: {error}",
                None,
                None,
                (),
                0.0,
                self.mask,
                allow_retries=False,
                reason="invalid",
            )
        return failure(
            f"could not launch the app: {error}", None, None, (), 0.0, self.mask, reason="launch"
        )

    def _place(
        self, runner: Runner, app: AppDef, placement: Placement, workspace: str | Workspace | None
    ) -> AppHandle:
        """Places the app on the first of its targets that can run it; returns the stable
        handle. Each attempt is dry-run (its workspace built) when it is tried."""
        self.context.log.info("anylaunch " + targets_text(placement, self.mask))
        try:
            return runner.run(
                app, workspace=workspace, parent_run_id=self._owner(), placement=placement
            )
        except NoTargetCanRunError as e:  # capacity may free up: a retry may place it
            raise failure(str(e), None, None, (), 0.0, self.mask, reason="launch") from e
        except InvalidSpecError as e:  # the request itself: retrying does not help
            raise self._refused(e, invalid=True) from e
        except AnylaunchError as e:
            raise self._refused(e, invalid=False) from e

    # --- the whole lifecycle -----------------------------------------------------------

    def run(
        self,
        app: AppDef,
        extra_env: Mapping[str, str] | None = None,
        workspace: str | Workspace | None = None,
    ) -> AnylaunchRun:
        """Launches ``app`` (or reattaches), streams its logs, waits, and returns the result.

        Raises:
            dagster.Failure: the app did not succeed, timed out (it is cancelled), or the
                request was invalid (not retried)
            dagster.DagsterExecutionInterruptedError: the run was terminated (the app is
                cancelled first)
        """
        started = time.monotonic()
        # secrets in the app's own role env too (needed for a reattached app as well)
        self.mask = self.mask | app_redactor(app, self.settings.secret_env.keys())
        params = app.array.params if app.array is not None else ()
        env = {**self.settings.env, **self.settings.secret_env}
        launched = with_env(app, env) if env else app  # what a reattach drives
        step_key = _step_key(self.context)
        if step_key is not None and (self.reattach or self.record_launch):
            attempt = (self._op_context.run_id, step_key, self._op_context.retry_number)
            self.slot = CALL_SLOTS.take(attempt, app)
        with self.settings.runner() as runner:
            handle = self._try_reattach(runner, launched, workspace) if self.reattach else None
            replicas: list[tuple[str, int]] | None = None
            said_state: AppState | None = None
            if handle is not None:
                self.handle, self.reattached = handle, True
            else:
                handle, replicas, said_state = self.launch(runner, app, extra_env, workspace)
            settings = self.settings
            session = AppSession(
                runner,
                handle,
                sink=self.context.log.log,
                poll_interval=settings.poll_interval_s,
                startup_timeout=settings.startup_timeout_s,
                run_timeout=settings.run_timeout_s,
                said_state=said_state,
                names=SECONDS_OPTION_NAMES,
                secrets=self.mask,
                logs="pump" if settings.stream_logs else "off",
                replicas=replicas,
                tail_size=settings.log_tail_lines,
                cancel_wait_s=settings.cancel_timeout_s,
            )
            # termination, or an error while watching: the step is over, so nobody would
            # watch the app any more
            outcome = session.run(interrupt_cancels=(BaseException,))
        duration = time.monotonic() - started
        if not outcome.succeeded:
            category = outcome.category
            reason = "failed" if outcome.kind == "failed" else outcome.decision.kind
            raise failure(
                outcome.message,
                handle,
                outcome.status,
                outcome.tail,
                duration,
                self.mask,
                allow_retries=self.settings.allows_retry(category),
                reason=reason,
                category=category,
                params=params,
            )
        assert outcome.status is not None  # the session has said it SUCCEEDED
        return AnylaunchRun(
            handle,
            outcome.status,
            duration,
            reattached=self.reattached,
            last_log_lines=outcome.tail,
            params=params,
            mask=self.mask,
        )


def _replicas(app: AppDef) -> list[tuple[str, int]] | None:
    if app.array is not None:  # the session follows each index as it starts
        return None
    return [(role.name, k) for role in app.roles for k in range(role.num_replicas)]
