"""The MLflow tracker backend (TorchX's ``torchx.tracker.mlflow``): runs recorded as MLflow
runs of one experiment, looked up by name.

A job's run id (its app handle, ``ANYLAUNCH_JOB_ID``) is the MLflow run's *name*: MLflow gives
runs ids of its own, so the tracker finds the run by name and creates it on first use. Name
the factory in ``.anylaunchconfig``::

    [anylaunch:tracker]
    mlflow = anylaunch.tracker.mlflow:create_tracker

    [tracker:mlflow]
    config = /shared/mlflow-config    # a directory whose .anylaunchconfig has the section below

and in ``/shared/mlflow-config/.anylaunchconfig``::

    [tracker:mlflow]
    experiment_name = my-experiment
    tracking_uri = sqlite:////shared/mlflow.db
    artifact_location = s3://bucket/mlflow-artifacts

Metadata become run tags, an artifact a local file is uploaded to the run's artifact store (a
URL is recorded as it is), sources are tags too. ``mlflow`` (``pip install mlflow`` or
``mlflow-skinny``) is imported when a tracker is built, not when this module is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import socket
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from getpass import getuser
from pathlib import Path
from typing import Any

from anylaunch.sdk import MissingDependencyError
from anylaunch.settings import ENV_ANYLAUNCH_JOB_ID
from anylaunch.specs.errors import AnylaunchError, InvalidSpecError, did_you_mean
from anylaunch.tracker.api import TrackerArtifact, TrackerBase, TrackerSource
from anylaunch.tracker.checks import check_run_id
from anylaunch.tracker.errors import TrackerError

__all__ = [
    "DEFAULT_TRACKING_URI",
    "ENV_ANYLAUNCH_TRACKING_EXPERIMENT_NAME",
    "TAG_ARTIFACT_MD_PREFIX",
    "MLflowTracker",
    "create_tracker",
]

logger: logging.Logger = logging.getLogger(__name__)

#: Set by ``dist.spmd`` (and by you): the experiment :func:`create_tracker` records into,
#: over the ``experiment_name`` of the config.
ENV_ANYLAUNCH_TRACKING_EXPERIMENT_NAME = "ANYLAUNCH_TRACKING_EXPERIMENT_NAME"
#: Where runs go when no ``tracking_uri`` is given: a SQLite store in the temp directory
#: (MLflow 3 refuses a new file store, TorchX's default, unless MLFLOW_ALLOW_FILE_STORE is set).
DEFAULT_TRACKING_URI = f"sqlite:///{Path(tempfile.gettempdir()) / 'anylaunch' / 'mlflow.db'}"
#: Tag prefix of an artifact's metadata: ``anylaunch.artifact.metadata.<name>.<key>``.
TAG_ARTIFACT_MD_PREFIX = "anylaunch.artifact.metadata"
_TAG_ARTIFACT_PATH_PREFIX = "anylaunch.artifact.path"
_TAG_SOURCE_PREFIX = "anylaunch.source"
# tags that are the tracker's own bookkeeping or MLflow's, not the user's metadata
_NOT_METADATA = ("mlflow.", "anylaunch.artifact.", f"{_TAG_SOURCE_PREFIX}.")
_CONFIG_KEYS = ("experiment_name", "tracking_uri", "artifact_location")


def _mlflow() -> Any:
    try:
        import mlflow
    except ImportError:
        raise MissingDependencyError(
            "the mlflow tracker needs the Python package 'mlflow', which is not installed. "
            "Fix: pip install mlflow (or mlflow-skinny) where the tracker is built: the job's "
            "image, and where you run `anylaunch tracker`"
        ) from None
    return mlflow


def _check_optional_str(field: str, value: object, fix: str) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise InvalidSpecError(field, value, "must be a non-empty str (or None)", fix)


def _tag_value(value: object) -> str:
    # MLflow tags are strings: a str is kept as it is, other JSON data as JSON text
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _local_path(path: str) -> str | None:
    """``path`` as a local path if it names an existing local file or directory."""
    local = path.removeprefix("file://") if path.startswith("file://") else path
    if "://" in local:
        return None
    return local if os.path.exists(local) else None


class MLflowTracker(TrackerBase):
    """A tracker that records runs in MLflow. Call :meth:`close` at the end so the runs it
    wrote to are marked ``FINISHED`` (else MLflow shows them ``RUNNING``).

    .. important:: anylaunch's run id (the job's handle) is the MLflow run's *name*; the
       tracker looks runs up by name in its experiment.

    As in TorchX, :meth:`get_run` (and every write) makes the run MLflow's active run, so
    ``mlflow.log_metric(...)`` in the job goes to it. One process works on one run: asking for
    another while one is active raises :class:`~anylaunch.tracker.errors.TrackerError`.

    Args:
        experiment_name: the experiment to record into (created if missing; default
            :meth:`default_experiment_name`)
        tracking_uri: the MLflow tracking store (default :data:`DEFAULT_TRACKING_URI`)
        artifact_location: where a new experiment keeps artifacts (default: MLflow's)

    Raises:
        InvalidSpecError: an argument is not a non-empty str
        MissingDependencyError: mlflow is not installed
        TrackerError: the tracking store cannot be reached or used
    """

    def __init__(
        self,
        experiment_name: str | None = None,
        tracking_uri: str = DEFAULT_TRACKING_URI,
        artifact_location: str | None = None,
    ) -> None:
        _check_optional_str(
            "MLflowTracker.experiment_name", experiment_name, "pass e.g. 'my-experiment'"
        )
        if tracking_uri is None:
            tracking_uri = DEFAULT_TRACKING_URI
        _check_optional_str(
            "MLflowTracker.tracking_uri", tracking_uri, "pass e.g. 'sqlite:////shared/mlflow.db'"
        )
        _check_optional_str(
            "MLflowTracker.artifact_location", artifact_location, "pass e.g. 's3://bucket/mlflow'"
        )
        mlflow = _mlflow()
        from anylaunch.distributed import on_rank0_first

        self.tracking_uri = tracking_uri
        self._run_ids: dict[str, str] = {}  # run name -> MLflow run id
        self._started: str | None = None  # the MLflow run id this tracker made active
        if tracking_uri.startswith("sqlite:///"):
            Path(tracking_uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        name = experiment_name or self.default_experiment_name()
        # the fluent API (the active run) reads the global tracking URI, as in TorchX
        mlflow.set_tracking_uri(tracking_uri)
        logger.info("MLflow tracking_uri=%s, artifact_location=%s", tracking_uri, artifact_location)
        with self._store_errors("open the experiment"), on_rank0_first():
            self._client = mlflow.MlflowClient(tracking_uri)
            experiment = self._client.get_experiment_by_name(name)
            if experiment is None:
                experiment_id = self._client.create_experiment(
                    name, artifact_location=artifact_location
                )
                experiment = self._client.get_experiment(experiment_id)
                logger.info("created MLflow experiment %r (id=%s)", name, experiment_id)
            self.experiment = experiment
            # in a job, rank 0 creates the run first and the other ranks find it
            job_id = os.getenv(ENV_ANYLAUNCH_JOB_ID)
            if job_id:
                run = self.get_run(job_id)
                logger.info("primed MLflow run %r (%s)", run.info.run_name, run.info.run_id)

    @staticmethod
    def default_experiment_name() -> str:
        """``default-experiment/<user>/<host>``."""
        return f"default-experiment/{getuser()}/{socket.getfqdn()}"

    @property
    def experiment_id(self) -> str:
        """The MLflow experiment's id."""
        experiment_id: str = self.experiment.experiment_id
        return experiment_id

    @property
    def experiment_name(self) -> str:
        """The MLflow experiment's name."""
        name: str = self.experiment.name
        return name

    @property
    def artifact_location(self) -> str:
        """Where the experiment keeps its artifacts."""
        location: str = self.experiment.artifact_location
        return location

    def _store_errors(self, doing: str) -> Any:
        return _StoreErrors(self.tracking_uri, doing)

    # ---- finding runs by name ----

    def _runs_named(self, run_name: str) -> list[Any]:
        if "'" not in run_name:
            wanted = f"tags.`mlflow.runName` = '{run_name}'"
        elif '"' not in run_name:
            wanted = f'tags.`mlflow.runName` = "{run_name}"'
        else:  # no quoting can hold both: filter here
            return [r for r in self._all_runs() if r.info.run_name == run_name]
        runs: list[Any] = self._client.search_runs([self.experiment_id], filter_string=wanted)
        return sorted(runs, key=lambda r: (r.info.start_time or 0, r.info.run_id))

    def _all_runs(self) -> list[Any]:
        runs: list[Any] = []
        token = None
        while True:
            page = self._client.search_runs(
                [self.experiment_id], max_results=1000, page_token=token
            )
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    def _find_run_id(self, run_name: str) -> str | None:
        if run_name in self._run_ids:
            return self._run_ids[run_name]
        found = self._runs_named(run_name)
        if found:
            self._run_ids[run_name] = found[0].info.run_id
            return self._run_ids[run_name]
        return None

    def _run_id_for_write(self, run_name: str) -> str:
        run_name = check_run_id("run_id", run_name)
        with self._store_errors(f"find or create the run {run_name!r}"):
            run_id = self._find_run_id(run_name)
            if run_id is None:
                created = self._client.create_run(self.experiment_id, run_name=run_name)
                # replicas of one job may create the run at once: all adopt the oldest, and a
                # creator that lost the race deletes its copy
                oldest = self._runs_named(run_name)[0].info.run_id
                if oldest != created.info.run_id:
                    self._client.delete_run(created.info.run_id)
                run_id = self._run_ids[run_name] = oldest
            return run_id

    def get_run(self, run_name: str) -> Any:
        """MLflow's ``Run`` named ``run_name`` in the experiment, created if there is none,
        and made MLflow's active run (``mlflow.log_*`` calls go to it).

        Args:
            run_name: anylaunch's run id (the job's handle)

        Returns:
            the ``mlflow.entities.Run``, read afresh

        Raises:
            TrackerError: another MLflow run is active in this process
        """
        mlflow = _mlflow()
        run_id = self._run_id_for_write(run_name)
        active = mlflow.active_run()
        with self._store_errors(f"start the run {run_name!r}"):
            if active is None:
                mlflow.start_run(run_id=run_id)
                self._started = run_id
            elif active.info.run_id != run_id:
                raise TrackerError(
                    f"the MLflow run {active.info.run_name!r} is active in this process, so "
                    f"{run_name!r} cannot be. Fix: use one run per process, or call "
                    "MLflowTracker.close() (or mlflow.end_run()) before switching runs"
                )
            return self._client.get_run(run_id)

    def get_run_id(self, run_name: str) -> str:
        """The MLflow run id of the run named ``run_name``, made the active run (see
        :meth:`get_run`)."""
        run_id: str = self.get_run(run_name).info.run_id
        return run_id

    def close(self) -> None:
        """Marks the runs this tracker wrote to ``FINISHED`` and ends the active run it
        started."""
        mlflow = _mlflow()
        with self._store_errors("finish its runs"):
            active = mlflow.active_run()
            if active is not None and active.info.run_id == self._started:
                mlflow.end_run()
            self._started = None
            for run_id in self._run_ids.values():
                if self._client.get_run(run_id).info.status == "RUNNING":
                    self._client.set_terminated(run_id, "FINISHED")

    # ---- TrackerBase ----

    def add_artifact(
        self, run_id: str, name: str, path: str, metadata: Mapping[str, object] | None = None
    ) -> None:
        """Records artifact ``name``: a local file or directory is uploaded under ``name`` in
        the run's artifact store; a URL (or a path not here) is recorded as it is. Its
        metadata become ``anylaunch.artifact.metadata.<name>.<key>`` tags."""
        mlflow_run_id = self.get_run_id(run_id)
        local = _local_path(path)
        with self._store_errors(f"record the artifact {name!r}"):
            run = self._client.get_run(mlflow_run_id)
            if local is None:
                location = path
            elif os.path.isdir(local):
                self._client.log_artifacts(mlflow_run_id, local, artifact_path=name)
                location = f"{run.info.artifact_uri}/{name}"
            else:
                logger.info("uploading artifact %s from %s", name, local)
                self._client.log_artifact(mlflow_run_id, local, artifact_path=name)
                location = f"{run.info.artifact_uri}/{name}/{os.path.basename(local)}"
            self._client.set_tag(mlflow_run_id, f"{_TAG_ARTIFACT_PATH_PREFIX}.{name}", location)
            for key, value in (metadata or {}).items():
                self._client.set_tag(
                    mlflow_run_id, f"{TAG_ARTIFACT_MD_PREFIX}.{name}.{key}", _tag_value(value)
                )

    def _tags(self, run_id: str) -> dict[str, str]:
        run_id = check_run_id("run_id", run_id)
        with self._store_errors(f"read the run {run_id!r}"):
            mlflow_run_id = self._find_run_id(run_id)
            if mlflow_run_id is None:
                return {}
            tags: dict[str, str] = dict(self._client.get_run(mlflow_run_id).data.tags)
            return tags

    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        tags = self._tags(run_id)
        path_prefix = f"{_TAG_ARTIFACT_PATH_PREFIX}."
        found: dict[str, TrackerArtifact] = {}
        for key, location in sorted(tags.items()):
            if not key.startswith(path_prefix):
                continue
            name = key.removeprefix(path_prefix)
            md_prefix = f"{TAG_ARTIFACT_MD_PREFIX}.{name}."
            metadata = {
                k.removeprefix(md_prefix): v for k, v in tags.items() if k.startswith(md_prefix)
            }
            found[name] = TrackerArtifact(name=name, path=location, metadata=metadata)
        return found

    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        """Sets ``kwargs`` as tags of the run (a value other than a str as JSON text)."""
        mlflow_run_id = self.get_run_id(run_id)
        with self._store_errors("record metadata"):
            for key, value in kwargs.items():
                self._client.set_tag(mlflow_run_id, key, _tag_value(value))

    def metadata(self, run_id: str) -> Mapping[str, object]:
        """The run's tags, without MLflow's own (``mlflow.*``) and the tracker's bookkeeping
        (artifacts, sources)."""
        return {k: v for k, v in self._tags(run_id).items() if not k.startswith(_NOT_METADATA)}

    def add_source(self, run_id: str, source_id: str, artifact_name: str | None = None) -> None:
        """Records ``source_id`` as a source of the run (a tag per source and relation)."""
        mlflow_run_id = self.get_run_id(run_id)
        source = {"source_run_id": source_id, "artifact_name": artifact_name}
        digest = hashlib.sha256(json.dumps(source, sort_keys=True).encode()).hexdigest()[:16]
        with self._store_errors("record a source"):
            self._client.set_tag(
                mlflow_run_id, f"{_TAG_SOURCE_PREFIX}.{digest}", json.dumps(source, sort_keys=True)
            )

    def sources(self, run_id: str, artifact_name: str | None = None) -> Iterable[TrackerSource]:
        found = []
        for key, value in sorted(self._tags(run_id).items()):
            if key.startswith(f"{_TAG_SOURCE_PREFIX}."):
                source = json.loads(value)
                if artifact_name is None or source["artifact_name"] == artifact_name:
                    found.append(TrackerSource(source["source_run_id"], source["artifact_name"]))
        return found

    def run_ids(self, **kwargs: str) -> Iterable[str]:
        """The names of the experiment's runs; ``parent_run_id=ID`` keeps those with ID as a
        source."""
        unknown = sorted(set(kwargs) - {"parent_run_id"})
        if unknown:
            raise InvalidSpecError(
                "run_ids",
                unknown[0],
                f"is no filter.{did_you_mean(unknown[0], ['parent_run_id'])}",
                "filter with parent_run_id=ID, or pass none",
            )
        parent = kwargs.get("parent_run_id")
        with self._store_errors("list its runs"):
            runs = self._all_runs()
        names = sorted({r.info.run_name for r in runs if r.info.run_name})
        if parent is None:
            return names
        return [n for n in names if any(s.source_run_id == parent for s in self.sources(n))]

    def has_run(self, run_id: str) -> bool:
        with self._store_errors(f"look up the run {run_id!r}"):
            return self._find_run_id(check_run_id("run_id", run_id)) is not None

    def log_params_flat(self, run_name: str, cfg: Any, key: str = "") -> None:
        """Logs ``cfg`` (a dataclass, a mapping or a sequence, nested) as the run's MLflow
        parameters, its fields flattened into dotted names.

        A dataclass ``Config(i=1, l=["a", "b"], cfg_list=[Config2("hello"), Config2("world")],
        cfg2=Config2("bar"))`` logs ``i = 1``, ``l = ['a', 'b']`` (a sequence of primitives as
        one parameter), ``cfg_list._0.foo = hello``, ``cfg_list._1.foo = world`` (a sequence of
        containers one element at a time, suffixed ``_<index>``) and ``cfg2.foo = bar``.

        Args:
            run_name: the run (anylaunch's run id)
            cfg: the configuration (hydra-style dataclasses, dicts, lists)
            key: the name prefix (empty at the top)
        """
        mlflow_run_id = self.get_run_id(run_name)
        with self._store_errors("log parameters"):
            for name, value in _flatten(cfg, key):
                self._client.log_param(mlflow_run_id, name, value)


def _is_primitive(value: object) -> bool:
    return isinstance(value, str | int | float | bool)


def _flatten(cfg: Any, key: str) -> list[tuple[str, Any]]:
    """``cfg`` as ``(name, value)`` parameters (see :meth:`MLflowTracker.log_params_flat`).

    >>> _flatten({"a": 1, "b": {"c": [1, 2]}, "d": [{"e": "x"}]}, "")
    [('a', 1), ('b.c', [1, 2]), ('d._0.e', 'x')]
    """
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        cfg = dataclasses.asdict(cfg)
    prefix = f"{key}." if key else ""
    if not cfg or _is_primitive(cfg):
        return [(key, cfg)]
    if isinstance(cfg, Mapping):
        params: list[tuple[str, Any]] = []
        for k, v in cfg.items():
            params += [(f"{prefix}{k}", v)] if _is_primitive(v) else _flatten(v, f"{prefix}{k}")
        return params
    if isinstance(cfg, Sequence | set | frozenset):
        elements = list(cfg)
        if _is_primitive(elements[0]):  # assumed homogeneous, as in TorchX
            return [(key, cfg)]
        return [p for i, e in enumerate(elements) for p in _flatten(e, f"{prefix}_{i}")]
    return [(key, cfg)]


class _StoreErrors:
    """Turns what MLflow raises into a TrackerError naming the store and what failed."""

    def __init__(self, tracking_uri: str, doing: str) -> None:
        self.tracking_uri = tracking_uri
        self.doing = doing

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: Any
    ) -> None:
        if error is None or isinstance(error, AnylaunchError) or not isinstance(error, Exception):
            return
        raise TrackerError(
            f"the mlflow tracker could not {self.doing} in the tracking store "
            f"{self.tracking_uri!r}: {type(error).__name__}: {error}. Fix: check tracking_uri "
            "(e.g. sqlite:////shared/mlflow.db or http://mlflow:5000) and that this process can "
            "reach and write it"
        ) from error


