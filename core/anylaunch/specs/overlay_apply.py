"""Applying overlays (:func:`apply_overlay`) and accumulating them in storage.

Two modes share one set of rules. Resolving (what schedulers do at submit time) turns operator
keys into their operations on plain fields, so the base holds no operator key afterwards.
Accumulating (what :func:`~anylaunch.specs.overlays.set_overlay` does) keeps operator keys and
one entry per field, such that resolving the result equals resolving the overlays one after
the other (exactly so for plain overlays; a plain list after a JOIN appends to the JOIN's items
and a JOIN on another key replaces the earlier one). Import from :mod:`anylaunch.specs.overlays`.
"""

from __future__ import annotations

import copy
from typing import Any

from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.overlay_keys import (
    DEL_OP,
    JOIN_OP,
    PUT_OP,
    InvalidOverlayError,
    OverlayTypeError,
    ParsedKey,
    canonical_key,
    field_of,
    join_path,
    parse_key,
)

__all__ = ["apply_overlay", "check_structure"]

_Overlay = dict[str, Any]
_MISSING: Any = object()


def _type(value: object) -> str:
    # Values are never shown in messages: an overlay may carry tokens (annotations, args).
    return type(value).__name__


def check_structure(overlay: object, name: str, path: str = "") -> None:
    """Checks that ``overlay`` is a dict with str keys, valid operator keys and JOIN lists of
    dicts, so mistakes surface when the overlay is set rather than at submit time.

    >>> check_structure({"spec": {"__join__:containers:name": {"name": "x"}}}, "overlay")
    Traceback (most recent call last):
    ...
    anylaunch.specs.overlays.OverlayTypeError: overlay key='spec.__join__:containers:name' is invalid: JOIN requires a list value (of dicts), got dict. Fix: pass a list of dicts keyed by 'name'

    Raises:
        InvalidOverlayError: the overlay is not a dict, or a key is not a str or is malformed.
        OverlayTypeError: (a TypeError) a JOIN value is not a list of dicts.
    """
    if not isinstance(overlay, dict):
        raise InvalidOverlayError(
            f"{name} at {path}" if path else name,
            _type(overlay),
            "an overlay must be a dict",
            "pass a dict of request fields, e.g. {'spec': {'nodeSelector': {...}}}",
        )
    for key, value in overlay.items():
        if not isinstance(key, str):
            raise InvalidOverlayError(
                f"{name} key at {path or '<top level>'}",
                key,
                "overlay keys must be str (they name request fields)",
                f"use the field name as a string, e.g. {str(key)!r}",
            )
        parsed = parse_key(key, path)
        if parsed.op == JOIN_OP:
            _check_join_value(value, f"{name} key", join_path(path, key), parsed.on)
        if parsed.op != DEL_OP:  # a DEL value is ignored
            _check_value(value, name, join_path(path, parsed.field))


def _check_join_value(value: object, what: str, shown: str, on: str | None) -> None:
    if not isinstance(value, (list, tuple)):
        problem = f"JOIN requires a list value (of dicts), got {_type(value)}"
    elif not all(isinstance(v, dict) for v in value):
        problem = "JOIN requires a list of dicts, but the overlay value holds non-dict items"
    else:
        return
    raise OverlayTypeError(what, shown, problem, f"pass a list of dicts keyed by {on!r}")


def _check_value(value: object, name: str, path: str) -> None:
    if isinstance(value, dict):
        check_structure(value, name, path)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_value(item, name, f"{path}[{i}]")


def _mismatch(
    path: str, field: str, current: object, value: object, fix: str = ""
) -> OverlayTypeError:
    return OverlayTypeError(
        "overlay key",
        path,
        f"type mismatch: the overlay's {_type(value)} meets a {_type(current)}; dicts merge "
        "only into dicts and lists append only to lists",
        fix or f"use PUT({field!r}) as the key to replace the value",
    )


