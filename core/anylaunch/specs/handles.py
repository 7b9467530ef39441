"""Dryrun info (the request a scheduler would submit) and app handles."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

from anylaunch.specs.checks import check_type
from anylaunch.specs.errors import (
    MalformedAppHandleException,
)
from anylaunch.specs.runopts import CfgVal

if TYPE_CHECKING:
    from anylaunch.specs.api import AppDef

# ---------------------------------------------------------------------------------------------
# Dryrun info and handles
# ---------------------------------------------------------------------------------------------

T = TypeVar("T")


class AppDryRunInfo(Generic[T]):
    """The scheduler request that would be submitted; ``print(info)`` shows it readably.

    ``app`` and ``cfg`` are the app and the resolved run config the request was built from;
    ``Scheduler.submit_dryrun`` (and ``Runner.dryrun``) set them.

    >>> info = AppDryRunInfo({"cmd": ["echo", "hi"]}, lambda r: f"would run {r['cmd']}")
    >>> print(info)
    would run ['echo', 'hi']
    >>> info.app, dict(info.cfg)  # not set by a scheduler yet
    (None, {})
    """

    def __init__(self, request: T, fmt: Callable[[T], str]) -> None:
        self.request = request
        self._fmt = fmt
        # set by the scheduler/runner so that schedule() can route and build the handle
        self._app: AppDef | None = None
        self._cfg: Mapping[str, CfgVal] = {}
        self._scheduler: str | None = None

    @property
    def app(self) -> AppDef | None:
        """The app this request was built from (None until a scheduler's dryrun sets it)."""
        return self._app

    @property
    def cfg(self) -> Mapping[str, CfgVal]:
        """The resolved run config of this request, read-only (empty until a dryrun sets it).

        >>> info = AppDryRunInfo("req", str)
        >>> info._cfg = {"queue": "gpu"}
        >>> info.cfg["queue"]
        'gpu'
        >>> info.cfg["queue"] = "cpu"
        Traceback (most recent call last):
        ...
        TypeError: 'mappingproxy' object does not support item assignment
        """
        import types

        return types.MappingProxyType(dict(self._cfg or {}))

    def __repr__(self) -> str:
        return self._fmt(self.request)

    __str__ = __repr__


#: An app handle: ``{scheduler}://{session_name}/{app_id}``.
AppHandle = str

_HANDLE = re.compile(r"^(?P<scheduler>[A-Za-z0-9_.-]+)://(?P<session>[^/]*)/(?P<app_id>[^/\s]+)$")


class ParsedAppHandle(NamedTuple):
    """Parsed components of an AppHandle."""

    scheduler_backend: str
    session_name: str
    app_id: str


def parse_app_handle(app_handle: AppHandle) -> ParsedAppHandle:
    """Parses ``{scheduler}://{session_name}/{app_id}`` into its components.

    >>> parse_app_handle("k8s://default/foo_bar")
    ParsedAppHandle(scheduler_backend='k8s', session_name='default', app_id='foo_bar')
    >>> parse_app_handle("k8s:///foo_bar")
    ParsedAppHandle(scheduler_backend='k8s', session_name='', app_id='foo_bar')
    """
    match = _HANDLE.fullmatch(app_handle) if isinstance(app_handle, str) else None
    if match is None:
        raise MalformedAppHandleException(str(app_handle))
    return ParsedAppHandle(match["scheduler"], match["session"], match["app_id"])


def make_app_handle(scheduler_backend: str, session_name: str, app_id: str) -> AppHandle:
    """Builds an app handle.

    >>> make_app_handle("local_cwd", "default", "echo-1a2b")
    'local_cwd://default/echo-1a2b'
    """
    parts = {"scheduler": scheduler_backend, "session_name": session_name, "app_id": app_id}
    for name, part in parts.items():
        fix = "pass the scheduler, session and app id of a launched app, e.g. 'local_cwd'"
        check_type(name, part, str, "must be a non-empty str", fix, nonempty=True)
    handle = f"{scheduler_backend}://{session_name}/{app_id}"
    parse_app_handle(handle)  # reject ids that would not parse back
    return handle


#: The scheduler part of a placed app's stable handle (``Runner.run(app, placement=...)``).
PLACEMENT_SCHEME = "placement"


def is_placed(app_handle: AppHandle) -> bool:
    """True for a placed app's stable handle.

    >>> is_placed("placement://s/train-1a2b3c4d"), is_placed("slurm://s/123")
    (True, False)
    """
    return isinstance(app_handle, str) and app_handle.startswith(f"{PLACEMENT_SCHEME}://")
