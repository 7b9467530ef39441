"""The tracker API: :class:`TrackerBase` (a backend), :class:`AppRun` (what a job uses), and
how the trackers a launcher configured reach the job through its environment.

The launcher's runner puts into every role's env ``ANYLAUNCH_TRACKERS`` (the factories,
comma-separated), ``ANYLAUNCH_TRACKER_<NAME>_CONFIG`` (each one's config), ``ANYLAUNCH_JOB_ID``
(the job's handle: its run id) and, when given, ``ANYLAUNCH_PARENT_RUN_ID``. In the job,
:meth:`AppRun.run_from_env` builds the trackers from them.

This module is imported by the runner (for the env names): it stays cheap, importing no
backend and no plugin until a tracker is built.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from anylaunch.settings import (
    ENV_ANYLAUNCH_JOB_ID,
    ENV_ANYLAUNCH_PARENT_RUN_ID,
    ENV_ANYLAUNCH_TRACKERS,
)
from anylaunch.specs.errors import AnylaunchError
from anylaunch.tracker.checks import check_metadata, check_name, check_path, check_run_id
from anylaunch.tracker.errors import TrackerLoadError

__all__ = [
    "ENV_ANYLAUNCH_JOB_ID",
    "ENV_ANYLAUNCH_PARENT_RUN_ID",
    "ENV_ANYLAUNCH_TRACKERS",
    "UNDEFINED_RUN_ID",
    "AppRun",
    "AppRunTrackableSource",
    "TrackerArtifact",
    "TrackerBase",
    "TrackerSource",
    "build_trackers",
    "tracker_config_env_var_name",
    "trackers_from_environ",
]

logger: logging.Logger = logging.getLogger(__name__)

#: The id of an :class:`AppRun` made outside an anylaunch job (it tracks nothing).
UNDEFINED_RUN_ID = "<UNDEFINED>"

_NOT_ENV_CHAR = re.compile(r"[^A-Z0-9]")


@dataclass
class TrackerSource:
    """A source of a run, as a tracker stores it.

    Args:
        source_run_id: another run's id (a job handle) or an external entity's (a data set)
        artifact_name: the kind of relation, e.g. ``"dataset"``; None for a plain parent
    """

    source_run_id: str
    artifact_name: str | None


@dataclass
class TrackerArtifact:
    """An artifact of a run, as a tracker stores it.

    Args:
        name: the artifact's name, unique within the run
        path: where the artifact is (a path or URL; the tracker stores the location only)
        metadata: more about the artifact (JSON data)
    """

    name: str
    path: str
    metadata: Mapping[str, object] | None


@dataclass
class AppRunTrackableSource:
    """A source of an :class:`AppRun`, as the job sees it.

    Args:
        parent: the source run (its id, and the same trackers)
        artifact_name: the kind of relation, or None
    """

    parent: AppRun
    artifact_name: str | None


class TrackerBase(ABC):
    """A tracking backend: stores metadata, artifacts and sources per run id.

    Several replicas of one job write to the same run at once: an implementation must keep
    every write (metadata keys merge, the last write of a key wins). Inputs reach it already
    checked when they come through :class:`AppRun`.
    """

    @abstractmethod
    def add_artifact(
        self, run_id: str, name: str, path: str, metadata: Mapping[str, object] | None = None
    ) -> None:
        """Records artifact ``name`` of the run at ``path`` (replacing one of that name)."""

    @abstractmethod
    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        """The run's artifacts by name (empty if none)."""

    @abstractmethod
    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        """Merges ``kwargs`` into the run's metadata."""

    @abstractmethod
    def metadata(self, run_id: str) -> Mapping[str, object]:
        """The run's metadata (empty if none)."""

    @abstractmethod
    def add_source(self, run_id: str, source_id: str, artifact_name: str | None = None) -> None:
        """Records ``source_id`` as a source (lineage) of the run."""

    @abstractmethod
    def sources(self, run_id: str, artifact_name: str | None = None) -> Iterable[TrackerSource]:
        """The run's sources, only those of ``artifact_name`` if given."""

    @abstractmethod
    def run_ids(self, **kwargs: str) -> Iterable[str]:
        """The ids of the runs recorded; ``parent_run_id=ID`` keeps the runs that have ID as
        a source."""

    def has_run(self, run_id: str) -> bool:
        """Whether anything was recorded for ``run_id`` (an anylaunch addition, used by
        ``anylaunch tracker list`` to tell an unknown run from an empty one)."""
        return run_id in set(self.run_ids())