def create_tracker(config: str | None) -> MLflowTracker:
    """The factory of :class:`MLflowTracker`: its arguments come from the
    ``[tracker:mlflow]`` section of the ``.anylaunchconfig`` in directory ``config`` (keys
    ``experiment_name``, ``tracking_uri``, ``artifact_location``; a ``config`` key is
    ignored), the experiment from ``ANYLAUNCH_TRACKING_EXPERIMENT_NAME`` when it is set.

    Args:
        config: a directory holding a ``.anylaunchconfig``; None reads the usual config files

    Raises:
        InvalidSpecError: ``config`` is no directory, or the section has an unknown key
    """
    from anylaunch.runner.config import get_configs

    if config is not None and (not isinstance(config, str) or not os.path.isdir(config)):
        raise InvalidSpecError(
            "[tracker:mlflow] config",
            config,
            "is not a directory",
            "name the directory whose .anylaunchconfig has the [tracker:mlflow] section",
        )
    args: dict[str, str] = dict(
        get_configs("tracker", "mlflow", None if config is None else [config])
    )
    args.pop("config", None)  # what named this directory, not an argument
    for key in args:
        if key not in _CONFIG_KEYS:
            raise InvalidSpecError(
                f"[tracker:mlflow] {key}",
                args[key],
                f"is no option of the mlflow tracker.{did_you_mean(key, _CONFIG_KEYS)}",
                f"use {', '.join(_CONFIG_KEYS)}",
            )
    experiment = os.getenv(ENV_ANYLAUNCH_TRACKING_EXPERIMENT_NAME) or args.pop(
        "experiment_name", None
    )
    args.pop("experiment_name", None)
    return MLflowTracker(
        experiment_name=experiment,
        tracking_uri=args.get("tracking_uri") or DEFAULT_TRACKING_URI,
        artifact_location=args.get("artifact_location") or None,
    )
