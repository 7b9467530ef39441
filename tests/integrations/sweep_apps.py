"""The sweep every engine runs end to end: 5 indices, 2 at once, index 3 exits 1. Each index
prints ``shard=<its parameter> index=<i>``, so a test can find every index's line in the
engine's log."""

import sys

from anylaunch.specs import AppDef, Role, sweep

SHARDS = ["a", "b", "c", "d", "e"]
FAILING_INDEX = 3
#: Python source each index runs (its sweep parameter comes in as an argument)
CODE = (
    "import os, sys; i = int(os.environ['ANYLAUNCH_ARRAY_INDEX']);"
    " print(f'shard={sys.argv[1]} index={i}', flush=True);"
    f" sys.exit(1 if i == {FAILING_INDEX} else 0)"
)


def failing_sweep(name: str, min_success_ratio: float) -> AppDef:
    """The 5-index sweep over ``SHARDS`` whose index 3 fails."""
    role = Role("w", image=".", entrypoint=sys.executable, args=["-c", CODE, "${param.shard}"])
    params = [{"shard": s} for s in SHARDS]
    return sweep(AppDef(name, [role]), params, parallelism=2, min_success_ratio=min_success_ratio)


def expected_indices() -> dict:
    """What a sweep's per-index results hold: ``index -> {state, exit_code}``."""
    return {
        i: {"state": "FAILED", "exit_code": 1}
        if i == FAILING_INDEX
        else {"state": "SUCCEEDED", "exit_code": 0}
        for i in range(len(SHARDS))
    }