def tracker_config_env_var_name(name: str) -> str:
    """The env var holding the config of tracker ``name``: ``ANYLAUNCH_TRACKER_<NAME>_CONFIG``,
    with every character other than a letter or digit as ``_``.

    >>> tracker_config_env_var_name("fsspec")
    'ANYLAUNCH_TRACKER_FSSPEC_CONFIG'
    >>> tracker_config_env_var_name("my_pkg.tracking:create")
    'ANYLAUNCH_TRACKER_MY_PKG_TRACKING_CREATE_CONFIG'
    """
    return f"ANYLAUNCH_TRACKER_{_NOT_ENV_CHAR.sub('_', name.upper())}_CONFIG"


def build_trackers(factory_and_config: Mapping[str, str | None]) -> list[TrackerBase]:
    """Builds one tracker per ``{factory: config}`` entry, in order.

    >>> build_trackers({})
    []

    Raises:
        InvalidSpecError: a factory names no tracker
        TrackerLoadError: a factory cannot be imported, fails, or returns no TrackerBase
    """
    from anylaunch.tracker.factories import load_factory

    trackers: list[TrackerBase] = []
    for spec, config in factory_and_config.items():
        factory = load_factory(ENV_ANYLAUNCH_TRACKERS, spec)
        try:
            tracker = factory(config)
        except AnylaunchError:
            raise  # already says what to fix (e.g. a bad config)
        except Exception as e:  # a third-party factory can fail in any way
            raise TrackerLoadError(
                spec, f"its factory raised {type(e).__name__}: {e}", "fix its config or factory"
            ) from e
        if not isinstance(tracker, TrackerBase):
            raise TrackerLoadError(
                spec,
                f"its factory returned a {type(tracker).__name__}, not a TrackerBase",
                "make the factory return a subclass of anylaunch.tracker.api.TrackerBase",
            )
        trackers.append(tracker)
    return trackers


def _factories_in(environ: Mapping[str, str]) -> dict[str, str | None]:
    names = [n.strip() for n in environ.get(ENV_ANYLAUNCH_TRACKERS, "").split(",") if n.strip()]
    return {n: environ.get(tracker_config_env_var_name(n)) or None for n in names}


def trackers_from_environ(environ: Mapping[str, str] | None = None) -> list[TrackerBase]:
    """The trackers ``ANYLAUNCH_TRACKERS`` names in ``environ`` (default: this process's),
    each with its ``ANYLAUNCH_TRACKER_<NAME>_CONFIG``.

    >>> trackers_from_environ({})
    []
    """
    return build_trackers(_factories_in(os.environ if environ is None else environ))


