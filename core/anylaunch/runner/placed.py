"""Placed apps: the I/O behind a placement's one stable handle.

``Runner.run(app, placement=...)`` returns ``placement://{session}/{app_id}``. Its status,
logs, describe and cancel follow the attempt it runs as now, read from the placement record
(:mod:`anylaunch.runner.placement_store`), so any process of a deployment can follow it. The
process that holds the app (the one that launched it, or one that ``Runner.attach``-ed it
again, e.g. a retried engine task) also *drives* it: each status call applies the placement
policy (:func:`anylaunch.runner.placement.next_step`) and, when the policy says so, cancels
the attempt and starts the next one. A process that only reads reports such an attempt as
PENDING until a driver moves it.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from anylaunch.runner.placement import (
    ENV_ANYLAUNCH_ATTEMPT,
    ENV_ANYLAUNCH_CHECKPOINT_URL,
    Move,
    Placement,
    Relaunch,
    Settle,
    Stay,
    next_step,
)
from anylaunch.runner.placement_store import (
    AttemptRecord,
    PlacementRecord,
    PlacementStore,
    locate_store,
    resolve_root,
)
from anylaunch.runner.watch import has_started
from anylaunch.schedulers.api import backend_cfg
from anylaunch.schedulers.common.app_ids import make_app_id
from anylaunch.schedulers.common.capacity import CanRun
from anylaunch.specs.api import AppDef, AppHandle, AppState, AppStatus, Workspace
from anylaunch.specs.errors import AnylaunchError, InvalidSpecError
from anylaunch.specs.handles import PLACEMENT_SCHEME, make_app_handle, parse_app_handle
from anylaunch.specs.placement_status import PlacementEntry, PlacementHistory

if TYPE_CHECKING:
    from anylaunch.runner.api import Runner

__all__ = ["NoTargetCanRunError", "PlacedApps"]

logger = logging.getLogger(__name__)

#: How long a move waits for the attempt it cancels to end before starting the next one.
MOVE_CANCEL_WAIT_S = 120.0
#: An attempt claimed but never submitted for this long had a driver that died mid-way.
ABANDONED_CLAIM_S = 300.0


class NoTargetCanRunError(AnylaunchError):
    """No target of a placement could take the app now (each said no, or refused it):
    nothing was submitted."""


@dataclass
class _Driven:
    """What this process needs to move a placed app: the app and where it may go."""

    app: AppDef
    placement: Placement
    store: PlacementStore
    workspace: str | Workspace | None
    parent_run_id: str | None


class PlacedApps:
    """A Runner's placed apps (the Runner routes every ``placement://`` handle here)."""

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self._driven: dict[AppHandle, _Driven] = {}

    # --- launch and attach --------------------------------------------------------------

    def launch(
        self,
        app: AppDef,
        placement: Placement,
        workspace: str | Workspace | None,
        parent_run_id: str | None,
    ) -> AppHandle:
        """Checks every target's run options, then submits the app to the first target whose
        capacity is not "no"; returns the stable handle.

        Raises:
            NoTargetCanRunError: every target said no or refused the submission
        """
        self._check(app, placement)
        store = PlacementStore(resolve_root(placement.checkpoint_root))
        session = self._runner.session_name
        app_id = make_app_id(app.name)
        handle = make_app_handle(PLACEMENT_SCHEME, session, app_id)
        targets = placement.resolved_targets
        store.create(
            session,
            app_id,
            {
                "name": app.name,
                "targets": [
                    {
                        "scheduler": t.scheduler,
                        "cfg_keys": sorted(t.cfg or {}),  # names only: values may be secret
                        "startup_timeout": t.startup_timeout,
                    }
                    for t in targets
                ],
                "max_infra_retries": placement.max_infra_retries,
                "checkpoint_url": store.checkpoint_url(session, app_id),
                "created_at": time.time(),
            },
        )
        driven = _Driven(app, placement, store, workspace, parent_run_id)
        self._driven[handle] = driven
        record = self._start_attempt(handle, driven, 0, range(len(targets)), relaunches=0)
        if record is not None and record.handle is None:
            raise NoTargetCanRunError(
                f"no target can run app {app.name!r} now ({record.reason}); nothing was"
                " submitted. Fix: free capacity on a target, or add one that can run it"
            )
        return handle

    def attach(
        self,
        app_handle: AppHandle,
        app: AppDef,
        placement: Placement,
        workspace: str | Workspace | None,
        parent_run_id: str | None,
    ) -> None:
        """Makes this process the driver of an existing placed app (e.g. a retried engine
        task that found its handle): from now on its status calls move it when needed."""
        self._check(app, placement)
        _, session, app_id = parse_app_handle(app_handle)
        store = PlacementStore(resolve_root(placement.checkpoint_root))
        if not store.exists(session, app_id):
            raise InvalidSpecError(
                "app_handle",
                app_handle,
                f"has no placement record under {store.root}",
                "pass a handle Runner.run(app, placement=...) returned, with the same"
                " checkpoint_root",
            )
        self._driven[app_handle] = _Driven(app, placement, store, workspace, parent_run_id)

    def _check(self, app: AppDef, placement: Placement) -> None:
        if not isinstance(placement, Placement):
            raise InvalidSpecError(
                "placement",
                type(placement).__name__,
                "must be a Placement",
                "pass Placement([Target('kubernetes'), Target('slurm')])",
            )
        app.validate()
        for target in placement.resolved_targets:  # bad input fails before any submission
            name = target.scheduler
            resolved = backend_cfg(self._runner.resolve_cfg(name, target.cfg))
            sched = self._runner._scheduler(name)
            sched.check_array_support(app)
            sched._pre_build_validate(app, name, resolved)
            sched._validate(app, name, resolved)

    # --- the attempts -------------------------------------------------------------------

    def _attempt_app(self, driven: _Driven, app_id: str, session: str, attempt: int) -> AppDef:
        app = copy.deepcopy(driven.app)
        url = driven.store.checkpoint_url(session, app_id)
        for role in app.roles:
            role.env[ENV_ANYLAUNCH_ATTEMPT] = str(attempt)
            role.env[ENV_ANYLAUNCH_CHECKPOINT_URL] = url
        return app

    def _start_attempt(
        self,
        handle: AppHandle,
        driven: _Driven,
        attempt: int,
        candidates: Sequence[int],
        relaunches: int,
    ) -> AttemptRecord | None:
        """Claims attempt ``attempt`` and submits it to the first candidate target that may
        run it. None: another process claimed it first (follow theirs)."""
        _, session, app_id = parse_app_handle(handle)
        store, targets = driven.store, driven.placement.resolved_targets
        record = AttemptRecord(attempt, candidates[0], targets[candidates[0]].scheduler)
        record.relaunches, record.claimed_at = relaunches, time.time()
        if not store.claim(session, app_id, record):
            return None
        app = self._attempt_app(driven, app_id, session, attempt)
        for index in candidates:
            target = targets[index]
            record.target, record.scheduler = index, target.scheduler
            if self._cancelled(store, session, app_id):
                record.outcome, record.reason = "ended", "cancelled before it was placed"
                break
            capacity = self._runner.check_capacity(app, target.scheduler, target.cfg)
            if capacity.can_run == CanRun.NO:
                record.skipped.append((target.scheduler, str(capacity)))
                logger.info(
                    "%s: not placing attempt %d on %s: %s",
                    handle,
                    attempt,
                    target.scheduler,
                    capacity,
                )
                continue
            try:
                concrete = self._runner.run(
                    app, target.scheduler, target.cfg, driven.workspace, driven.parent_run_id
                )
            except AnylaunchError as e:  # refused: the next target may take it
                record.skipped.append((target.scheduler, f"submission failed: {e}"))
                logger.warning(
                    "%s: %s refused attempt %d: %s", handle, target.scheduler, attempt, e
                )
                continue
            record.handle, record.submitted_at = concrete, time.time()
            store.update(session, app_id, record)
            logger.info("%s: attempt %d runs as %s", handle, attempt, concrete)
            if self._cancelled(store, session, app_id):  # cancelled while it was submitted
                self._runner.cancel(concrete)
            return record
        else:
            reasons = "; ".join(f"{s}: {r}" for s, r in record.skipped)
            record.outcome, record.reason = "ended", f"no target can run it now ({reasons})"
        store.update(session, app_id, record)
        return record

    @staticmethod
    def _cancelled(store: PlacementStore, session: str, app_id: str) -> bool:
        found = store.read(session, app_id)
        return found is not None and found.cancelled

    # --- following ----------------------------------------------------------------------

    def _store(self, app_handle: AppHandle) -> PlacementStore | None:
        driven = self._driven.get(app_handle)
        if driven is not None:
            return driven.store
        _, session, app_id = parse_app_handle(app_handle)
        return locate_store(session, app_id)

    def record(self, app_handle: AppHandle) -> PlacementRecord | None:
        """The placed app's record (None: no record anywhere this process can see)."""
        store = self._store(app_handle)
        if store is None:
            return None
        _, session, app_id = parse_app_handle(app_handle)
        return store.read(session, app_id)

    def current(self, app_handle: AppHandle) -> AppHandle | None:
        """The backend handle of the attempt the placed app runs as now (None: none yet)."""
        record = self.record(app_handle)
        current = record.current if record is not None else None
        return current.handle if current is not None else None

    def status(self, app_handle: AppHandle) -> AppStatus | None:
        """The current attempt's status, carrying the placement history; a driver moves the
        app first when the policy says so."""
        _, session, app_id = parse_app_handle(app_handle)
        driven = self._driven.get(app_handle)
        for _ in range(64):  # each pass starts at most one attempt: bounded by the targets
            record = self.record(app_handle)
            if record is None or record.current is None:
                return None
            current = record.current
            if current.handle is None:
                if driven is None or not _abandoned(current):
                    return self._unplaced_status(record, current)
                # its driver died between the claim and the submission: place it anew
                current.outcome = "moved"
                current.reason = "its driver died before it was submitted"
                driven.store.update(session, app_id, current)
                count = len(driven.placement.resolved_targets)
                candidates = [(current.target + i) % count for i in range(count)]
                self._start_attempt(
                    app_handle, driven, current.attempt + 1, candidates, current.relaunches
                )
                continue
            status = self._runner.status(current.handle)
            if record.cancelled or current.outcome != "current":
                return _with_history(status, record, current)
            placement = driven.placement if driven else _placement_of(record)
            started = status is not None and has_started(status.state)
            unstarted = 0.0 if started else time.time() - current.submitted_at
            step = next_step(placement, current.target, current.relaunches, status, unstarted)
            if isinstance(step, Stay):
                if started and not current.started and driven is not None:
                    current.started = True
                    driven.store.update(session, app_id, current)
                return _with_history(status, record, current)
            if isinstance(step, Settle):
                unended = status is not None and not status.is_terminal()
                if driven is None:
                    if status is not None and unended:  # never started on the last target:
                        # a driver must cancel it and end the placement
                        return _with_history(status, record, current, next_move=step.reason)
                    current.outcome, current.reason = "ended", step.reason  # shown, not stored
                    return _with_history(status, record, current, step.reason)
                if unended:
                    status = self._give_up(current, step.reason)
                current.outcome, current.reason = "ended", step.reason
                driven.store.update(session, app_id, current)
                return _with_history(status, record, current, step.reason)
            if driven is None:  # someone else drives: say what is coming
                waiting = AppStatus(
                    AppState.PENDING,
                    msg=f"attempt {current.attempt} on {current.scheduler}: {step.reason};"
                    f" waiting for its driver to start attempt {current.attempt + 1}",
                )
                return _with_history(waiting, record, current, next_move=step.reason)
            self._leave(app_handle, driven, current, step)
        raise AnylaunchError(f"{app_handle}: placement did not settle")  # pragma: no cover

    def _leave(
        self, app_handle: AppHandle, driven: _Driven, current: AttemptRecord, step: Move | Relaunch
    ) -> None:
        """Ends the current attempt (cancelling it first: never two live copies) and starts
        the next one."""
        from anylaunch.runner.driver import cancel_and_wait

        _, session, app_id = parse_app_handle(app_handle)
        assert current.handle is not None
        ended = cancel_and_wait(self._runner, current.handle, MOVE_CANCEL_WAIT_S)
        if ended is not None and not ended.is_terminal():
            logger.warning(
                "%s: %s has not stopped yet; placing the next attempt anyway",
                app_handle,
                current.handle,
            )
        moved = isinstance(step, Move)
        current.outcome, current.reason = ("moved" if moved else "relaunched"), step.reason
        driven.store.update(session, app_id, current)
        logger.warning(
            "%s: attempt %d on %s %s: %s",
            app_handle,
            current.attempt,
            current.scheduler,
            current.outcome,
            step.reason,
        )
        count = len(driven.placement.resolved_targets)
        if moved:
            candidates = list(range(current.target + 1, count))
        else:  # the same target first, then the ones after it, then the ones before
            candidates = [(current.target + i) % count for i in range(count)]
        relaunches = current.relaunches + (0 if moved else 1)
        self._start_attempt(app_handle, driven, current.attempt + 1, candidates, relaunches)

    def _give_up(self, current: AttemptRecord, reason: str) -> AppStatus:
        """Cancels an attempt the placement ends while it is still unstarted: a FAILED
        (startup) status, whatever the cancel made of it."""
        from anylaunch.runner.driver import cancel_and_wait

        assert current.handle is not None
        cancel_and_wait(self._runner, current.handle, MOVE_CANCEL_WAIT_S)
        return AppStatus(
            AppState.FAILED,
            msg=f"attempt {current.attempt} on {current.scheduler}: {reason}",
            structured_error_msg=json.dumps({"category": "startup"}),
        )

    def _unplaced_status(self, record: PlacementRecord, current: AttemptRecord) -> AppStatus:
        if current.outcome == "ended":
            status = AppStatus(
                AppState.FAILED,
                msg=current.reason,
                structured_error_msg=json.dumps({"category": "startup"}),
            )
        else:
            status = AppStatus(AppState.PENDING, msg=f"placing attempt {current.attempt}")
        placed = _with_history(status, record, current)
        assert placed is not None  # a status in: a status out
        return placed

    def cancel(self, app_handle: AppHandle) -> None:
        """Cancels the placed app: no attempt starts after this, and the current one is
        cancelled."""
        store = self._store(app_handle)
        if store is None:
            return
        _, session, app_id = parse_app_handle(app_handle)
        store.mark_cancelled(session, app_id)
        current = self.current(app_handle)
        if current is not None:
            self._runner.cancel(current)

    def cancel_requested(self, app_handle: AppHandle) -> bool:
        record = self.record(app_handle)
        if record is None:
            return False
        current = record.current.handle if record.current is not None else None
        return record.cancelled or (current is not None and self._runner.cancel_requested(current))

    def history(self, app_handle: AppHandle) -> PlacementHistory | None:
        """Every target tried so far, and why the app moved."""
        record = self.record(app_handle)
        if record is None or record.current is None:
            return None
        return _history(record)


