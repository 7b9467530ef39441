"""Placement from Airflow: an operator's ordered ``targets``, and what a task shows of where
its app ran.

- **Arguments**: ``targets`` lists :class:`~anylaunch.runner.placement.Target` objects,
  scheduler names, or JSON-friendly dicts ``{"scheduler": ..., "cfg": {...},
  "startup_timeout": ...}`` (templated: values inside are rendered when the task runs, and a
  rendered string cfg value is cast to its option's type). They are checked when the DAG is
  parsed (values Airflow renders later wait) and again, rendered, when the task runs
  (:func:`check_targets`, :func:`resolve_targets`).
- **Who moves the app**: a process that holds the AppDef. In sync mode that is the task: it
  launched the app (or attached to it on a retry), so its status calls move it. A deferred
  task's trigger only reads: when a status says a move is due (``placement.next_move``) it
  ends with a :data:`EVENT_MOVE` event, and the worker attaches, moves the app with one
  status call and defers again on the same handle.
- **XCom** ``placement``: the history (``PlacementHistory.to_dict()`` plus ``attempts``),
  bounded in size (:func:`placement_outcomes`).

No Airflow imports: the operator and the trigger share these.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anylaunch.runner import Runner
    from anylaunch.runner.placement import Target
    from anylaunch.specs.placement_status import PlacementHistory

__all__ = [
    "EVENT_MOVE",
    "MAX_PLACEMENT_XCOM_CHARS",
    "XCOM_PLACEMENT",
    "check_targets",
    "due_move",
    "placed_handle_of",
    "placement_outcomes",
    "push_placement",
    "resolve_targets",
]

#: The XCom key of a placed app's history (pushed while it runs and at its end).
XCOM_PLACEMENT = "placement"
#: The trigger event's ``status`` when a move is due: the worker must make it.
EVENT_MOVE = "placement_move"
#: The most characters of JSON the history takes in XCom (one XCom row stays small).
MAX_PLACEMENT_XCOM_CHARS = 64_000
#: The most characters of one entry's reason kept in XCom (a failure message can be long).
MAX_REASON_CHARS = 2_000
#: The keys of a target given as a dict.
TARGET_KEYS = ("scheduler", "cfg", "startup_timeout")

_EXAMPLE = (
    "pass e.g. targets=['kubernetes', {'scheduler': 'slurm', 'cfg': {'partition': 'gpu'}, "
    "'startup_timeout': 600}]"
)


def _never(value: object) -> bool:
    return False


def _items(value: object) -> list[Any]:
    """``targets`` as a list; a string (a rendered template) must hold a JSON list."""
    from anylaunch.specs.errors import InvalidSpecError

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise InvalidSpecError(
                "targets",
                value,
                "must be a list of targets (a str must hold a JSON list)",
                _EXAMPLE,
            ) from None
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise InvalidSpecError(
            "targets", type(value).__name__, "must be a list of targets", _EXAMPLE
        )
    if not value:
        raise InvalidSpecError("targets", [], "must list at least one target", _EXAMPLE)
    return list(value)


def _check_name(field: str, name: object, known: Callable[[], Sequence[str]]) -> str:
    from anylaunch.specs.errors import InvalidSpecError, did_you_mean

    if not isinstance(name, str) or not name.strip():
        raise InvalidSpecError(field, name, "must be a scheduler name", _EXAMPLE)
    names = known()
    if name not in names:
        raise InvalidSpecError(
            field,
            name,
            f"names no scheduler.{did_you_mean(name, names)}",
            f"use one of {', '.join(sorted(names))}, or register a plugin scheduler",
        )
    return name


def _timeout(field: str, value: object) -> float | None:
    """A target's startup timeout: seconds, a ``timedelta``, or a rendered number string."""
    from anylaunch.specs.errors import InvalidSpecError

    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise InvalidSpecError(
                field, value, "must be a number of seconds > 0", "pass e.g. 600, or None"
            ) from None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InvalidSpecError(
            field, value, "must be a finite number of seconds > 0", "pass e.g. 600, or None"
        )
    return float(value)


