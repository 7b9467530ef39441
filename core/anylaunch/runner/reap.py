"""Orphan reaping: cancel live apps whose owner (the engine run that launched them) ended.

Every app launched from a workflow engine carries its owner in ``ANYLAUNCH_PARENT_RUN_ID``
(``airflow:{dag_id}/{run_id}/{task_id}``, ``prefect:{flow_run_id}``,
``dagster:{run_id}``). When the engine loses a task without running any hook (its worker was
SIGKILLed, the whole deployment stopped), nothing cancels the app. A reaper lists the live
apps of some schedulers, asks each engine about the owners it knows, and cancels the apps
whose owner ended or vanished. It is safe to run from several places at once: cancel is
idempotent, and an app whose owner's fate is unknown is always left alone.

The decision is :func:`plan`, which does no I/O; :func:`reap` gathers the facts and acts.
Each engine's :class:`OwnerChecker` comes from its integration, found through the plugin
registry (:func:`owner_checker`): the core imports no engine.

>>> app = LiveApp("local_cwd://s/a-1", "prefect:6b0b", "RUNNING")
>>> [(a.handle, a.action) for a in plan([app], {"prefect:6b0b": OwnerState.ENDED})]
[('local_cwd://s/a-1', 'cancel')]
>>> [a.action for a in plan([app], {"prefect:6b0b": OwnerState.ALIVE})]
['keep']
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from anylaunch.specs.errors import AnylaunchError, InvalidSpecError, did_you_mean

if TYPE_CHECKING:
    from anylaunch.runner.api import Runner
    from anylaunch.schedulers.api import ListAppResponse

__all__ = [
    "LiveApp",
    "MissingEngineError",
    "OwnerChecker",
    "OwnerState",
    "ReapAction",
    "ReapReport",
    "engine_of",
    "owner_checker",
    "owner_id",
    "plan",
    "reap",
]

logger: logging.Logger = logging.getLogger(__name__)

#: The engines whose owner ids anylaunch writes, and the prefix of each.
ENGINES = ("airflow", "prefect", "dagster")


def owner_id(engine: str, run: str) -> str:
    """The owner string an engine integration injects as ``ANYLAUNCH_PARENT_RUN_ID``.

    >>> owner_id("dagster", "0f1e")
    'dagster:0f1e'
    """
    if engine not in ENGINES:
        raise InvalidSpecError("engine", engine, "is not an engine", f"use one of {ENGINES}")
    return f"{engine}:{run}"


def engine_of(owner: str) -> str | None:
    """The engine an owner string belongs to, or None (a launch outside any engine).

    >>> engine_of("airflow:etl/manual__1/train"), engine_of("my-script")
    ('airflow', None)
    """
    engine, sep, rest = owner.partition(":")
    return engine if sep and rest and engine in ENGINES else None


class OwnerState(enum.Enum):
    """What an engine says about an owner."""

    ALIVE = "alive"  # still running (or about to retry): its app is not an orphan
    ENDED = "ended"  # finished, failed, crashed or cancelled
    GONE = "gone"  # the engine does not know it (deleted)
    UNKNOWN = "unknown"  # the engine could not be asked: never act on it


class OwnerChecker(Protocol):
    """Answers, for one engine, whether owners are still running (batched)."""

    engine: str

    def check(self, owners: Sequence[str]) -> Mapping[str, OwnerState]:
        """The state of each owner (missing keys count as UNKNOWN)."""
        ...


class MissingEngineError(AnylaunchError, ImportError):
    """An engine's owner checker cannot be made: the engine is not installed."""


def owner_checker(engine: str, **options: str | None) -> OwnerChecker:
    """The :class:`OwnerChecker` of ``engine``, made by the factory its integration registers
    as an owner-checker plugin (``anylaunch.owner_checkers`` entry points: airflow, prefect,
    dagster). Only that engine's integration is imported, and only now.

    Args:
        engine: the engine, e.g. ``"prefect"``
        options: what the caller knows (the CLI passes ``airflow_url``); a factory ignores the
            options it does not use

    Raises:
        InvalidSpecError: no owner checker is registered for ``engine``
        MissingEngineError: (an ``ImportError``) the engine is not installed; names the extra
            to install
    """
    from anylaunch.plugins import EntryPointPlugin, PluginType, find

    factories = find(PluginType.OWNER_CHECKER)
    factory = factories.get(engine)
    if factory is None:
        raise InvalidSpecError(
            "engine",
            engine,
            f"no owner checker is registered for it.{did_you_mean(engine, factories)}",
            f"use one of: {', '.join(sorted(factories)) or '(none installed)'}",
        )
    try:
        checker: OwnerChecker = factory(**options)
    except ImportError as e:
        missing = next(
            (
                c.name.partition(".")[0]
                for c in _causes(e)
                if isinstance(c, ModuleNotFoundError) and c.name
            ),
            None,
        )
        dist = factory.entry_point.dist if isinstance(factory, EntryPointPlugin) else None
        extras = (dist.metadata.get_all("Provides-Extra") or []) if dist else []
        fix = (
            f"pip install '{dist.name}[{engine}]'"
            if dist and engine in extras
            else f"install the Python package {missing or engine!r}"
        )
        raise MissingEngineError(
            f"the {engine} owner checker needs the Python package {missing or engine!r}, which "
            f"is not installed. Fix: {fix}"
        ) from e
    return checker


