"""How the states of an app's replicas add up to the app's state: one rule for every backend.

Backends map their own facts to a state per replica; :func:`aggregate_replica_states` gives
the app's, and :func:`role_statuses` groups the replicas' statuses by role.
"""

from __future__ import annotations

from collections.abc import Iterable

from anylaunch.specs.api import AppState, ReplicaStatus, RoleStatus

__all__ = ["aggregate_replica_states", "role_statuses"]

#: Replica states in the order they decide an app's state (see aggregate_replica_states).
_BEFORE_START = (AppState.PENDING, AppState.SUBMITTED, AppState.UNSUBMITTED)


def aggregate_replica_states(states: Iterable[AppState]) -> AppState:
    """The state of an app from the states of its replicas (after the backend applied its
    retries), with one answer for every input:

    1. no replicas: UNKNOWN
    2. any FAILED: FAILED (a gang app fails when one replica fails for good)
    3. any CANCELLED: CANCELLED
    4. all SUCCEEDED: SUCCEEDED
    5. any RUNNING, or some SUCCEEDED and the rest not finished: RUNNING (started, not done)
    6. otherwise the most advanced of PENDING, SUBMITTED, UNSUBMITTED present
    7. otherwise (only UNKNOWN): UNKNOWN

    An UNKNOWN replica next to known ones does not hide what the others say.

    >>> S = AppState
    >>> aggregate_replica_states([S.UNKNOWN, S.RUNNING]).name
    'RUNNING'
    >>> aggregate_replica_states([S.SUCCEEDED, S.PENDING]).name
    'RUNNING'
    >>> aggregate_replica_states([S.RUNNING, S.FAILED, S.CANCELLED]).name
    'FAILED'
    >>> aggregate_replica_states([S.UNKNOWN, S.PENDING]).name, aggregate_replica_states([]).name
    ('PENDING', 'UNKNOWN')
    """
    present = set(states)
    if not present:
        return AppState.UNKNOWN
    if AppState.FAILED in present:
        return AppState.FAILED
    if AppState.CANCELLED in present:
        return AppState.CANCELLED
    if present == {AppState.SUCCEEDED}:
        return AppState.SUCCEEDED
    if AppState.RUNNING in present or AppState.SUCCEEDED in present:
        return AppState.RUNNING
    for state in _BEFORE_START:
        if state in present:
            return state
    return AppState.UNKNOWN


def role_statuses(replicas: Iterable[ReplicaStatus]) -> list[RoleStatus]:
    """The replicas' statuses grouped by role, each role where its first replica comes.

    >>> up = AppState.RUNNING
    >>> statuses = role_statuses([ReplicaStatus(0, up, "a", "h"), ReplicaStatus(0, up, "b", "h"),
    ...                           ReplicaStatus(1, up, "a", "h")])
    >>> [(s.role, [r.id for r in s.replicas]) for s in statuses]
    [('a', [0, 1]), ('b', [0])]
    """
    by_role: dict[str, list[ReplicaStatus]] = {}
    for replica in replicas:
        by_role.setdefault(replica.role, []).append(replica)
    return [RoleStatus(role, reps) for role, reps in by_role.items()]
