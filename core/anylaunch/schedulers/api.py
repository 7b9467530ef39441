"""The scheduler interface every backend implements, and the types it returns.

A scheduler translates an AppDef plus a resolved run config into a native request
(``_submit_dryrun``), submits it (``schedule``), and then describes, lists, streams logs from,
cancels and deletes the app by its scheduler-assigned ``app_id``.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from anylaunch.schedulers.common.capacity import Capacity
from anylaunch.schedulers.common.changes import ChangeFeed
from anylaunch.specs.api import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    Role,
    RoleStatus,
    Workspace,
    is_terminal,
    make_app_handle,
)
from anylaunch.specs.array_status import ArrayStatus
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.runopts import CfgVal, runopts
from anylaunch.specs.structured_opts import StructuredOpts

__all__ = [
    "ARCHIVE_URL_ENV",
    "ARCHIVE_URL_OPT",
    "CANCEL_REQUESTED",
    "DAYS_IN_2_WEEKS",
    "RUNNER_OPTS",
    "DescribeAppResponse",
    "ListAppResponse",
    "LogQuery",
    "Scheduler",
    "SchedulerFactory",
    "Stream",
    "StructuredOpts",
    "backend_cfg",
    "filter_regex",
    "split_lines",
    "split_lines_iterator",
]

#: Two weeks, in days: TorchX's ``torchx.schedulers.api.DAYS_IN_2_WEEKS``, for code ported
#: from TorchX (no anylaunch scheduler reads it).
DAYS_IN_2_WEEKS = 14

T = TypeVar("T")
_SchedulerT = TypeVar("_SchedulerT", bound="Scheduler[Any]")


class SchedulerFactory(Protocol):
    """Creates a scheduler for a session: ``create_scheduler(session_name, **kwargs)``."""

    def __call__(self, session_name: str, **kwargs: Any) -> Scheduler[Any]: ...


class Stream(str, Enum):
    """Which output of a replica ``log_iter`` reads."""

    STDOUT = "stdout"
    STDERR = "stderr"
    COMBINED = "combined"

    def __str__(self) -> str:
        return self.value


#: The run option every scheduler takes that names the app's archive (see
#: :mod:`anylaunch.runner.archive`): the Runner acts on it, the backend's request never sees it.
ARCHIVE_URL_OPT = "archive_url"
#: The role env variable in which the Runner names the app's archive (backends that keep
#: something for the archive's sake, e.g. Kubernetes' hold, look for it).
ARCHIVE_URL_ENV = "ANYLAUNCH_ARCHIVE_URL"
#: Run options every scheduler takes that its runner acts on (stripped before the backend's
#: :meth:`Scheduler._submit_dryrun`).
RUNNER_OPTS = (ARCHIVE_URL_OPT,)


def backend_cfg(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``cfg`` without the runner's options (:data:`RUNNER_OPTS`): what a backend's hooks see.

    >>> backend_cfg({"queue": "q", "archive_url": "s3://b/a"})
    {'queue': 'q'}
    """
    return {k: v for k, v in cfg.items() if k not in RUNNER_OPTS}


#: ``DescribeAppResponse.metadata`` key a backend sets (to ``"true"``) once someone asked to
#: cancel the app, from a durable mark on the backend, while the app may still be stopping.
CANCEL_REQUESTED = "cancel_requested"


@dataclass
class DescribeAppResponse:
    """Response from ``Scheduler.describe()``: status, roles and metadata of one app."""

    app_id: str = "<NOT_SET>"
    state: AppState = AppState.UNSUBMITTED
    num_restarts: int = -1
    msg: str = NONE
    structured_error_msg: str = NONE
    ui_url: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    roles_statuses: list[RoleStatus] = field(default_factory=list)
    roles: list[Role] = field(default_factory=list)
    array: ArrayStatus | None = None


@dataclass
class ListAppResponse:
    """Response from ``Scheduler.list()`` / ``Runner.list()``."""

    app_id: str
    state: AppState
    app_handle: str = "<NOT_SET>"
    name: str = ""


#: The built-in schedulers that run arrays (named in the refusal of those that do not).
_ARRAY_BACKENDS = ("local_cwd", "local_docker", "kubernetes", "slurm", "lsf", "aws_batch")