def _join_target_error(path: str, field: str, on: str, current: object) -> OverlayTypeError:
    if isinstance(current, list):
        problem = "JOIN requires a list of dicts, but the value it merges into holds non-dict items"
    else:
        problem = f"JOIN requires the value it merges into to be a list, got {_type(current)}"
    return OverlayTypeError(
        f"overlay key JOIN({field!r}, on={on!r})",
        path,
        problem,
        f"use PUT({field!r}) to replace the value, or a plain {field!r} key to append",
    )


def apply_overlay(base: dict[str, Any], overlay: dict[str, Any], *, _resolve: bool = True) -> None:
    """Merge overlay into base in-place.

    Default rules: (1) dict → recursive merge (upsert keys), (2) list → append overlay items,
    (3) anything else → overwrite. A tuple replaces a list (the legacy spelling of PUT, e.g.
    ``!!python/tuple`` in YAML files) and is stored as a list. A dict or list meeting a value of
    another type raises TypeError (None on either side is not a mismatch: ``"field": None``
    sets null and a null field takes any value). Operators (dict keys): :func:`PUT` replaces
    the value, :func:`JOIN` strategic-merges list items by a key field, :func:`DEL` removes the
    key. Values are deep-copied from the overlay and operators nested in them are resolved
    too, so ``base`` holds no operator key afterwards, and one entry per field even if it held
    operator keys before.

    During accumulation (multiple :func:`set_overlay` calls), operators for the same field
    replace earlier operations — last call wins, except :func:`JOIN`, which strategic-merges
    into what the field already holds.

    >>> from anylaunch.specs.overlays import apply_overlay, PUT, JOIN, DEL

    >>> # Dicts merge recursively, lists append, primitives overwrite
    >>> base = {"spec": {"cpu": "500m"}, "tags": ["prod"], "replicas": 1}
    >>> apply_overlay(base, {"spec": {"memory": "1Gi"}, "tags": ["gpu"], "replicas": 3})
    >>> base
    {'spec': {'cpu': '500m', 'memory': '1Gi'}, 'tags': ['prod', 'gpu'], 'replicas': 3}

    >>> # PUT replaces a list instead of appending
    >>> base = {"containers": [{"name": "old1"}, {"name": "old2"}]}
    >>> apply_overlay(base, {PUT("containers"): [{"name": "only"}]})
    >>> base
    {'containers': [{'name': 'only'}]}

    >>> # JOIN: match containers by name, merge their fields
    >>> base = {"containers": [{"name": "main", "image": "v1"}]}
    >>> apply_overlay(base, {JOIN("containers", on="name"): [
    ...     {"name": "main", "memory": "1Gi"},
    ... ]})
    >>> base
    {'containers': [{'name': 'main', 'image': 'v1', 'memory': '1Gi'}]}

    >>> # DEL: remove a key from the base
    >>> base = {"keep": 1, "remove": "old"}
    >>> apply_overlay(base, {DEL("remove"): None})
    >>> base
    {'keep': 1}

    >>> # A dict cannot merge into a list
    >>> apply_overlay({"spec": {"tolerations": []}}, {"spec": {"tolerations": {"key": "a"}}})
    Traceback (most recent call last):
    ...
    anylaunch.specs.overlays.OverlayTypeError: overlay key='spec.tolerations' is invalid: type mismatch: the overlay's dict meets a list; ... Fix: use PUT('tolerations') as the key to replace the value

    Args:
        base: the request dict to patch (mutated)
        overlay: the overlay to apply (not mutated)
        _resolve: internal only — do not pass. When True (default), operator keys resolve to
            their operations on plain field names. When False, operator keys are stored as-is
            (used by :func:`set_overlay` for accumulation).

    Raises:
        InvalidOverlayError: (a ValueError) if the overlay is not a dict or holds a malformed
            key.
        OverlayTypeError: (a TypeError) if a JOIN value or the value it merges into is not a
            list of dicts, or on a structural type mismatch (see above).
    """
    if not isinstance(base, dict):
        raise InvalidSpecError(
            "apply_overlay(base)", _type(base), "must be a dict", "pass the request dict to patch"
        )
    check_structure(overlay, "overlay")
    if _resolve:
        _resolve_into(base, overlay, "")
    else:
        _accumulate_into(base, overlay, "")