def _target(
    item: object, field: str, later: Callable[[object], bool], known: Callable[[], Sequence[str]]
) -> Target | None:
    """The :class:`Target` an entry of ``targets`` stands for (None: it holds values that
    are rendered later, checked then)."""
    from anylaunch.runner.placement import Target
    from anylaunch.specs.errors import InvalidSpecError

    if isinstance(item, Target):
        _check_name(f"{field}.scheduler", item.scheduler, known)
        return item
    if isinstance(item, str):
        return None if later(item) else Target(_check_name(field, item, known))
    if not isinstance(item, Mapping):
        raise InvalidSpecError(
            field, type(item).__name__, "must be a Target, a scheduler name or a dict", _EXAMPLE
        )
    unknown = sorted(str(k) for k in item if k not in TARGET_KEYS)
    if unknown:
        raise InvalidSpecError(
            field, unknown, f"has unknown keys (a target has {', '.join(TARGET_KEYS)})", _EXAMPLE
        )
    scheduler, cfg = item.get("scheduler"), item.get("cfg")
    timeout = item.get("startup_timeout")
    waits = False
    if later(scheduler):
        waits = True
    else:
        _check_name(f"{field}.scheduler", scheduler, known)
    if later(cfg):
        waits = True
    elif cfg is not None and (
        not isinstance(cfg, Mapping) or not all(isinstance(k, str) and k for k in cfg)
    ):
        # the type only: a cfg may hold secrets
        raise InvalidSpecError(
            f"{field}.cfg",
            type(cfg).__name__,
            "must be a dict of run option name to value",
            "pass e.g. {'partition': 'gpu'}, or leave it out",
        )
    if later(timeout):
        waits = True
    else:
        timeout = _timeout(f"{field}.startup_timeout", timeout)
    if waits:
        return None
    return Target(str(scheduler), dict(cfg) if cfg else None, timeout)


def check_targets(
    value: object, later: Callable[[object], bool], known: Callable[[], Sequence[str]]
) -> None:
    """Rejects ``targets`` that cannot work, naming the entry (``targets[1].cfg``); values
    ``later`` says Airflow renders later (templates, XCom) are checked when the task runs.

    >>> names = lambda: ["kubernetes", "local_cwd", "slurm"]
    >>> now = lambda value: False  # nothing is rendered later
    >>> check_targets(["local_cwd", {"scheduler": "slurm", "startup_timeout": 60}], now, names)
    >>> check_targets(["{{ params.where }}"], lambda value: "{{" in str(value), names)
    >>> check_targets([{"scheduler": "slurn"}], now, names)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: targets[0].scheduler='slurn' is invalid: names no scheduler. Did you mean 'slurm'? Fix: use one of kubernetes, local_cwd, slurm, or register a plugin scheduler
    """
    if value is None or later(value):
        return
    for i, item in enumerate(_items(value)):
        _target(item, f"targets[{i}]", later, known)


def resolve_targets(
    value: object,
    runner: Runner,
    cfg_of: Callable[[str, Mapping[str, Any] | None, str], dict[str, Any]],
) -> list[Target]:
    """The rendered ``targets`` as :class:`Target` objects, each with its full cfg
    (``cfg_of(scheduler, cfg, field)``: e.g. the connection's, with the target's typed over
    it)."""
    from anylaunch.runner.placement import Target

    targets: list[Target] = []
    for i, item in enumerate(_items(value)):
        field = f"targets[{i}]"
        target = _target(item, field, _never, runner.scheduler_backends)
        assert target is not None  # nothing waits once rendered
        cfg = cfg_of(target.scheduler, target.cfg, f"{field}.cfg")
        targets.append(Target(target.scheduler, cfg or None, target.startup_timeout))
    return targets