def _causes(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


@dataclass(frozen=True)
class LiveApp:
    """An app that has not ended, with its owner (None: launched outside any engine)."""

    handle: str
    owner: str | None
    state: str


@dataclass(frozen=True)
class ReapAction:
    """What the reaper does (or would do, in a dry run) with one app, and why."""

    handle: str
    owner: str | None
    action: str  # "cancel" or "keep"
    reason: str


@dataclass
class ReapReport:
    """The outcome of one reaper pass."""

    actions: list[ReapAction] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    dry_run: bool = False

    def summary(self) -> str:
        """One line per app, then a count.

        >>> ReapReport([ReapAction("h", "prefect:1", "cancel", "owner ended")]).summary()
        'cancel h (owner prefect:1): owner ended\\n1 orphan(s), 0 cancelled, 0 error(s)'
        """
        lines = [f"{a.action} {a.handle} (owner {a.owner}): {a.reason}" for a in self.actions]
        orphans = sum(a.action == "cancel" for a in self.actions)
        lines.append(
            f"{orphans} orphan(s), {len(self.cancelled)} cancelled, {len(self.errors)} error(s)"
        )
        return "\n".join(lines)


def plan(apps: Iterable[LiveApp], owners: Mapping[str, OwnerState]) -> list[ReapAction]:
    """Decides, without I/O, which live apps are orphans: those whose owner ENDED or is GONE.
    Apps without an owner, or whose owner is ALIVE or UNKNOWN, are kept."""
    actions = []
    for app in apps:
        state = owners.get(app.owner, OwnerState.UNKNOWN) if app.owner else None
        if state is None:
            actions.append(ReapAction(app.handle, None, "keep", "no owner: launched outside"))
        elif state in (OwnerState.ENDED, OwnerState.GONE):
            why = "owner ended" if state is OwnerState.ENDED else "owner is gone"
            actions.append(ReapAction(app.handle, app.owner, "cancel", why))
        else:
            actions.append(ReapAction(app.handle, app.owner, "keep", f"owner {state.value}"))
    return actions


def _live_apps(runner: Runner, listing: Sequence[ListAppResponse]) -> list[LiveApp]:
    """The live apps of a scheduler's ``listing``, each with its owner."""
    from anylaunch.runner.api import ENV_ANYLAUNCH_PARENT_RUN_ID
    from anylaunch.schedulers.common.job_metadata import OWNER_KEY
    from anylaunch.specs.api import is_terminal

    found = []
    for listed in listing:
        if is_terminal(listed.state):
            continue
        try:
            app = runner.describe(listed.app_handle)
        except Exception as e:  # one unreadable app must not stop the pass
            logger.warning("cannot describe %s: %s", listed.app_handle, type(e).__name__)
            continue
        owners = {role.env.get(ENV_ANYLAUNCH_PARENT_RUN_ID) for role in (app.roles if app else [])}
        owners.discard(None)
        if not owners and app is not None and app.metadata.get(OWNER_KEY):
            # a backend that cannot describe role env (Slurm) stamps the owner into the job
            owners = {app.metadata[OWNER_KEY]}
        owner = next(iter(owners)) if len(owners) == 1 else None
        found.append(LiveApp(listed.app_handle, owner, listed.state.name))
    return found


def _settle(runner: Runner, ended: Sequence[str]) -> None:
    """Reads the status of ended apps, as a watcher would have: the runner writes the record of
    each that has an archive and none yet (apps nobody watched to their end), and lets its
    scheduler release what it held for it. One batched status call per scheduler."""
    if not ended:
        return
    try:
        runner.status_many(ended)
    except Exception as e:  # the records wait for the next pass; the orphans do not
        logger.warning("cannot settle %d ended app(s): %s", len(ended), type(e).__name__)


def reap(
    runner: Runner,
    schedulers: Sequence[str],
    checkers: Sequence[OwnerChecker],
    dry_run: bool = False,
) -> ReapReport:
    """One reaper pass: lists the live apps of ``schedulers``, asks ``checkers`` about their
    owners, and cancels the orphans (unless ``dry_run``). Owners of engines without a checker
    are UNKNOWN, so their apps are kept. The ended apps listed are archived where they have an
    archive and no record yet (see :mod:`anylaunch.runner.archive`)."""
    from anylaunch.specs.api import is_terminal

    apps: list[LiveApp] = []
    for scheduler in schedulers:
        listing = runner.list(scheduler)
        _settle(runner, [listed.app_handle for listed in listing if is_terminal(listed.state)])
        apps += _live_apps(runner, listing)
    by_engine: dict[str, list[str]] = {}
    for app in apps:
        engine = engine_of(app.owner) if app.owner else None
        if engine is not None:
            by_engine.setdefault(engine, []).append(app.owner)  # type: ignore[arg-type]
    states: dict[str, OwnerState] = {}
    for checker in checkers:
        owners = sorted(set(by_engine.get(checker.engine, [])))
        if not owners:
            continue
        try:
            states.update(checker.check(owners))
        except Exception as e:  # an engine that cannot be asked decides nothing
            logger.warning("cannot ask %s about %d owner(s): %s", checker.engine, len(owners), e)
    report = ReapReport(plan(apps, states), dry_run=dry_run)
    for action in report.actions:
        if action.action != "cancel" or dry_run:
            continue
        try:
            runner.cancel(action.handle)
            report.cancelled.append(action.handle)
            logger.info("cancelled orphan %s (%s)", action.handle, action.reason)
        except Exception as e:
            report.errors[action.handle] = f"{type(e).__name__}: {e}"
    return report