class Scheduler(abc.ABC, Generic[T]):
    """Abstract base class for job schedulers.

    Implementors override the abstract methods; see :class:`StructuredOpts` for typed config.
    ``backend`` names the scheduler in app handles (``{backend}://{session_name}/{app_id}``).
    """

    #: Whether :meth:`submit_dryrun` takes array apps (``AppDef.array``); a scheduler that
    #: does not says why in :attr:`array_refusal`.
    supports_arrays: ClassVar[bool] = False
    array_refusal: ClassVar[str] = "it has no job arrays"

    #: The keyword arguments of the registry's factory (``create_scheduler``) that go to the
    #: constructor (see :meth:`from_kwargs`).
    factory_kwargs: ClassVar[tuple[str, ...]] = ()

    def __init__(self, backend: str, session_name: str) -> None:
        self.backend = backend
        self.session_name = session_name

    @classmethod
    def from_kwargs(
        cls: type[_SchedulerT], session_name: str, kwargs: Mapping[str, Any]
    ) -> _SchedulerT:
        """The scheduler from the registry factory's keyword arguments: those named in
        ``factory_kwargs`` go to the constructor (missing ones take its defaults), others
        are ignored."""
        return cls(session_name, **{k: kwargs[k] for k in cls.factory_kwargs if k in kwargs})

    def close(self) -> None:
        """Releases local resources. Safe to call multiple times."""

    # --- submission ---------------------------------------------------------------------

    def submit(self, app: AppDef, cfg: T, workspace: str | Workspace | None = None) -> str:
        """Submits an app directly and returns its app_id. Prefer ``Runner.run``.

        Resolves ``cfg`` against :meth:`run_opts`; then, given a ``workspace`` (a
        :class:`Workspace` or its string form; ``None`` or ``""`` means none), makes it the
        first role's workspace and builds every role that has a workspace into that role's
        image through the scheduler's ``WorkspaceMixin``. Then :meth:`submit_dryrun` and
        :meth:`schedule`. As in TorchX, the build updates the caller's roles in place
        (``Runner.run`` works on a copy instead).

        Raises:
            ValueError: a workspace is given but the scheduler does not support workspaces
                (an :class:`~anylaunch.specs.errors.InvalidSpecError`).
            InvalidRunConfigException: ``cfg`` has an unknown, missing or mistyped option.
        """
        resolved = backend_cfg(self.run_opts().resolve(cfg if cfg is not None else {}))  # type: ignore[arg-type]
        ws = as_workspace(workspace)
        if ws is not None:
            self._build_workspaces(app, ws, resolved)
        return self.schedule(self.submit_dryrun(app, resolved))  # type: ignore[arg-type]

    def _build_workspaces(self, app: AppDef, ws: Workspace, cfg: Mapping[str, CfgVal]) -> None:
        from anylaunch.workspace.api import WorkspaceMixin

        if not isinstance(self, WorkspaceMixin):
            raise InvalidSpecError(
                "workspace",
                str(ws),
                f"the {self.backend} scheduler does not support workspaces",
                "build your code into the role's image and pass workspace=None, or submit "
                "to a scheduler that supports workspaces",
            )
        if not isinstance(app, AppDef):
            raise InvalidSpecError(
                "app", type(app).__name__, "must be an AppDef", "pass specs.AppDef(...)"
            )
        app.validate()  # a role to hold the workspace, and sane roles before a costly build
        app.roles[0].workspace = ws
        self._pre_build_validate(app, self.backend, cfg)  # type: ignore[arg-type]
        for role in app.roles:
            if role.workspace is not None:
                self.build_workspace_and_update_role(role, role.workspace, cfg)

    def submit_dryrun(self, app: AppDef, cfg: T) -> AppDryRunInfo[object]:
        """Returns the scheduler request without submitting.

        Validates the app (no NUL byte in any entrypoint, arg or env value either), resolves
        ``cfg`` against :meth:`run_opts` (unknown keys, missing required options and wrong
        types raise InvalidRunConfigException), calls
        ``_submit_dryrun`` and then each role's ``pre_proc`` in order.
        """
        app.validate()
        self.check_array_support(app)
        from anylaunch.schedulers.common.roles import check_role_no_nul

        for role in app.roles:  # no backend can carry a NUL byte: reject it for all of them
            check_role_no_nul(role)
        resolved = self.run_opts().resolve(cfg if cfg is not None else {})  # type: ignore[arg-type]
        dryrun_info = self._submit_dryrun(app, backend_cfg(resolved))  # type: ignore[arg-type]
        for role in app.roles:
            dryrun_info = role.pre_proc(self.backend, dryrun_info)
        dryrun_info._app = app
        dryrun_info._cfg = resolved
        dryrun_info._scheduler = self.backend
        if app.array is not None:  # every index's resolved command, after the request
            from anylaunch.specs.arrays import preview

            request_text = dryrun_info._fmt
            shown = preview(app)
            dryrun_info._fmt = lambda request: f"{request_text(request)}\n{shown}"
        return dryrun_info

    def retry_indices(self, app_id: str, indices: Sequence[int]) -> str:
        """Submits the given indices of array app ``app_id`` again, as one new array of the
        same definition (natively where the backend can, e.g. ``sbatch --array=3,17``).
        Returns the new app_id. Prefer ``Runner.retry_failed``.

        Raises:
            InvalidSpecError: the scheduler cannot retry arrays, the app is not an array, or
                an index is out of its range.
        """
        if not self.supports_arrays:
            raise InvalidSpecError(
                "app_handle",
                app_id,
                f"the {self.backend} scheduler does not run arrays: {self.array_refusal}",
                "retry arrays on a scheduler that runs them",
            )
        if (
            isinstance(indices, (str, bytes))
            or not isinstance(indices, Iterable)
            or not (picked := list(indices))
            or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in picked)
        ):
            raise InvalidSpecError(
                "indices",
                indices,
                "must be a non-empty list of array indices >= 0",
                "pass the indices to rerun, e.g. [3, 17] (Runner.retry_failed finds them)",
            )
        return self._retry_indices(app_id, sorted(set(picked)))

    def _retry_indices(self, app_id: str, indices: Sequence[int]) -> str:
        raise NotImplementedError(f"{type(self).__name__} runs arrays but cannot retry them")

    def check_array_support(self, app: AppDef) -> None:
        """Refuses an array app (``app.array``) unless this scheduler runs arrays; called
        before anything costly (a workspace build) and again by :meth:`submit_dryrun`.

        Raises:
            InvalidSpecError: naming ``AppDef.array``, why, and where arrays run.
        """
        if app.array is not None and not self.supports_arrays:
            raise InvalidSpecError(
                "AppDef.array",
                app.array,
                f"the {self.backend} scheduler does not run arrays: {self.array_refusal}",
                "submit the array to a scheduler with arrays ("
                + ", ".join(b for b in _ARRAY_BACKENDS if b != self.backend)
                + "), or run the indices as separate apps",
            )

    def check_capacity(self, app: AppDef, cfg: T) -> Capacity:
        """Whether the backend can run ``app`` with ``cfg`` now: yes, no or unknown, with the
        reason (and the expected start where the backend tells). Changes nothing on the
        backend and makes a bounded number of calls (``Capacity.calls``); the placement guide
        lists each scheduler's signal. ``cfg`` is resolved (``run_opts().resolve``).
        """
        self.check_array_support(app)
        return self._check_capacity(app, backend_cfg(cfg))  # type: ignore[arg-type]

    def _check_capacity(self, app: AppDef, cfg: T) -> Capacity:
        """The backend's signal; by default there is none."""
        return Capacity.unknown(f"the {self.backend} scheduler has no capacity signal")

    @abc.abstractmethod
    def _submit_dryrun(self, app: AppDef, cfg: T) -> AppDryRunInfo[object]:
        """Translates the app and resolved cfg into the native request (no submission)."""

    @abc.abstractmethod
    def schedule(self, dryrun_info: AppDryRunInfo[object]) -> str:
        """Submits a previously dry-run request. Returns the app_id."""

    #: The type of the native request :meth:`_submit_dryrun` makes; :meth:`schedule` takes no
    #: other (see :meth:`_own_request`). ``object``, the default, lets any request through.
    request_type: ClassVar[type[Any]] = object

    def _own_request(self, dryrun_info: AppDryRunInfo[Any]) -> Any:
        """The request of ``dryrun_info``, checked to be one this scheduler's
        :meth:`submit_dryrun` makes (:meth:`_is_own_request`): :meth:`schedule` starts here.

        Raises:
            InvalidSpecError: the request is another scheduler's, or no request at all.
        """
        request = dryrun_info.request
        if not self._is_own_request(request):
            raise InvalidSpecError(
                "dryrun_info.request",
                type(request).__name__,
                f"is not a request of the {self.backend} scheduler",
                f"create it with the {self.backend} scheduler's submit_dryrun",
            )
        return request

    def _is_own_request(self, request: object) -> bool:
        """Whether :meth:`schedule` takes ``request``: by default, whether it is a
        :attr:`request_type`. Schedulers that share a request type tell theirs apart here."""
        return isinstance(request, self.request_type)

    def run_opts(self) -> runopts:
        """Returns accepted run configuration options (``anylaunch runopts <scheduler>``)."""
        opts = self._run_opts()
        from anylaunch.workspace.api import WorkspaceMixin

        if isinstance(self, WorkspaceMixin):
            opts.update(self.workspace_opts())
        opts.add(
            ARCHIVE_URL_OPT,
            type_=str,
            help="fsspec URL of the archive that keeps the app's outcome and logs after it"
            " ends (default: $ANYLAUNCH_ARCHIVE_URL, else [anylaunch] archive_url)",
        )
        return opts

    def _run_opts(self) -> runopts:
        return runopts()

    def _pre_build_validate(self, app: AppDef, scheduler: str, cfg: T) -> None:
        """Hook called before the workspace is built; override to reject configs early."""

    def _validate(self, app: AppDef, scheduler: str, cfg: T) -> None:
        """Hook called after the workspace is built. By default every role needs resources."""
        for role in app.roles:
            if role.resource.is_null():
                raise InvalidSpecError(
                    f"Role[{role.name}].resource",
                    role.resource,
                    f"the {scheduler} scheduler needs the role's resources",
                    "set resource=specs.resource(cpu=..., memMB=...) or resource(h='cpu.small')",
                )

    # --- queries --------------------------------------------------------------------------

    @abc.abstractmethod
    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Returns the app's description, or None if it no longer exists."""

    def describe_many(self, app_ids: Sequence[str]) -> dict[str, DescribeAppResponse | None]:
        """Describes several apps; backends override this to serve all of them in one call."""
        return {app_id: self.describe(app_id) for app_id in app_ids}

    def _list_entry(self, app_id: str, state: AppState, name: str, session: str) -> ListAppResponse:
        """One :meth:`list` entry; its handle names this backend and the app's ``session``."""
        return ListAppResponse(
            app_id=app_id,
            state=state,
            app_handle=make_app_handle(self.backend, session, app_id),
            name=name,
        )

    @staticmethod
    def _oldest_first(found: Iterable[tuple[float, ListAppResponse]]) -> list[ListAppResponse]:
        """:meth:`list` entries ordered by when their apps were created (``found`` pairs each
        with that time, or with a key that orders as it does)."""
        return [entry for _, entry in sorted(found, key=lambda item: item[0])]

    @abc.abstractmethod
    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """Lists apps on this scheduler (``cfg`` may be None)."""

    def exists(self, app_id: str) -> bool:
        """True if the scheduler still knows the app."""
        return self.describe(app_id) is not None

    def change_feed(self) -> ChangeFeed | None:
        """The process-wide feed of this backend's app changes, or None if it pushes none
        (drivers then poll on their interval). See :mod:`anylaunch.schedulers.common.changes`."""
        return None

    # --- control --------------------------------------------------------------------------

    def cancel(self, app_id: str) -> None:
        """Cancels the app. Idempotent: a no-op for an unknown or finished app. Does not block.

        As in TorchX, :meth:`_cancel_existing` runs only if :meth:`exists` says the app
        exists. It is also skipped once the app has ended, so a finished app never gets a
        cancel request recorded against it (see :meth:`cancel_requested`).
        """
        if type(self).exists is Scheduler.exists:
            # the default exists() is "describe() is not None": ask the backend once
            desc = self.describe(app_id)
            if desc is None:
                return
        elif not self.exists(app_id):
            return
        else:
            desc = self.describe(app_id)
        if desc is not None and is_terminal(desc.state):
            return
        self._cancel_existing(app_id)

    def cancel_requested(self, app_id: str) -> bool:
        """True once someone asked to cancel the app, even while it is still stopping: the
        backend keeps the request as a durable mark any process can read (local_cwd: a file
        in the app's directory; kubernetes: an annotation). A backend without one says False.
        """
        desc = self.describe(app_id)
        return desc is not None and desc.metadata.get(CANCEL_REQUESTED) == "true"

    @abc.abstractmethod
    def _cancel_existing(self, app_id: str) -> None:
        """Cancels a job that exists."""

    def delete(self, app_id: str) -> None:
        """Deletes the app from the scheduler's data plane, cancelling it first if it runs."""
        if self.exists(app_id):
            self._delete_existing(app_id)

    def archived(self, app_id: str) -> None:
        """The ended app's record is complete in its archive: let go of what the backend
        keeps of the app only for the archive's sake (Kubernetes: the hold on its Jobs and
        pods, which a TTL or a delete then removes). Idempotent; by default nothing."""

    def _delete_existing(self, app_id: str) -> None:
        """Removes an app that exists; by default cancels it if it still runs (a backend
        that keeps records of ended apps overrides this to remove them)."""
        self.cancel(app_id)

    #: The log streams this backend keeps apart. A backend with one interleaved log per
    #: replica (Kubernetes, AWS) sets ``(Stream.COMBINED,)``.
    log_streams: tuple[Stream, ...] = (Stream.STDOUT, Stream.STDERR, Stream.COMBINED)
    #: Whether this backend can select lines by time; without it since/until are ignored
    #: (with a warning).
    log_timestamps: bool = True

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterable[str]:
        """Returns an iterator over the log lines (each with its trailing newline) of the
        ``k``-th replica of ``role_name``. With ``should_tail`` it follows until the app ends.

        Every argument is checked here, once for every backend, before anything is read:
        the role (with a did-you-mean), the replica index, the stream (one the backend
        keeps), the regex, and ``since``/``until``. The backend supplies the app's replicas
        (:meth:`_log_replicas`) and one replica's lines (:meth:`_replica_log_lines`).

        Raises:
            UnknownAppException: the scheduler does not know the app.
            InvalidSpecError: an unknown role, a replica index out of range, a bad stream,
                regex or time window.
            NotImplementedError: the scheduler does not support log iteration.
        """
        query = _log_query(self, regex, since, until, should_tail, streams)
        replicas = self._log_replicas(app_id)
        if replicas is None:
            from anylaunch.specs.errors import UnknownAppException

            raise UnknownAppException(make_app_handle(self.backend, self.session_name, str(app_id)))
        replica = _pick_replica(app_id, replicas, role_name, k)
        lines = self._replica_log_lines(app_id, role_name, k, replica, query)
        return filter_regex(regex, lines) if regex else lines

    def _log_replicas(self, app_id: str) -> Mapping[str, Mapping[int, Any] | None] | None:
        """The app's replicas for ``log_iter``: role name -> {replica index: whatever the
        backend needs to read that replica's log}; a role maps to None when the backend cannot
        tell how many replicas it has (any index >= 0 is then accepted). None: unknown app.
        """
        raise NotImplementedError(
            f"the {self.backend} scheduler does not support log iteration; "
            "read the logs in the backend's own UI"
        )

    @staticmethod
    def _group_replicas(replicas: Iterable[Any]) -> dict[str, dict[int, Any]] | None:
        """A :meth:`_log_replicas` answer from replicas that have ``role`` and ``replica_id``
        attributes (the last of a role and index wins); None (an unknown app) for none.

        >>> from types import SimpleNamespace as R
        >>> Scheduler._group_replicas([R(role="w", replica_id=1)])["w"][1].role
        'w'
        >>> Scheduler._group_replicas([]) is None
        True
        """
        roles: dict[str, dict[int, Any]] = {}
        for replica in replicas:
            roles.setdefault(replica.role, {})[replica.replica_id] = replica
        return roles or None

    def _replica_log_lines(
        self, app_id: str, role_name: str, k: int, replica: Any, query: LogQuery
    ) -> Iterable[str]:
        """One replica's lines (each with its trailing newline), per the checked ``query``;
        ``replica`` is what :meth:`_log_replicas` returned for it (None for an unknown count).
        """
        raise NotImplementedError(
            f"the {self.backend} scheduler does not support log iteration; "
            "read the logs in the backend's own UI"
        )


