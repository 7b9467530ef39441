"""States and statuses of apps, roles and replicas.

How a status reads (``format()``, ``repr()``) lives in :mod:`anylaunch.specs.status_format`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from anylaunch.specs.errors import (
    AnylaunchError,
    InvalidSpecError,
)
from anylaunch.specs.markers import NONE

if TYPE_CHECKING:
    from anylaunch.specs.array_status import ArrayStatus
    from anylaunch.specs.placement_status import PlacementHistory

# ---------------------------------------------------------------------------------------------
# States and statuses
# ---------------------------------------------------------------------------------------------


class AppState(IntEnum):
    """State of an application (or of one replica: :data:`ReplicaState`).

    UNSUBMITTED → SUBMITTED → PENDING → RUNNING → SUCCEEDED | FAILED | CANCELLED; UNKNOWN when
    the scheduler cannot tell. A preempted app may move from RUNNING back to PENDING.

    >>> AppState.SUCCEEDED.is_terminal(), AppState.RUNNING.is_terminal()
    (True, False)
    """

    UNSUBMITTED = 0
    SUBMITTED = 1
    PENDING = 2
    RUNNING = 3
    SUCCEEDED = 4
    FAILED = 5
    CANCELLED = 6
    UNKNOWN = 7

    def __str__(self) -> str:
        return self.name

    def is_terminal(self) -> bool:
        """True for SUCCEEDED, FAILED and CANCELLED."""
        return self in _TERMINAL_STATES


_TERMINAL_STATES = frozenset({AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED})

#: The state of one replica uses the same values as the state of an app.
ReplicaState = AppState


def is_terminal(state: AppState) -> bool:
    """True if ``state`` is SUCCEEDED, FAILED or CANCELLED.

    >>> is_terminal(AppState.FAILED)
    True
    """
    return state in _TERMINAL_STATES


_STARTED_STATES = _TERMINAL_STATES | {AppState.RUNNING}


def is_started(state: AppState) -> bool:
    """True once an app has started: RUNNING, or one of the terminal states (TorchX's
    ``torchx.specs.api.is_started``).

    >>> is_started(AppState.RUNNING), is_started(AppState.SUCCEEDED), is_started(AppState.PENDING)
    (True, True, False)
    """
    return state in _STARTED_STATES


def _state_from(value: object, field: str = "state") -> AppState:
    if isinstance(value, AppState):
        return value
    if isinstance(value, str) and value.upper() in AppState.__members__:
        return AppState[value.upper()]
    if isinstance(value, int) and not isinstance(value, bool) and value in set(AppState):
        return AppState(value)
    raise InvalidSpecError(
        field,
        value,
        "is not an AppState",
        f"use one of {', '.join(s.name for s in AppState)}",
    )


@dataclass
class ReplicaStatus:
    """The status of one replica of a role.

    Args:
        id: the replica's index in its role (its node rank, not a worker rank)
        state: its state
        role: the name of its role
        hostname: the host it runs on
        structured_error_msg: its reply file when it failed (see
            :func:`~anylaunch.specs.status_format.parse_error_reply`), else ``<NONE>``
        hostaddr: the DNS name or IP of its container; defaults to ``hostname``

    >>> ReplicaStatus(0, AppState.RUNNING, "trainer", "node-0").hostaddr
    'node-0'
    """

    id: int
    state: AppState
    role: str
    hostname: str
    structured_error_msg: str = NONE
    hostaddr: str | None = None

    def __post_init__(self) -> None:
        if self.hostaddr is None:
            self.hostaddr = self.hostname

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (the state by name)."""
        return {**asdict(self), "state": self.state.name}


@dataclass
class RoleStatus:
    """The statuses of the replicas of one role."""

    role: str
    replicas: list[ReplicaStatus] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {"role": self.role, "replicas": [r.to_dict() for r in self.replicas]}

    def to_json(self) -> dict[str, Any]:
        """TorchX's form: each replica's fields as they are (its state an :class:`AppState`,
        which ``json.dumps`` writes as its value).

        >>> RoleStatus("w", [ReplicaStatus(0, AppState.FAILED, "w", "h")]).to_json()
        {'role': 'w', 'replicas': [{'id': 0, 'state': <AppState.FAILED: 5>, 'role': 'w',
          'hostname': 'h', 'structured_error_msg': '<NONE>', 'hostaddr': 'h'}]}
        """
        return {"role": self.role, "replicas": [asdict(r) for r in self.replicas]}