def _tracking_env(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    keep = (ENV_ANYLAUNCH_JOB_ID, ENV_ANYLAUNCH_PARENT_RUN_ID, ENV_ANYLAUNCH_TRACKERS)
    return tuple(
        sorted(
            (k, v)
            for k, v in environ.items()
            if k in keep or (k.startswith("ANYLAUNCH_TRACKER_") and k.endswith("_CONFIG"))
        )
    )


@functools.lru_cache(maxsize=8)
def _run_for(env: tuple[tuple[str, str], ...]) -> AppRun:
    environ = dict(env)
    job_id = environ.get(ENV_ANYLAUNCH_JOB_ID)
    if not job_id:
        logger.info("%s is not set: this AppRun tracks nothing", ENV_ANYLAUNCH_JOB_ID)
        return AppRun(UNDEFINED_RUN_ID, [])
    run = AppRun(check_run_id(ENV_ANYLAUNCH_JOB_ID, job_id), trackers_from_environ(environ))
    parent = environ.get(ENV_ANYLAUNCH_PARENT_RUN_ID)
    if parent:
        run.add_source(check_run_id(ENV_ANYLAUNCH_PARENT_RUN_ID, parent))
    return run


@dataclass
class AppRun:
    """A job's run, as the job tracks it: writes go to every backend, reads to the first.

    In a job, get it with :meth:`run_from_env`. Every method checks its input and raises
    :class:`~anylaunch.specs.errors.InvalidSpecError` naming the argument, also when no
    tracker is configured (so a mistake shows on a laptop run too).

    >>> run = AppRun("local_cwd://s/train-1", [])
    >>> run.add_metadata(lr=0.1)
    >>> run.job_id()
    'local_cwd://s/train-1'
    >>> run.add_metadata(loss=float("inf"))
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: add_metadata.loss=inf is invalid: numbers must be finite (JSON has no NaN). Fix: pass a str, a finite number, a bool, None, or a list or dict of those

    Args:
        id: the run id (the job's handle)
        backends: the trackers to write to
    """

    id: str
    backends: Iterable[TrackerBase] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_run_id("AppRun.id", self.id)
        backends = list(self.backends)  # an iterator would be used up by the first write
        for i, backend in enumerate(backends):
            if not isinstance(backend, TrackerBase):
                from anylaunch.specs.errors import InvalidSpecError

                raise InvalidSpecError(
                    f"AppRun.backends[{i}]",
                    type(backend).__name__,
                    "is not a TrackerBase",
                    "pass trackers, e.g. [FsspecTracker('/shared/tracking')]",
                )
        self.backends = backends

    @staticmethod
    def run_from_env() -> AppRun:
        """The run of the job this process belongs to, with the trackers its launcher
        configured (``ANYLAUNCH_JOB_ID``, ``ANYLAUNCH_TRACKERS`` and their configs). Outside
        an anylaunch job its id is ``<UNDEFINED>`` and it tracks nothing. When
        ``ANYLAUNCH_PARENT_RUN_ID`` is set, the parent is recorded as a source (once).

        The same environment gives the same object.

        Raises:
            InvalidSpecError, TrackerLoadError: a configured tracker cannot be built here
        """
        return _run_for(_tracking_env(os.environ))

    def job_id(self) -> str:
        """The run id: the job's handle."""
        return self.id

    def add_metadata(self, **kwargs: object) -> None:
        """Merges ``kwargs`` (names to JSON data: str, finite numbers, bools, None, lists and
        dicts) into the run's metadata."""
        values = check_metadata("add_metadata", kwargs)
        for backend in self.backends:
            backend.add_metadata(self.id, **values)

    def add_artifact(
        self, name: str, path: str, metadata: Mapping[str, object] | None = None
    ) -> None:
        """Records artifact ``name`` at ``path`` (a path or URL), with optional ``metadata``."""
        name = check_name("add_artifact.name", name)
        path = check_path("add_artifact.path", path)
        meta = None if metadata is None else check_metadata("add_artifact.metadata", metadata)
        for backend in self.backends:
            backend.add_artifact(self.id, name, path, meta)

    def add_source(self, source_id: str, artifact_name: str | None = None) -> None:
        """Records ``source_id`` (another run, or an external id) as a source of this run;
        ``artifact_name`` names the relation (e.g. ``"dataset"``)."""
        source_id = check_run_id("add_source.source_id", source_id)
        if artifact_name is not None:
            artifact_name = check_name("add_source.artifact_name", artifact_name)
        for backend in self.backends:
            backend.add_source(self.id, source_id, artifact_name)

    def sources(self) -> Iterable[AppRunTrackableSource]:
        """The run's sources, read from the first tracker (empty without one)."""
        if not self.backends:
            return []
        backends = list(self.backends)
        return [
            AppRunTrackableSource(AppRun(s.source_run_id, backends), s.artifact_name)
            for s in backends[0].sources(self.id)
        ]