def as_workspace(workspace: object) -> Workspace | None:
    """The workspace a caller passed (``submit``, ``Runner.run``): None for ``None`` or a
    blank string; a string is parsed with :meth:`Workspace.from_str`."""
    if workspace is None or isinstance(workspace, Workspace):
        return workspace
    if isinstance(workspace, str):
        return Workspace.from_str(workspace) if workspace.strip() else None
    raise InvalidSpecError(
        "workspace",
        type(workspace).__name__,
        "must be a path string, a Workspace or None",
        "pass e.g. '.' or Workspace(projects={'.': ''})",
    )


@dataclass(frozen=True)
class LogQuery:
    """The checked arguments of one ``log_iter`` call, handed to a backend's replica reader.

    ``since``/``until`` are None when the backend keeps no timestamps (they were ignored).
    """

    stream: Stream
    since: datetime | None
    until: datetime | None
    should_tail: bool


def _log_query(
    scheduler: Scheduler[Any],
    regex: object,
    since: object,
    until: object,
    should_tail: object,
    streams: object,
) -> LogQuery:
    try:
        stream = Stream.COMBINED if streams is None else Stream(streams)
    except ValueError:
        raise InvalidSpecError(
            "streams", streams, "is not a stream", "use stdout, stderr or combined"
        ) from None
    if stream not in scheduler.log_streams:
        kept = ", ".join(s.value for s in scheduler.log_streams)
        raise InvalidSpecError(
            "streams",
            stream.value,
            f"the {scheduler.backend} scheduler keeps only these log streams: {kept}",
            "pass streams=None or Stream.COMBINED",
        )
    if regex is not None:
        if not isinstance(regex, str):
            raise InvalidSpecError(
                "regex", type(regex).__name__, "must be a str", "pass a pattern, e.g. 'error'"
            )
        filter_regex(regex, [])  # a bad pattern fails now, not at the first line
    for name, value in (("since", since), ("until", until)):
        if value is not None and not isinstance(value, datetime):
            raise InvalidSpecError(
                name, value, "must be a datetime or None", "pass e.g. datetime.now()"
            )
    if isinstance(since, datetime) and isinstance(until, datetime):
        if (since.tzinfo is None) != (until.tzinfo is None):
            raise InvalidSpecError(
                "until", until, "mixes a naive and an aware datetime with since", "use one kind"
            )
        if until < since:
            raise InvalidSpecError(
                "until", until, f"is before since ({since})", "pass until >= since"
            )
    if not isinstance(should_tail, bool):
        raise InvalidSpecError("should_tail", should_tail, "must be True or False", "pass a bool")
    if not scheduler.log_timestamps and (since is not None or until is not None):
        import logging

        logging.getLogger(__name__).warning(
            "the %s scheduler's logs carry no timestamps: since/until are ignored",
            scheduler.backend,
        )
        since = until = None
    return LogQuery(stream, since, until, should_tail)  # type: ignore[arg-type]


