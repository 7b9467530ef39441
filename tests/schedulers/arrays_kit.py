"""The array scenario every backend runs (issue 28): 20 indices, at most 4 at once, index 7
exits 1. The app ends FAILED with 19/20 succeeded and index 7 named; a retry reruns only
index 7."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anylaunch.specs as specs
from anylaunch.specs import AppState, AppStatus

SIZE = 20
PARALLELISM = 4
FAILING_INDEX = 7

#: each index prints its index and its sweep-free macro form, then index 7 fails
INDEX_SCRIPT = (
    'echo "index=$ANYLAUNCH_ARRAY_INDEX of=$ANYLAUNCH_ARRAY_SIZE arg=$1"; '
    f'[ "$ANYLAUNCH_ARRAY_INDEX" != {FAILING_INDEX} ] || exit 1'
)


def failing_array_app(
    image: str,
    *,
    entrypoint: str = "sh",
    resource: specs.Resource | None = None,
    role_kwargs: Mapping[str, Any] | None = None,
    size: int = SIZE,
    parallelism: int | None = PARALLELISM,
) -> specs.AppDef:
    """The scenario's app: ``sh -c INDEX_SCRIPT shard-${array_index}``."""
    role = specs.Role(
        name="shard",
        image=image,
        entrypoint=entrypoint,
        args=["-c", INDEX_SCRIPT, "sh", "shard-${array_index}"],
        resource=resource if resource is not None else specs.Resource(cpu=1, gpu=0, memMB=64),
        **dict(role_kwargs or {}),
    )
    return specs.AppDef("arr", [role], array=specs.ArraySpec(size, parallelism=parallelism))


def check_failed_array(status: AppStatus | None, size: int = SIZE) -> None:
    """The end status of the scenario: FAILED, 19/20 succeeded, index 7 named with exit 1."""
    assert status is not None
    assert status.state == AppState.FAILED, status
    assert status.array is not None, status
    assert status.array.failed() == [FAILING_INDEX], status.array.to_dict()
    assert len(status.array.in_state(AppState.SUCCEEDED)) == size - 1, status.array.to_dict()
    assert f"{size - 1}/{size} succeeded" in status.msg, status.msg
    assert f"failed indices: {FAILING_INDEX}" in status.msg, status.msg
    replicas = {r.id: r.state for r in status.roles[0].replicas}
    assert replicas[FAILING_INDEX] == AppState.FAILED
    assert sorted(replicas) == list(range(size))


def check_retried(status: AppStatus | None) -> None:
    """The end status of the retry: only index 7 ran (and failed again, by the script)."""
    assert status is not None
    assert status.array is not None, status
    assert status.array.indices() == (FAILING_INDEX,), status.array.to_dict()
    assert status.array.failed() == [FAILING_INDEX]
    assert status.state == AppState.FAILED
    assert [r.id for r in status.roles[0].replicas] == [FAILING_INDEX]
