"""The status of an array app: each index's state and exit code, in a compact form.

An array's app state follows from its indices' by one rule (:meth:`ArrayStatus.app_state`):
RUNNING while any index is not done (PENDING before the first starts), then SUCCEEDED when at
least ``min_success_ratio`` of the selected indices succeeded, else FAILED (CANCELLED when
indices were cancelled and none failed). Index sets travel as Slurm-style ranges
(``"0-6,8-19"``), so a 100,000-index status stays a few lines of JSON.

>>> from anylaunch.specs.status import AppState
>>> status = ArrayStatus(20, {i: AppState.SUCCEEDED for i in range(20) if i != 7})
>>> status.states[7] = AppState.FAILED
>>> status.exit_codes[7] = 1
>>> status.app_state(), status.summary()
(<AppState.FAILED: 5>, 'array: 19/20 succeeded (20 required); failed indices: 7 (exit 1)')
>>> ArrayStatus.from_dict(status.to_dict()) == status
True
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.status import AppState, is_terminal

#: how many failed indices a summary names before it says "and N more"
NAMED_FAILURES = 20

_NOT_STARTED = (AppState.UNSUBMITTED, AppState.SUBMITTED, AppState.PENDING)


def index_ranges(indices: Iterable[int]) -> str:
    """Compresses indices to Slurm's range form.

    >>> index_ranges([0, 1, 2, 3, 7, 9, 10])
    '0-3,7,9-10'
    >>> index_ranges([])
    ''
    """
    ordered = sorted(set(indices))
    parts: list[str] = []
    start = prev = None
    for i in [*ordered, None]:
        if start is not None and (i is None or i != prev + 1):  # type: ignore[operator]
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if i is not None and start is None:
            start = i
        prev = i
    return ",".join(parts)


def parse_index_ranges(text: str, field_name: str = "indices") -> list[int]:
    """Inverse of :func:`index_ranges` (also reads Slurm's ``%K`` suffix and ``[..]``).

    >>> parse_index_ranges("0-3,7,9-10")
    [0, 1, 2, 3, 7, 9, 10]
    >>> parse_index_ranges("[3,17-18%4]")
    [3, 17, 18]
    >>> parse_index_ranges("a-b")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: indices='a-b' is invalid: is not a list of index ranges. Fix: write indices as e.g. 0-6,8,10-19
    """
    body = text.strip().strip("[]").split("%", 1)[0]
    found: list[int] = []
    try:
        for part in filter(None, body.split(",")):
            low, _, high = part.partition("-")
            first, last = int(low), int(high or low)
            if first < 0 or last < first:
                raise ValueError(part)
            found.extend(range(first, last + 1))
    except ValueError:
        raise InvalidSpecError(
            field_name, text, "is not a list of index ranges", "write indices as e.g. 0-6,8,10-19"
        ) from None
    return found


@dataclass
class ArrayStatus:
    """Per-index states and exit codes of an array app.

    Args:
        size: the array's size
        states: each known index's state; an index missing here is PENDING
        exit_codes: the exit codes known (failed indices at least, where the backend says)
        min_success_ratio: the share of the selected indices that must succeed
        selected: the indices this submission runs (a retry's); None: all of them
    """

    size: int
    states: dict[int, AppState] = field(default_factory=dict)
    exit_codes: dict[int, int] = field(default_factory=dict)
    min_success_ratio: float = 1.0
    selected: tuple[int, ...] | None = None

    def indices(self) -> tuple[int, ...]:
        """The indices this submission runs, ascending."""
        return self.selected if self.selected is not None else tuple(range(self.size))

    def state_of(self, index: int) -> AppState:
        """One index's state (PENDING until the backend reports it)."""
        return self.states.get(index, AppState.PENDING)

    def in_state(self, *states: AppState) -> list[int]:
        """The selected indices in any of ``states``, ascending."""
        return [i for i in self.indices() if self.state_of(i) in states]

    def counts(self) -> dict[str, int]:
        """How many selected indices are in each state, by state name (non-zero only).

        >>> ArrayStatus(3, {0: AppState.RUNNING}).counts()
        {'PENDING': 2, 'RUNNING': 1}
        """
        found: dict[str, int] = {}
        for i in self.indices():
            name = self.state_of(i).name
            found[name] = found.get(name, 0) + 1
        return dict(sorted(found.items(), key=lambda kv: AppState[kv[0]].value))

    def failed(self) -> list[int]:
        """The selected indices that FAILED or were CANCELLED (what a retry reruns)."""
        return self.in_state(AppState.FAILED, AppState.CANCELLED)

    def required(self) -> int:
        """How many selected indices must succeed."""
        return max(1, math.ceil(len(self.indices()) * self.min_success_ratio - 1e-9))

    def app_state(self) -> AppState:
        """The app's state by the array rule (see the module docstring)."""
        picked = self.indices()
        states = [self.state_of(i) for i in picked]
        if not all(is_terminal(s) for s in states):
            if all(s in _NOT_STARTED for s in states):
                return min(states, key=lambda s: s.value)
            return AppState.RUNNING
        succeeded = sum(s == AppState.SUCCEEDED for s in states)
        if succeeded >= self.required():
            return AppState.SUCCEEDED
        if AppState.FAILED not in states and AppState.CANCELLED in states:
            return AppState.CANCELLED
        return AppState.FAILED

    def summary(self) -> str:
        """One line for people: progress while running, the failed indices at the end.

        >>> ArrayStatus(4, {0: AppState.SUCCEEDED, 1: AppState.RUNNING}).summary()
        'array: 1/4 succeeded, 1 running, 2 pending'
        """
        picked = self.indices()
        succeeded = len(self.in_state(AppState.SUCCEEDED))
        text = f"array: {succeeded}/{len(picked)} succeeded"
        if not self.app_state().is_terminal():
            failed = len(self.failed())
            running = len(self.in_state(AppState.RUNNING))
            pending = len(picked) - succeeded - failed - running
            for count, word in ((failed, "failed"), (running, "running"), (pending, "pending")):
                if count:
                    text += f", {count} {word}"
            return text
        text += f" ({self.required()} required)"
        failed_indices = self.failed()
        if failed_indices:
            named = [self._named(i) for i in failed_indices[:NAMED_FAILURES]]
            more = len(failed_indices) - len(named)
            text += "; failed indices: " + ", ".join(named)
            if more:
                text += f" and {more} more"
        return text

    def _named(self, index: int) -> str:
        if self.state_of(index) == AppState.CANCELLED:
            return f"{index} (cancelled)"
        code = self.exit_codes.get(index)
        return f"{index} (exit {code})" if code is not None else str(index)

    def to_dict(self) -> dict[str, Any]:
        """The compact JSON-friendly form: index ranges by state, exit codes by index.

        >>> ArrayStatus(4, {0: AppState.SUCCEEDED, 3: AppState.FAILED}, {3: 2}).to_dict()
        {'size': 4, 'min_success_ratio': 1.0, 'selected': None, 'counts': {'PENDING': 2, 'SUCCEEDED': 1, 'FAILED': 1}, 'indices': {'PENDING': '1-2', 'SUCCEEDED': '0', 'FAILED': '3'}, 'exit_codes': {'3': 2}}
        """
        by_state: dict[str, list[int]] = {}
        for i in self.indices():
            by_state.setdefault(self.state_of(i).name, []).append(i)
        return {
            "size": self.size,
            "min_success_ratio": self.min_success_ratio,
            "selected": index_ranges(self.selected) if self.selected is not None else None,
            "counts": self.counts(),
            "indices": {
                name: index_ranges(found)
                for name, found in sorted(by_state.items(), key=lambda kv: AppState[kv[0]].value)
            },
            "exit_codes": {str(i): c for i, c in sorted(self.exit_codes.items())},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ArrayStatus:
        """Inverse of :meth:`to_dict`.

        Raises:
            InvalidSpecError: ``data`` is not what :meth:`to_dict` writes.

        >>> ArrayStatus.from_dict({"sise": 3})
        Traceback (most recent call last):
        ...
        anylaunch.specs.errors.InvalidSpecError: array={'sise': 3} is invalid: is not an ArrayStatus dict (KeyError: 'size'). Fix: pass what ArrayStatus.to_dict() returned
        """
        try:
            return cls._from_dict(data)
        except InvalidSpecError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InvalidSpecError(
                "array",
                data,
                f"is not an ArrayStatus dict ({type(e).__name__}: {e})",
                "pass what ArrayStatus.to_dict() returned",
            ) from None

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any]) -> ArrayStatus:
        selected = data.get("selected")
        states: dict[int, AppState] = {}
        for name, ranges in dict(data.get("indices", {})).items():
            if name not in AppState.__members__:
                raise InvalidSpecError(
                    "array.indices", name, "is not an AppState", "pass what to_dict() returned"
                )
            if AppState[name] == AppState.PENDING:
                continue
            for i in parse_index_ranges(str(ranges), "array.indices"):
                states[i] = AppState[name]
        return cls(
            size=int(data["size"]),
            states=states,
            exit_codes={int(i): int(c) for i, c in dict(data.get("exit_codes", {})).items()},
            min_success_ratio=float(data.get("min_success_ratio", 1.0)),
            selected=(
                tuple(parse_index_ranges(str(selected), "array.selected"))
                if selected is not None
                else None
            ),
        )