def _pick_replica(
    app_id: str, replicas: Mapping[str, Mapping[int, Any] | None], role_name: str, k: object
) -> Any:
    if not isinstance(role_name, str) or role_name not in replicas:
        from anylaunch.specs.errors import did_you_mean

        raise InvalidSpecError(
            "role_name",
            role_name,
            f"app {app_id} has no such role.{did_you_mean(str(role_name), replicas)}",
            f"use one of: {', '.join(replicas)}",
        )
    known = replicas[role_name]
    if (
        isinstance(k, bool)
        or not isinstance(k, int)
        or k < 0
        or (known is not None and k not in known)
    ):
        n = "an unknown number of" if known is None else str(len(known))
        last = f"from 0 to {len(known) - 1}" if known else ">= 0"
        raise InvalidSpecError(
            "k",
            k,
            f"role {role_name!r} of app {app_id} has {n} replica(s)",
            f"use a replica index {last}",
        )
    return None if known is None else known[k]


def split_lines(text: str) -> list[str]:
    """Splits text into lines, keeping each line's trailing newline.

    >>> split_lines("a\\nb\\nc")
    ['a\\n', 'b\\n', 'c']
    """
    return text.splitlines(keepends=True)


def split_lines_iterator(chunks: Iterable[str]) -> Iterator[str]:
    """Re-chunks a stream of text pieces into whole lines (the last one may lack a newline).

    >>> list(split_lines_iterator(["a\\nb", "c\\n", "d"]))
    ['a\\n', 'bc\\n', 'd']
    """
    buffer = ""
    for chunk in chunks:
        buffer += chunk
        *complete, buffer = buffer.split("\n")
        for line in complete:
            yield line + "\n"
    if buffer:
        yield buffer


def filter_regex(regex: str, lines: Iterable[str]) -> Iterator[str]:
    """Yields only the lines that match ``regex`` (searched anywhere in the line).

    >>> list(filter_regex("err", ["ok\\n", "error: x\\n"]))
    ['error: x\\n']
    """
    try:
        pattern = re.compile(regex)
    except re.error as e:
        raise InvalidSpecError(
            "regex", regex, f"not a valid regular expression ({e})", "fix the pattern"
        ) from None
    return (line for line in lines if pattern.search(line))
