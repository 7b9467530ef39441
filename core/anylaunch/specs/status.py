"""States and statuses of apps, roles and replicas."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from anylaunch.specs.errors import (
    AnylaunchError,
    InvalidSpecError,
)

if TYPE_CHECKING:
    pass
from anylaunch.specs.markers import NONE

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
    """The status of one replica of a role."""

    id: int
    state: AppState
    role: str
    hostname: str
    structured_error_msg: str = NONE

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
    anylaunch.specs.status.AppStatusError: app ended FAILED: replica trainer/0 exited 1
    """

    state: AppState
    num_restarts: int = 0
    msg: str = ""
    structured_error_msg: str = NONE
    ui_url: str | None = None
    roles: list[RoleStatus] = field(default_factory=list)

    def is_terminal(self) -> bool:
        """True once the app has SUCCEEDED, FAILED or been CANCELLED."""
        return is_terminal(self.state)

    def raise_for_status(self) -> None:
        """Raises :class:`AppStatusError` if the state is not SUCCEEDED."""
        if self.state != AppState.SUCCEEDED:
            raise AppStatusError(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (states by name), e.g. for XCom or a task result."""
        return {
            "state": self.state.name,
            "num_restarts": self.num_restarts,
            "msg": self.msg,
            "structured_error_msg": self.structured_error_msg,
            "ui_url": self.ui_url,
            "roles": [r.to_dict() for r in self.roles],
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
                        )
                        for rep in r.get("replicas", [])
                    ],
                )
                for r in data.get("roles", [])
            ],
        )

    def to_json(self) -> str:
        """The status as a JSON document."""
        import json

        return json.dumps(self.to_dict(), indent=2)

    def to_yaml(self) -> str:
        """The status as a YAML document."""
        import yaml

        return str(yaml.safe_dump({"AppStatus": self.to_dict()}, sort_keys=False))

    def format(self, filter_roles: list[str] | None = None) -> str:
        """Human-readable status, optionally only for the roles in ``filter_roles``.

        >>> print(AppStatus(AppState.RUNNING, roles=[RoleStatus("trainer", [
        ...     ReplicaStatus(0, AppState.RUNNING, "trainer", "localhost")])]).format())
        AppStatus:
          State: RUNNING
          Num Restarts: 0
          Roles:
            trainer:
              0: RUNNING on localhost
          Msg:
          Structured Error Msg: <NONE>
          UI URL: None
        """
        lines = [
            "AppStatus:",
            f"  State: {self.state.name}",
            f"  Num Restarts: {self.num_restarts}",
            "  Roles:",
        ]
        for role_status in self.roles:
            if filter_roles and role_status.role not in filter_roles:
                continue
            lines.append(f"    {role_status.role}:")
            for rep in role_status.replicas:
                where = f" on {rep.hostname}" if rep.hostname else ""
                err = "" if rep.structured_error_msg == NONE else f" ({rep.structured_error_msg})"
                lines.append(f"      {rep.id}: {rep.state.name}{where}{err}")
        lines += [
            f"  Msg: {self.msg}".rstrip(),
            f"  Structured Error Msg: {self.structured_error_msg}",
            f"  UI URL: {self.ui_url}",
        ]
        return "\n".join(lines)


class AppStatusError(AnylaunchError):
    """Raised by :meth:`AppStatus.raise_for_status` when an app did not succeed."""

    def __init__(self, app_status: AppStatus, *args: object) -> None:
        self.app_status = app_status
        detail = f": {app_status.msg}" if app_status.msg else ""
        super().__init__(f"app ended {app_status.state.name}{detail}", *args)
