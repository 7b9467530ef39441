"""Operator keys of overlays (:func:`PUT`, :func:`JOIN`, :func:`DEL`) and the overlay errors.

Operator keys are plain strings in TorchX's storage format, so overlays survive JSON/YAML:

- ``PUT("f")`` is ``"__put__:f"``: replace the value of ``f``;
- ``JOIN("f", on="k")`` is ``"__join__:f:k"``: merge list items of ``f`` matched by ``k``;
- ``DEL("f")`` is ``"__del__:f"``: remove ``f``.

The earlier anylaunch spelling (``"$put(f)"``, ``"$join(f,on=k)"``, ``"$del(f)"``) is still
read everywhere, so overlays stored with it keep working; :func:`set_overlay` rewrites the
overlay it stores to the format above. Import these from :mod:`anylaunch.specs.overlays`.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from anylaunch.specs.errors import InvalidSpecError

__all__ = ["DEL", "JOIN", "PUT", "InvalidOverlayError", "OverlayTypeError"]

_PUBLIC_MODULE = "anylaunch.specs.overlays"


class InvalidOverlayError(InvalidSpecError):
    """An overlay (or an operator key in it) is malformed or sets a field it must not.

    It is a ``ValueError`` (TorchX raises ``ValueError`` for these).
    """


class OverlayTypeError(InvalidOverlayError, TypeError):
    """An overlay value does not fit the structure it patches: a JOIN value or target that is
    not a list of dicts, or a dict/list meeting a value of another type.

    It is a ``TypeError``, as TorchX documents for these, and an :class:`InvalidOverlayError`.

    >>> issubclass(OverlayTypeError, TypeError), issubclass(OverlayTypeError, ValueError)
    (True, True)
    """


# Errors are part of the public ``anylaunch.specs.overlays`` API: show them under that name.
InvalidOverlayError.__module__ = _PUBLIC_MODULE
OverlayTypeError.__module__ = _PUBLIC_MODULE

PUT_OP, JOIN_OP, DEL_OP = "put", "join", "del"
_PUT_PREFIX, _JOIN_PREFIX, _DEL_PREFIX = "__put__:", "__join__:", "__del__:"

# The earlier anylaunch spelling, still read (whitespace around separators tolerated, as in
# hand-written YAML such as "$join(containers, on=name)").
_LEGACY_OP_RE = re.compile(r"\$(put|del)\(\s*([^(),]+?)\s*\)")
_LEGACY_JOIN_RE = re.compile(r"\$join\(\s*([^(),]+?)\s*,\s*on\s*=\s*([^(),]+?)\s*\)")
# Anything that starts like an operator must parse as one: a typo must not silently become a
# literal key in the scheduler's request.
_LOOKS_LIKE_OP_RE = re.compile(r"\$(put|join|del)\s*\(|__(put|join|del)__", re.IGNORECASE)


class ParsedKey(NamedTuple):
    """An overlay key split into its operator (None for a plain key), field and JOIN key."""

    op: str | None
    field: str
    on: str | None


def _check_name(name: object, what: str, forbidden: str = "") -> str:
    if (
        not isinstance(name, str)
        or not name
        or name != name.strip()
        or any(c in name for c in forbidden)
    ):
        no = f" or any of {forbidden!r}" if forbidden else ""
        raise InvalidOverlayError(
            what,
            name,
            f"must be a non-empty str without surrounding whitespace{no}",
            "pass the plain field name, e.g. PUT('containers') or JOIN('containers', on='name')",
        )
    return name


def PUT(key: str) -> str:
    """Replace a value entirely instead of merging/appending.

    Use as a dict key in overlays. For lists this replaces instead of appending; for dicts this
    replaces instead of recursive merge.

    >>> from anylaunch.specs.overlays import apply_overlay, PUT
    >>> base = {"containers": [{"name": "old1"}, {"name": "old2"}]}
    >>> apply_overlay(base, {PUT("containers"): [{"name": "only"}]})
    >>> base
    {'containers': [{'name': 'only'}]}
    >>> PUT("containers")
    '__put__:containers'

    Raises:
        InvalidOverlayError: (a ValueError) if ``key`` is not a non-empty field name.
    """
    return f"{_PUT_PREFIX}{_check_name(key, 'PUT(key)')}"


def JOIN(key: str, *, on: str) -> str:
    """Strategic merge list items by key field.

    Matched items (same value for ``on`` field) have their fields merged. Unmatched items are
    appended. Use as a dict key in overlays.

    >>> from anylaunch.specs.overlays import apply_overlay, JOIN
    >>> base = {"containers": [{"name": "main", "image": "v1", "cpu": "1"}]}
    >>> apply_overlay(base, {JOIN("containers", on="name"): [
    ...     {"name": "main", "memory": "1Gi"},
    ...     {"name": "sidecar", "image": "proxy"},
    ... ]})
    >>> base
    {'containers': [{'name': 'main', 'image': 'v1', 'cpu': '1', 'memory': '1Gi'}, {'name': 'sidecar', 'image': 'proxy'}]}
    >>> JOIN("containers", on="name")
    '__join__:containers:name'

    Raises:
        TypeError: At apply time, if the base list contains non-dict items (an
            :class:`OverlayTypeError`).
        InvalidOverlayError: (a ValueError) if ``key`` or ``on`` is not a field name (``key``
            must not hold ``':'``, which separates it from ``on``).
    """
    field = _check_name(key, "JOIN(key)", forbidden=":")
    return f"{_JOIN_PREFIX}{field}:{_check_name(on, 'JOIN(on)')}"


def DEL(key: str) -> str:
    """Remove a key from the base dict.

    Use as a dict key in overlays. The value is ignored (convention: None). This differs from
    setting a field to None: ``DEL`` removes the key (thrift/protobuf: field not sent, server
    uses its default) while ``"field": None`` sets it to null (field present but null).

    >>> from anylaunch.specs.overlays import apply_overlay, DEL
    >>> base = {"keep": 1, "remove_me": "old"}
    >>> apply_overlay(base, {DEL("remove_me"): None})
    >>> base
    {'keep': 1}
    >>> DEL("hostNetwork")
    '__del__:hostNetwork'

    Raises:
        InvalidOverlayError: (a ValueError) if ``key`` is not a non-empty field name.
    """
    return f"{_DEL_PREFIX}{_check_name(key, 'DEL(key)')}"


def join_path(path: str, name: str) -> str:
    """``path.name`` (or ``name`` at the top level), for messages."""
    return f"{path}.{name}" if path else name


def _parse_new(key: str) -> ParsedKey | None:
    for op, prefix in ((PUT_OP, _PUT_PREFIX), (DEL_OP, _DEL_PREFIX)):
        if key.startswith(prefix):
            field = key[len(prefix) :]
            return ParsedKey(op, field, None) if field and field == field.strip() else None
    if key.startswith(_JOIN_PREFIX):
        field, sep, on = key[len(_JOIN_PREFIX) :].partition(":")
        ok = all(p and p == p.strip() for p in (field, on))
        return ParsedKey(JOIN_OP, field, on) if sep and ok else None
    return None


def parse_key(key: str, path: str = "") -> ParsedKey:
    """Parses an overlay key, in TorchX's format or the earlier ``$op(...)`` one.

    >>> parse_key("__join__:containers:name")
    ParsedKey(op='join', field='containers', on='name')
    >>> parse_key("$join(containers, on=name)")
    ParsedKey(op='join', field='containers', on='name')
    >>> parse_key("spec")
    ParsedKey(op=None, field='spec', on=None)
    >>> parse_key("__join__:containers")
    Traceback (most recent call last):
    ...
    anylaunch.specs.overlays.InvalidOverlayError: overlay key='__join__:containers' is invalid: looks like an operator key but does not parse. Fix: ...

    Raises:
        InvalidOverlayError: (a ValueError) if the key looks like an operator but is malformed.
    """
    if not key.startswith(("$", "_")):  # fast path: the vast majority of keys
        return ParsedKey(None, key, None)
    if parsed := _parse_new(key):
        return parsed
    if m := _LEGACY_OP_RE.fullmatch(key):
        return ParsedKey(m.group(1), m.group(2), None)
    if (m := _LEGACY_JOIN_RE.fullmatch(key)) and "=" not in m.group(2):
        return ParsedKey(JOIN_OP, m.group(1), m.group(2))
    if _LOOKS_LIKE_OP_RE.match(key):
        raise InvalidOverlayError(
            f"overlay key at {path}" if path else "overlay key",
            key,
            "looks like an operator key but does not parse",
            "build operator keys with PUT('f'), JOIN('f', on='k') or DEL('f'); written out "
            "they are '__put__:f', '__join__:f:k' and '__del__:f'",
        )
    return ParsedKey(None, key, None)


def field_of(key: Any) -> Any:
    """The field a key of a base dict stands for; keys that do not parse are their own field.

    >>> field_of("__put__:env"), field_of("$del(env)"), field_of("__put__:"), field_of(3)
    ('env', 'env', '__put__:', 3)
    """
    if not isinstance(key, str) or not key.startswith(("$", "_")):
        return key
    try:
        return parse_key(key).field
    except InvalidOverlayError:
        return key


def canonical_key(parsed: ParsedKey) -> str:
    """The key in TorchX's format for a parsed key (legacy keys are rewritten).

    >>> canonical_key(parse_key("$join(containers, on=name)"))
    '__join__:containers:name'
    """
    if parsed.op == PUT_OP:
        return f"{_PUT_PREFIX}{parsed.field}"
    if parsed.op == DEL_OP:
        return f"{_DEL_PREFIX}{parsed.field}"
    if parsed.op == JOIN_OP and ":" not in parsed.field:
        return f"{_JOIN_PREFIX}{parsed.field}:{parsed.on}"
    if parsed.op == JOIN_OP:  # a legacy JOIN on a field with ':' has no other spelling
        return f"$join({parsed.field},on={parsed.on})"
    return parsed.field
