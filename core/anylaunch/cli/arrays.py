"""What the CLI does for job arrays (see ``docs/arrays.md``).

- ``anylaunch run`` options: ``--array SIZE[%PARALLELISM]``, ``--sweep FILE`` (JSON lines, one
  object of parameters per index), ``--parallelism K`` and ``--min-success-ratio R`` (both for
  either). They are checked before any scheduler loads; a bad value is refused with an
  :class:`~anylaunch.specs.errors.InvalidSpecError` naming the flag, the value and the fix.
- ``anylaunch status`` of an array: the array's summary, a table of index ranges by state,
  and a compact per-index table (:func:`array_rows`).
- ``anylaunch log``/``run --log``: every index of an array is a replica of its one role
  (:func:`array_replicas`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from anylaunch.specs.errors import InvalidSpecError

if TYPE_CHECKING:
    from anylaunch.runner.api import Runner
    from anylaunch.specs.api import AppDef, AppStatus
    from anylaunch.specs.array_status import ArrayStatus

__all__ = [
    "ARRAY_TABLE_ROWS",
    "ArrayOptions",
    "add_array_arguments",
    "array_options",
    "array_replicas",
    "array_rows",
    "parse_array_flag",
    "parse_index_flag",
    "parse_parallelism",
    "parse_ratio",
    "read_sweep",
    "state_ranges_table",
]

#: rows of the per-index table ``anylaunch status`` prints by default (``--indices`` for more)
ARRAY_TABLE_ROWS = 20
#: index ranges shown per state before the cell says how many more there are
RANGES_SHOWN = 12

_ARRAY_FIX = "write SIZE[%PARALLELISM], e.g. --array 20%4 (20 indices, at most 4 at once)"


def _whole(flag: str, value: str, part: str, what: str, low: int, high: int, fix: str) -> int:
    text = part.strip()
    if not text.isdigit():  # no sign, no decimal point, no exponent
        raise InvalidSpecError(flag, value, f"{what} {part!r} is not a whole number", fix)
    number = int(text)
    if not low <= number <= high:
        raise InvalidSpecError(flag, value, f"{what} must be between {low} and {high}", fix)
    return number


def parse_array_flag(value: str) -> tuple[int, int | None]:
    """Reads ``--array SIZE[%PARALLELISM]``.

    >>> parse_array_flag("20%4"), parse_array_flag("1000")
    ((20, 4), (1000, None))
    >>> parse_array_flag("20%30")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: --array='20%30' is invalid: PARALLELISM must be between 1 and 20. Fix: write SIZE[%PARALLELISM], e.g. --array 20%4 (20 indices, at most 4 at once)
    """
    from anylaunch.specs.arrays import MAX_ARRAY_SIZE

    size_text, percent, limit_text = value.partition("%")
    size = _whole("--array", value, size_text, "SIZE", 1, MAX_ARRAY_SIZE, _ARRAY_FIX)
    if not percent:
        return size, None
    return size, _whole("--array", value, limit_text, "PARALLELISM", 1, size, _ARRAY_FIX)


def parse_parallelism(value: str, size: int) -> int:
    """Reads ``--parallelism K`` for an array of ``size`` indices.

    >>> parse_parallelism("4", 20)
    4
    >>> parse_parallelism("0", 20)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: --parallelism='0' is invalid: K must be between 1 and 20. Fix: pass how many indices may run at once, 1 to 20 (the array's size)
    """
    fix = f"pass how many indices may run at once, 1 to {size} (the array's size)"
    return _whole("--parallelism", value, value, "K", 1, size, fix)


def parse_ratio(value: str) -> float:
    """Reads ``--min-success-ratio R``: a number in (0, 1].

    >>> parse_ratio("0.9"), parse_ratio("1")
    (0.9, 1.0)
    >>> parse_ratio("90%")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: --min-success-ratio='90%' is invalid: R must be a number in (0, 1]. Fix: pass the share of indices that must succeed, e.g. 0.9 (90%) or 1 (all, the default)
    """
    fix = "pass the share of indices that must succeed, e.g. 0.9 (90%) or 1 (all, the default)"
    try:
        ratio = float(value)
    except ValueError:
        ratio = math.nan
    if not math.isfinite(ratio) or not 0 < ratio <= 1:
        raise InvalidSpecError("--min-success-ratio", value, "R must be a number in (0, 1]", fix)
    return ratio


def read_sweep(path: str) -> tuple[list[dict[str, object]], list[int]]:
    """Reads ``--sweep FILE`` (``-``: stdin): one JSON object of parameters per line, blank
    lines ignored. Returns the rows and the line number of each.

    Raises:
        InvalidSpecError: the file cannot be read, a line is not a JSON object (naming its
            line number), or it holds no row.
    """
    fix_line = 'write one JSON object per line, e.g. {"lr": 0.1, "seed": 1}'
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise InvalidSpecError(
            "--sweep", path, f"cannot be read ({reason})", "pass a readable JSON lines file"
        ) from None
    rows: list[dict[str, object]] = []
    numbers: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            problem = f"line {number} is not JSON ({getattr(e, 'msg', e)})"
            raise InvalidSpecError("--sweep", path, problem, fix_line) from None
        if not isinstance(row, dict):
            problem = f"line {number} is a JSON {type(row).__name__}, not an object"
            raise InvalidSpecError("--sweep", path, problem, fix_line)
        rows.append(row)
        numbers.append(number)
    if not rows:
        raise InvalidSpecError("--sweep", path, "holds no parameters", fix_line)
    return rows, numbers


def add_array_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds ``--array``, ``--sweep``, ``--parallelism`` and ``--min-success-ratio``."""
    group = parser.add_argument_group(
        "job arrays", "run the component's app once per index, as one app (docs: arrays)"
    )
    group.add_argument(
        "--array",
        metavar="SIZE[%PARALLELISM]",
        default=None,
        help="run SIZE indices (0..SIZE-1, each sees $ANYLAUNCH_ARRAY_INDEX and "
        "${array_index}), at most PARALLELISM at once, e.g. 20%%4",
    )
    group.add_argument(
        "--sweep",
        metavar="FILE",
        default=None,
        help="run one index per line of FILE (JSON lines, '-' for stdin): each object's "
        "parameters reach the index as ${param.NAME} and $ANYLAUNCH_PARAM_NAME",
    )
    group.add_argument(
        "--parallelism",
        metavar="K",
        default=None,
        help="with --array or --sweep: at most K indices at once (default: no limit)",
    )
    group.add_argument(
        "--min-success-ratio",
        "--min_success_ratio",
        dest="min_success_ratio",
        metavar="R",
        default=None,
        help="with --array or --sweep: the app SUCCEEDS when at least this share of its "
        "indices did, in (0, 1] (default: 1, every index)",
    )


@dataclass(frozen=True)
class ArrayOptions:
    """The array ``anylaunch run`` was asked for, checked: a plain array of ``size`` or a
    sweep of ``rows`` (read from ``lines`` of ``sweep_file``)."""

    size: int
    parallelism: int | None = None
    min_success_ratio: float = 1.0
    rows: tuple[dict[str, object], ...] = ()
    lines: tuple[int, ...] = ()
    sweep_file: str | None = None

    def apply(self, app: AppDef) -> AppDef:
        """The component's ``app`` as this array (``app`` itself is not changed).

        Raises:
            InvalidSpecError: the app cannot run as an array (several roles or replicas),
                or a sweep row is bad (naming the file and line).
        """
        import copy

        from anylaunch.specs.arrays import ArraySpec, sweep

        if not self.rows:
            arrayed = copy.deepcopy(app)
            arrayed.array = ArraySpec(
                self.size, parallelism=self.parallelism, min_success_ratio=self.min_success_ratio
            )
            arrayed.validate_array()
            return arrayed
        try:
            return sweep(app, self.rows, self.parallelism, self.min_success_ratio)
        except InvalidSpecError as e:
            if not e.field.startswith("params"):
                raise
            row = _row_of(e.field)
            if row is None:  # a bad value: its error names the parameter, not the row
                row = next((i for i, r in enumerate(self.rows) if _bad_row(r)), None)
            if row is None or row >= len(self.lines):
                raise
            label = e.field.split("]", 1)[-1].lstrip(".")
            problem = e.problem.replace("params[0]", f"line {self.lines[0]}")
            raise InvalidSpecError(
                "--sweep",
                self.sweep_file,
                f"line {self.lines[row]}: "
                + (f"{label}=" if label else "")
                + f"{e.value!r} {problem}",
                e.fix,
            ) from None


def _bad_row(row: dict[str, object]) -> bool:
    """True when one sweep row is refused on its own (a bad name or value)."""
    from anylaunch.specs.arrays import ArraySpec

    try:  # ArraySpec checks and converts the values to text
        ArraySpec(1, params=(row,))  # type: ignore[arg-type]
    except InvalidSpecError:
        return True
    return False


def _row_of(field_name: str) -> int | None:
    """The row a sweep error names (``params[3]`` or ``params[3].lr``), if any.

    >>> _row_of("params[3].lr"), _row_of("params[].lr"), _row_of("Role.num_replicas")
    (3, None, None)
    """
    if not field_name.startswith("params[") or "]" not in field_name:
        return None
    inside = field_name[len("params[") : field_name.index("]")]
    return int(inside) if inside.isdigit() else None


def array_options(args: argparse.Namespace) -> ArrayOptions | None:
    """The array ``anylaunch run``'s flags ask for (None: not an array), fully checked.

    Raises:
        InvalidSpecError: a bad value or combination, naming the flag and the fix.
    """
    parallelism_text: str | None = args.parallelism
    ratio_text: str | None = args.min_success_ratio
    if args.array is None and args.sweep is None:
        for flag, given in (
            ("--parallelism", parallelism_text),
            ("--min-success-ratio", ratio_text),
        ):
            if given is not None:
                raise InvalidSpecError(
                    flag, given, "applies to arrays only", "add --array SIZE or --sweep FILE"
                )
        return None
    if args.array is not None and args.sweep is not None:
        raise InvalidSpecError(
            "--array",
            args.array,
            "cannot be combined with --sweep (a sweep has one index per line of its file)",
            "drop --array, or drop --sweep",
        )
    rows: list[dict[str, object]] = []
    lines: list[int] = []
    limit: int | None = None
    if args.array is not None:
        size, limit = parse_array_flag(args.array)
        if limit is not None and parallelism_text is not None:
            raise InvalidSpecError(
                "--parallelism",
                parallelism_text,
                f"repeats the PARALLELISM of --array {args.array}",
                "give the parallelism once: --array SIZE%K or --parallelism K",
            )
    else:
        rows, lines = read_sweep(args.sweep)
        size = len(rows)
    if parallelism_text is not None:
        limit = parse_parallelism(parallelism_text, size)
    ratio = parse_ratio(ratio_text) if ratio_text is not None else 1.0
    return ArrayOptions(size, limit, ratio, tuple(rows), tuple(lines), args.sweep)


def parse_index_flag(flag: str, value: str) -> list[int]:
    """Reads a list of indices in range form (``7``, ``3,17``, ``0-9,15``) given to ``flag``.

    >>> parse_index_flag("--index", "3,7-9")
    [3, 7, 8, 9]
    """
    import re

    from anylaunch.specs.array_status import parse_index_ranges

    text = value.replace(" ", "")
    if not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", text):
        raise InvalidSpecError(
            flag, value, "is not a list of indices", "write e.g. 7, or 3,17, or 0-9,15"
        )
    return sorted(set(parse_index_ranges(text, flag)))


def check_indices(flag: str, indices: Sequence[int], array: ArrayStatus, app_handle: str) -> None:
    """Refuses indices that the array app ``app_handle`` does not run.

    >>> from anylaunch.specs.array_status import ArrayStatus
    >>> check_indices("--index", [3, 25], ArrayStatus(20), "local_cwd://s/a")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: --index=[3, 25] is invalid: index 25 is not one of local_cwd://s/a's indices (0-19). Fix: pick indices among 0-19
    """
    from anylaunch.specs.array_status import index_ranges

    runs = set(array.indices())
    missing = [i for i in indices if i not in runs]
    if missing:
        ranges = index_ranges(runs)
        raise InvalidSpecError(
            flag,
            list(indices),
            f"index {missing[0]} is not one of {app_handle}'s indices ({ranges})",
            f"pick indices among {ranges}",
        )


def array_replicas(
    runner: Runner,
    app_handle: str,
    role: str | None = None,
    indices: Sequence[int] | None = None,
    flag: str = "--index",
) -> list[tuple[str, int]] | None:
    """The ``(role, index)`` pairs to read the logs of, when ``app_handle`` is an array app
    (each index is a replica of its one role); None for any other app.

    Raises:
        InvalidSpecError: an unknown role, or an index the array does not run.
    """
    from anylaunch.runner.logs import find_replicas

    status = runner.status(app_handle)
    if status is None or status.array is None:
        return None
    picked = list(status.array.indices()) if indices is None else list(indices)
    check_indices(flag, picked, status.array, app_handle)
    wanted = set(picked)  # find_replicas checks the role (with a did-you-mean)
    return [(name, i) for name, i in find_replicas(runner, app_handle, role) if i in wanted]


def _cut_ranges(ranges: str, shown: int = RANGES_SHOWN) -> str:
    """Index ranges cut to their first ``shown`` ranges.

    >>> _cut_ranges("0,2,4,6", shown=2)
    '0,2 (+2 more ranges)'
    """
    parts = ranges.split(",")
    if len(parts) <= shown:
        return ranges
    return ",".join(parts[:shown]) + f" (+{len(parts) - shown} more ranges)"


def state_ranges_table(array: ArrayStatus) -> list[list[str]]:
    """The rows (header first) of the table of index ranges by state.

    >>> from anylaunch.specs.array_status import ArrayStatus
    >>> from anylaunch.specs.status import AppState
    >>> states = {i: AppState.SUCCEEDED for i in range(20)}
    >>> states[7] = AppState.FAILED
    >>> state_ranges_table(ArrayStatus(20, states))
    [['STATE', 'COUNT', 'INDICES'], ['SUCCEEDED', '19', '0-6,8-19'], ['FAILED', '1', '7']]
    """
    data = array.to_dict()
    rows = [["STATE", "COUNT", "INDICES"]]
    for name, count in data["counts"].items():
        rows.append([name, str(count), _cut_ranges(data["indices"].get(name, ""))])
    return rows


def array_rows(
    status: AppStatus, indices: Sequence[int] | None = None, limit: int = ARRAY_TABLE_ROWS
) -> tuple[list[int], int]:
    """Which indices the per-index table of an array app shows, and how many it leaves out.

    By default, the indices that say something: those not SUCCEEDED and not yet started
    (running, failed, cancelled), failed first, at most ``limit`` of them; the ranges table
    accounts for the rest. ``indices`` (``status --indices``) shows exactly those.

    >>> from anylaunch.specs.api import AppStatus
    >>> from anylaunch.specs.array_status import ArrayStatus
    >>> from anylaunch.specs.status import AppState
    >>> states = {i: AppState.RUNNING for i in range(30)}
    >>> states[7] = AppState.FAILED
    >>> array_rows(AppStatus(AppState.RUNNING, array=ArrayStatus(30, states)), limit=3)
    ([7, 0, 1], 27)
    """
    from anylaunch.specs.status import AppState

    array = status.array
    if array is None:
        return [], 0
    if indices is not None:
        return list(indices), 0
    quiet = (AppState.SUCCEEDED, AppState.PENDING, AppState.SUBMITTED, AppState.UNSUBMITTED)
    failed = array.failed()
    others = [i for i in array.indices() if array.state_of(i) not in quiet and i not in failed]
    telling = [*failed, *others]
    return telling[:limit], max(0, len(telling) - limit)


def exit_text(array: ArrayStatus, index: int, fallback: str) -> str:
    """The EXIT cell of an index: the array's exit code where the replica's reply has none."""
    code = array.exit_codes.get(index)
    return fallback if fallback not in ("-", "<N/A>") or code is None else str(code)


def masked(redact: Callable[[str], str] | None, text: str) -> str:
    """``text`` through ``redact`` (as it is when there is none)."""
    return redact(text) if redact is not None else text
