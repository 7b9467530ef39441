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
from typing import Any, Generic, Protocol, TypeVar

from anylaunch.specs.api import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    Role,
    RoleStatus,
    Workspace,
    is_terminal,
)
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.runopts import CfgVal, runopts
from anylaunch.specs.structured_opts import StructuredOpts

__all__ = [
    "DescribeAppResponse",
    "ListAppResponse",
    "Scheduler",
    "SchedulerFactory",
    "Stream",
    "StructuredOpts",
    "filter_regex",
    "split_lines",
    "split_lines_iterator",
]

T = TypeVar("T")


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


@dataclass
class ListAppResponse:
    """Response from ``Scheduler.list()`` / ``Runner.list()``."""

    app_id: str
    state: AppState
    app_handle: str = "<NOT_SET>"
    name: str = ""


class Scheduler(abc.ABC, Generic[T]):
    """Abstract base class for job schedulers.

    Implementors override the abstract methods; see :class:`StructuredOpts` for typed config.
    ``backend`` names the scheduler in app handles (``{backend}://{session_name}/{app_id}``).
    """

    def __init__(self, backend: str, session_name: str) -> None:
        self.backend = backend
        self.session_name = session_name

    def close(self) -> None:
        """Releases local resources. Safe to call multiple times."""

    # --- submission ---------------------------------------------------------------------

    def submit(self, app: AppDef, cfg: T, workspace: str | Workspace | None = None) -> str:
        """Submits an app directly (dryrun then schedule). Prefer ``Runner.run``."""
        if workspace is not None:
            from anylaunch.workspace.api import WorkspaceMixin

            if isinstance(self, WorkspaceMixin) and app.roles:
                role = app.roles[0]
                ws = (
                    workspace if isinstance(workspace, Workspace) else Workspace.from_str(workspace)
                )
                self.build_workspace_and_update_role(role, ws, self.run_opts().resolve(cfg))  # type: ignore[arg-type]
        return self.schedule(self.submit_dryrun(app, cfg))

    def submit_dryrun(self, app: AppDef, cfg: T) -> AppDryRunInfo[object]:
        """Returns the scheduler request without submitting.

        Validates the app, resolves ``cfg`` against :meth:`run_opts` (unknown keys, missing
        required options and wrong types raise InvalidRunConfigException), calls
        ``_submit_dryrun`` and then each role's ``pre_proc`` in order.
        """
        app.validate()
        resolved = self.run_opts().resolve(cfg if cfg is not None else {})  # type: ignore[arg-type]
        dryrun_info = self._submit_dryrun(app, resolved)  # type: ignore[arg-type]
        for role in app.roles:
            dryrun_info = role.pre_proc(self.backend, dryrun_info)
        dryrun_info._app = app
        dryrun_info._cfg = resolved
        dryrun_info._scheduler = self.backend
        return dryrun_info

    @abc.abstractmethod
    def _submit_dryrun(self, app: AppDef, cfg: T) -> AppDryRunInfo[object]:
        """Translates the app and resolved cfg into the native request (no submission)."""

    @abc.abstractmethod
    def schedule(self, dryrun_info: AppDryRunInfo[object]) -> str:
        """Submits a previously dry-run request. Returns the app_id."""

    def run_opts(self) -> runopts:
        """Returns accepted run configuration options (``anylaunch runopts <scheduler>``)."""
        opts = self._run_opts()
        from anylaunch.workspace.api import WorkspaceMixin

        if isinstance(self, WorkspaceMixin):
            opts.update(self.workspace_opts())
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

    @abc.abstractmethod
    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """Lists apps on this scheduler (``cfg`` may be None)."""

    def exists(self, app_id: str) -> bool:
        """True if the scheduler still knows the app."""
        return self.describe(app_id) is not None

    # --- control --------------------------------------------------------------------------

    def cancel(self, app_id: str) -> None:
        """Cancels the app. Idempotent: a no-op for an unknown or finished app. Does not block."""
        desc = self.describe(app_id)
        if desc is None or is_terminal(desc.state):
            return
        self._cancel_existing(app_id)

    @abc.abstractmethod
    def _cancel_existing(self, app_id: str) -> None:
        """Cancels a job that exists."""

    def delete(self, app_id: str) -> None:
        """Deletes the app from the scheduler's data plane, cancelling it first if it runs."""
        if self.exists(app_id):
            self._delete_existing(app_id)

    def _delete_existing(self, app_id: str) -> None:
        self._cancel_existing(app_id)

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

        Raises:
            NotImplementedError: the scheduler does not support log iteration.
        """
        raise NotImplementedError(
            f"the {self.backend} scheduler does not support log iteration; "
            "read the logs in the backend's own UI"
        )


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