@dataclass
class AppStatus:
    """Runtime status of an AppDef (roles hold the replica statuses of the latest attempt).

    >>> status = AppStatus(AppState.FAILED, msg="replica trainer/0 exited 1")
    >>> status.to_dict()["state"]
    'FAILED'
    >>> AppStatus.from_dict(status.to_dict()) == status
    True
    >>> status.raise_for_status()
    Traceback (most recent call last):
    ...
    anylaunch.specs.status.AppStatusError: job did not succeed: AppStatus:
      msg: replica trainer/0 exited 1
    ...
    """

    state: AppState
    num_restarts: int = 0
    msg: str = ""
    structured_error_msg: str = NONE
    ui_url: str | None = None
    roles: list[RoleStatus] = field(default_factory=list)
    array: ArrayStatus | None = None
    placement: PlacementHistory | None = None

    def is_terminal(self) -> bool:
        """True once the app has SUCCEEDED, FAILED or been CANCELLED."""
        return is_terminal(self.state)

    def raise_for_status(self) -> None:
        """Raises :class:`AppStatusError` if the state is not SUCCEEDED; its message is
        ``job did not succeed:`` followed by this status's ``repr()``."""
        if self.state != AppState.SUCCEEDED:
            raise AppStatusError(self, f"job did not succeed: {self!r}")

    def __repr__(self) -> str:
        """The status as TorchX shows it: a YAML block under ``AppStatus`` (keys sorted,
        states as ``NAME (value)``, the app's structured error parsed when it is JSON).

        >>> print(repr(AppStatus(AppState.RUNNING, ui_url="http://ui/app")))
        AppStatus:
          msg: ''
          num_restarts: 0
          roles: []
          state: RUNNING (3)
          structured_error_msg: <NONE>
          ui_url: http://ui/app
        <BLANKLINE>
        """
        from anylaunch.specs.status_format import status_yaml

        return status_yaml(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (states by name), e.g. for XCom or a task result."""
        return {
            "state": self.state.name,
            "num_restarts": self.num_restarts,
            "msg": self.msg,
            "structured_error_msg": self.structured_error_msg,
            "ui_url": self.ui_url,
            "roles": [r.to_dict() for r in self.roles],
            **({"array": self.array.to_dict()} if self.array is not None else {}),
            **({"placement": self.placement.to_dict()} if self.placement is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AppStatus:
        """Inverse of :meth:`to_dict`.

        Raises:
            InvalidSpecError: ``data`` is not the form :meth:`to_dict` writes (naming the key).

        >>> AppStatus.from_dict({"state": "BOGUS"})
        Traceback (most recent call last):
        ...
        anylaunch.specs.errors.InvalidSpecError: state='BOGUS' is invalid: is not an AppState. Fix: use one of UNSUBMITTED, SUBMITTED, PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, UNKNOWN
        """
        if not isinstance(data, Mapping) or "state" not in data:
            raise InvalidSpecError(
                "data",
                type(data).__name__,
                "must be a mapping with at least a 'state' key",
                "pass what AppStatus.to_dict() returned",
            )
        try:
            return cls._from_dict(data)
        except InvalidSpecError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InvalidSpecError(
                "data",
                type(data).__name__,
                f"is not an AppStatus dict ({type(e).__name__}: {e})",
                "pass what AppStatus.to_dict() returned",
            ) from None

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any]) -> AppStatus:
        from anylaunch.specs.array_status import ArrayStatus
        from anylaunch.specs.placement_status import PlacementHistory

        array = data.get("array")
        placement = data.get("placement")
        return cls(
            state=_state_from(data["state"]),
            num_restarts=int(data.get("num_restarts", 0)),
            msg=str(data.get("msg", "")),
            structured_error_msg=str(data.get("structured_error_msg", NONE)),
            ui_url=data.get("ui_url"),
            roles=[
                RoleStatus(
                    role=r["role"],
                    replicas=[
                        ReplicaStatus(
                            id=int(rep["id"]),
                            state=_state_from(rep["state"], "roles[].replicas[].state"),
                            role=rep["role"],
                            hostname=rep.get("hostname", ""),
                            structured_error_msg=rep.get("structured_error_msg", NONE),
                            hostaddr=rep.get("hostaddr"),
                        )
                        for rep in r.get("replicas", [])
                    ],
                )
                for r in data.get("roles", [])
            ],
            array=ArrayStatus.from_dict(array) if array is not None else None,
            placement=PlacementHistory.from_dict(placement) if placement is not None else None,
        )

    def to_json(self, filter_roles: Iterable[str] | None = None) -> dict[str, Any]:
        """TorchX's JSON-friendly form, optionally only for the roles in ``filter_roles``:
        ``state`` by name, ``url`` for the UI link and each replica's fields as they are
        (its state an :class:`AppState`, which ``json.dumps`` writes as its value). For a
        form that :meth:`from_dict` reads back, use :meth:`to_dict`.

        >>> status = AppStatus(AppState.FAILED, roles=[RoleStatus("w"), RoleStatus("ps")])
        >>> status.to_json(filter_roles=["ps"])
        {'state': 'FAILED', 'num_restarts': 0, 'roles': [{'role': 'ps', 'replicas': []}],
         'msg': '', 'structured_error_msg': '<NONE>', 'url': None}
        """
        from anylaunch.specs.status_format import select_roles, state_name

        return {
            "state": state_name(self.state),
            "num_restarts": self.num_restarts,
            "roles": [r.to_json() for r in select_roles(self.roles, filter_roles)],
            "msg": self.msg,
            "structured_error_msg": self.structured_error_msg,
            "url": self.ui_url,
        }

    def to_yaml(self) -> str:
        """The status as a YAML document (the :meth:`to_dict` form)."""
        import yaml

        return str(yaml.safe_dump({"AppStatus": self.to_dict()}, sort_keys=False))

    def format(
        self,
        filter_roles: Iterable[str] | None = None,
        *,
        redact: Callable[[str], str] | None = None,
    ) -> str:
        """Human-readable status, optionally only for the roles in ``filter_roles``: one line
        per replica (replica 0 of each role starred), and for a replica with a reply file its
        exit code, time, host and error message (``<N/A>`` for what it lacks; the message
        broken at the first space after 80 characters).

        Args:
            filter_roles: the roles to show (all when None or empty)
            redact: masks secrets in the messages before they are laid out, e.g. a
                :class:`~anylaunch.specs.secrets.Redactor`

        The layout of a failed replica's reply file is shown in
        :mod:`anylaunch.specs.status_format`; here only the ``ps`` role is shown:

        >>> print(AppStatus(AppState.RUNNING, roles=[
        ...     RoleStatus("trainer", [ReplicaStatus(0, AppState.RUNNING, "trainer", "node-0")]),
        ...     RoleStatus("ps", [ReplicaStatus(0, AppState.PENDING, "ps", "node-1")]),
        ... ]).format(filter_roles=["ps"]))
        AppStatus:
            State: RUNNING
            Num Restarts: 0
            Roles:
         *ps[0]:PENDING
            Msg:
            Structured Error Msg: <NONE>
            UI URL: None
        """
        from anylaunch.specs.status_format import format_status

        return format_status(self, filter_roles, redact)


class AppStatusError(AnylaunchError):
    """Raised by :meth:`AppStatus.raise_for_status` when an app did not succeed.

    Args:
        status: the status of the app (also the attribute ``status``)
        args: the exception's arguments (default: ``job did not succeed:`` and the status)

    >>> err = AppStatusError(AppStatus(AppState.CANCELLED))
    >>> err.status.state, str(err).splitlines()[0]
    (<AppState.CANCELLED: 6>, 'job did not succeed: AppStatus:')
    """

    def __init__(self, status: AppStatus, *args: object) -> None:
        super().__init__(*(args or (f"job did not succeed: {status!r}",)))
        self.status = status

    @property
    def app_status(self) -> AppStatus:
        """The same as :attr:`status` (the name anylaunch used first)."""
        return self.status

    def __reduce__(self) -> tuple[Any, ...]:
        # pickles (e.g. across a process pool or an engine's result store) keep the status
        return (type(self), (self.status, *self.args))