# ---------------------------------------------------------------------------------------------
# resolving
# ---------------------------------------------------------------------------------------------


def _entries(base: dict[Any, Any], field: str) -> list[Any]:
    """The keys of ``base`` standing for ``field`` (the plain key and any operator keys)."""
    return [k for k in base if k == field or field_of(k) == field]


def _resolved(value: Any) -> Any:
    """Deep copy of an overlay value with every operator key in it resolved (tuples → lists)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        _resolve_into(out, value, "")
        return out
    if isinstance(value, (list, tuple)):
        return [_resolved(v) for v in value]
    return copy.deepcopy(value)


def _resolve_into(base: dict[str, Any], overlay: dict[str, Any], path: str) -> None:
    for key, value in overlay.items():
        op, field, on = parse_key(key, path)
        sub = join_path(path, field)
        for k in _entries(base, field):  # one entry per field: drop operator keys the base held
            if k != field or op in (PUT_OP, DEL_OP):
                del base[k]
        if op == PUT_OP:
            base[field] = _resolved(value)
        elif op == JOIN_OP:
            assert on is not None  # parse_key always gives a JOIN its key
            _join_into(base, field, on, value, sub)
        elif op is None:
            _merge_into(base, field, value, sub)


def _merge_into(base: dict[str, Any], field: str, value: Any, path: str) -> None:
    current = base.get(field, _MISSING)
    if isinstance(current, tuple):
        current = base[field] = list(current)
    if isinstance(value, tuple):  # legacy PUT: replaces a list
        if isinstance(current, dict):
            raise _mismatch(path, field, current, value)
        base[field] = _resolved(value)
    elif current is _MISSING or current is None or value is None:
        base[field] = _resolved(value)
    elif isinstance(current, dict) and isinstance(value, dict):
        _resolve_into(current, value, path)
    elif isinstance(current, list) and isinstance(value, list):
        current.extend(_resolved(v) for v in value)
    elif isinstance(current, (dict, list)) or isinstance(value, (dict, list)):
        raise _mismatch(path, field, current, value)
    else:  # primitives overwrite (an int may replace a str: enums serialize either way)
        base[field] = _resolved(value)


def _match(items: list[dict[str, Any]], item: dict[str, Any], on: str) -> dict[str, Any] | None:
    # Items without the key field never match (e.g. a toleration with no "key"): appended.
    if on not in item:
        return None
    return next((c for c in items if on in c and c[on] == item[on]), None)


def _join_into(
    base: dict[str, Any], field: str, on: str, items: list[dict[str, Any]], path: str
) -> None:
    current = base.get(field)
    if current is None:
        base[field] = _resolved(items)
        return
    if isinstance(current, tuple):
        current = base[field] = list(current)
    if not isinstance(current, list) or not all(isinstance(v, dict) for v in current):
        raise _join_target_error(path, field, on, current)
    for item in items:
        match = _match(current, item, on)
        if match is None:
            current.append(_resolved(item))
        else:
            _resolve_into(match, item, f"{path}[{on}={item[on]!r}]")


# ---------------------------------------------------------------------------------------------
# accumulating (set_overlay)
# ---------------------------------------------------------------------------------------------


def accumulated(value: Any, path: str = "") -> Any:
    """Deep copy of an overlay value with one entry per field in every dict and operator keys
    in TorchX's format (tuples → PUT of a list).

    >>> accumulated({"$put(a)": [1], "b": (2,)})
    {'__put__:a': [1], '__put__:b': [2]}
    """
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        _accumulate_into(out, value, path)
        return out
    if isinstance(value, (list, tuple)):
        return [accumulated(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return copy.deepcopy(value)


def _accumulate_into(stored: dict[str, Any], overlay: dict[str, Any], path: str) -> None:
    for key, value in overlay.items():
        parsed = parse_key(key, path)
        field = parsed.field
        sub = join_path(path, field)
        existing = _entries(stored, field)
        if parsed.op == JOIN_OP:
            new_key, new_value = _accumulate_join(stored, existing, parsed, value, sub)
        elif parsed.op == PUT_OP:  # PUT and DEL: the last operator wins
            new_key, new_value = canonical_key(parsed), accumulated(value, sub)
        elif parsed.op == DEL_OP:  # its value is ignored: stored as the conventional None
            new_key, new_value = canonical_key(parsed), None
        elif isinstance(value, tuple):  # legacy spelling of PUT
            new_key, new_value = canonical_key(ParsedKey(PUT_OP, field, None)), accumulated(value)
        elif not existing:
            new_key, new_value = field, accumulated(value, sub)
        else:
            new_key, new_value = _accumulate_plain(stored, existing[-1], value, sub)
        if existing == [new_key]:
            stored[new_key] = new_value  # keeps its place
        else:
            for k in existing:
                del stored[k]
            stored[new_key] = new_value


def _accumulate_plain(
    stored: dict[str, Any], old_key: str, value: Any, path: str
) -> tuple[str, Any]:
    """A plain ``value`` on top of ``stored[old_key]``: the entry that has the same effect."""
    old_parsed = parse_key(old_key, path)
    field, old_op = old_parsed.field, old_parsed.op
    old = stored[old_key]
    put_key = canonical_key(ParsedKey(PUT_OP, field, None))
    if old_op == DEL_OP:
        return put_key, accumulated(value, path)  # after DEL the field is exactly `value`
    if value is None:
        return field, None  # sets null whatever came before
    if old_op == JOIN_OP:
        if not isinstance(value, list):
            raise _mismatch(path, field, old, value)
        old.extend(accumulated(value, path))
        return canonical_key(old_parsed), old
    if old is None:
        # applied in turn, null then `value` leaves exactly `value` whatever the base held:
        # a plain key would instead merge into (or mismatch) the base's value
        return put_key, accumulated(value, path)
    if isinstance(old, dict) and isinstance(value, dict):
        _accumulate_into(old, value, path)
        return canonical_key(old_parsed), old
    if isinstance(old, list) and isinstance(value, list):
        old.extend(accumulated(value, path))
        return canonical_key(old_parsed), old
    if isinstance(old, (dict, list)) or isinstance(value, (dict, list)):
        raise _mismatch(
            path,
            field,
            old,
            value,
            f"use PUT({field!r}) as the key to replace what an earlier set_overlay stored",
        )
    return canonical_key(old_parsed), accumulated(value, path)


def _accumulate_join(
    stored: dict[str, Any],
    existing: list[str],
    parsed: ParsedKey,
    items: list[dict[str, Any]],
    path: str,
) -> tuple[str, Any]:
    """A JOIN on top of what ``stored`` holds for its field: repeated JOINs accumulate."""
    assert parsed.on is not None  # parse_key always gives a JOIN its key
    field, on = parsed.field, parsed.on
    join_key = canonical_key(parsed)
    put_key = canonical_key(ParsedKey(PUT_OP, field, None))
    if not existing:
        return join_key, accumulated(items, path)
    old_parsed = parse_key(existing[-1], path)
    old = stored[existing[-1]]
    if old_parsed.op == DEL_OP or (old_parsed.op != JOIN_OP and old is None):
        return put_key, accumulated(items, path)  # the field is exactly the JOIN's items
    if old_parsed.op == JOIN_OP and old_parsed.on != on:
        return join_key, accumulated(items, path)  # a JOIN on another key: the last wins
    if not isinstance(old, list) or not all(isinstance(v, dict) for v in old):
        raise _join_target_error(path, field, on, old)
    for item in items:
        match = _match(old, item, on)
        if match is None:
            old.append(accumulated(item, path))
        else:
            _accumulate_into(match, item, f"{path}[{on}={item[on]!r}]")
    # after a PUT the field is exactly the merged list; after a plain list or a JOIN it merges
    return (put_key if old_parsed.op == PUT_OP else join_key), old