def _abandoned(current: AttemptRecord) -> bool:
    """An attempt claimed long ago that was never submitted, nor ended."""
    return current.outcome == "current" and time.time() - current.claimed_at > ABANDONED_CLAIM_S


def _placement_of(record: PlacementRecord) -> Placement:
    """The placement as the record tells it (targets without their run options: enough for
    the policy, which reads only schedulers, startup timeouts and the budget)."""
    from anylaunch.runner.placement import Target

    targets = [
        Target(t["scheduler"], startup_timeout=t.get("startup_timeout"))
        for t in record.spec["targets"]
    ]
    return Placement(targets, int(record.spec.get("max_infra_retries", 0)))


def _history(record: PlacementRecord, next_move: str = "") -> PlacementHistory:
    entries: list[PlacementEntry] = []
    for a in record.attempts:
        entries.extend(PlacementEntry(a.attempt, s, None, "skipped", r) for s, r in a.skipped)
        if a.handle is not None or a.outcome != "current":
            entries.append(PlacementEntry(a.attempt, a.scheduler, a.handle, a.outcome, a.reason))
    url = str(record.spec.get("checkpoint_url", ""))
    return PlacementHistory(record.attempts[-1].attempt, tuple(entries), url, next_move)


def _with_history(
    status: AppStatus | None,
    record: PlacementRecord,
    current: AttemptRecord,
    settled_reason: str = "",
    next_move: str = "",
) -> AppStatus | None:
    if status is None:
        if not settled_reason:
            return None
        status = AppStatus(
            AppState.FAILED,
            msg=f"{current.scheduler} no longer knows attempt {current.attempt}",
            structured_error_msg=json.dumps({"category": "infrastructure"}),
        )
    msg = status.msg
    if settled_reason and settled_reason not in msg:
        msg = f"{msg} ({settled_reason})" if msg else settled_reason
    return dataclasses.replace(status, msg=msg, placement=_history(record, next_move))