def placement_outcomes(
    history: PlacementHistory, limit: int = MAX_PLACEMENT_XCOM_CHARS
) -> dict[str, Any]:
    """The history for XCom: ``history.to_dict()`` plus ``attempts`` (how many attempts were
    made), each reason cut to :data:`MAX_REASON_CHARS`; if that is still longer than
    ``limit`` characters of JSON, the oldest entries are left out (``entries_left_out``
    says how many; ``anylaunch status <handle>`` lists them all).

    >>> from anylaunch.specs.placement_status import PlacementEntry, PlacementHistory
    >>> history = PlacementHistory(1, (
    ...     PlacementEntry(0, "kubernetes", None, "skipped", "no: full"),
    ...     PlacementEntry(0, "slurm", "slurm://s/1", "relaunched", "infrastructure: NODE_FAIL"),
    ...     PlacementEntry(1, "slurm", "slurm://s/2", "current", ""),
    ... ), "file:///ckpt")
    >>> out = placement_outcomes(history)
    >>> out["attempts"], [e["outcome"] for e in out["entries"]]
    (2, ['skipped', 'relaunched', 'current'])
    >>> small = placement_outcomes(history, limit=300)
    >>> small["entries_left_out"], [e["outcome"] for e in small["entries"]]
    (2, ['current'])
    """
    data = history.to_dict()
    entries = [{**e, "reason": e["reason"][:MAX_REASON_CHARS]} for e in data.pop("entries")]
    out: dict[str, Any] = {**data, "attempts": history.attempt + 1}
    fixed = len(json.dumps({**out, "entries": [], "entries_left_out": len(entries)}))
    sizes = [len(json.dumps(e)) + 2 for e in entries]  # as json.dumps joins them: ", "
    left_out = 0
    while left_out < len(entries) - 1 and fixed + sum(sizes[left_out:]) > limit:
        left_out += 1
    out["entries"] = entries[left_out:]
    if left_out:
        out["entries_left_out"] = left_out
    return out


def push_placement(context: Any, result: Mapping[str, Any] | None) -> None:
    """Pushes a placed app's history (``result["placement"]``: bounded) to XCom."""
    if result is not None and isinstance(result.get("placement"), dict):
        context["ti"].xcom_push(key=XCOM_PLACEMENT, value=result["placement"])


def due_move(status: object) -> str:
    """Why a placed app must move now, as a status read by a process that cannot move it
    says it (``placement.next_move``); "" when no move is due."""
    placement = getattr(status, "placement", None)
    return str(getattr(placement, "next_move", "") or "")


def placed_handle_of(runner: Runner, concrete: str) -> str | None:
    """The stable handle of the placed app whose attempt is ``concrete`` (an app found by
    its task-instance label, Airflow < 3.3), or None if it is not one. Every attempt's env
    holds the placed app's checkpoint URL, ``{root}/{session}/{app_id}/checkpoint``; the
    handle it names is taken only if its history lists ``concrete``."""
    from anylaunch.runner.placement import ENV_ANYLAUNCH_CHECKPOINT_URL
    from anylaunch.specs.handles import PLACEMENT_SCHEME, make_app_handle

    app = runner.describe(concrete)
    urls = {r.env.get(ENV_ANYLAUNCH_CHECKPOINT_URL) for r in (app.roles if app else [])}
    url = next(iter(urls)) if len(urls) == 1 else None
    parts = url.rstrip("/").split("/") if url else []
    if len(parts) < 3 or parts[-1] != "checkpoint":
        return None
    try:
        handle = make_app_handle(PLACEMENT_SCHEME, parts[-3], parts[-2])
        status = runner.status(handle)
    except Exception:  # not a placed app's: the caller treats the app as unplaced
        return None
    history = status.placement if status is not None else None
    if history is None or concrete not in {e.handle for e in history.entries}:
        return None
    return handle
