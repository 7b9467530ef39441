"""Overlays patch a scheduler's submit-job request with fields that AppDef and Role cannot express.

Use :func:`set_overlay` / :func:`get_overlay` to store and retrieve overlays, and
:func:`apply_overlay` to apply them. Overlays live in ``target.metadata[namespace][kind]``
(``namespace`` is the scheduler, ``kind`` the request struct), so they travel with the AppDef.

For users, attach scheduler-specific fields to a Role or AppDef:

>>> from anylaunch.specs import Role
>>> from anylaunch.specs.overlays import set_overlay, get_overlay

>>> # Kubernetes: add a node selector to a role
>>> role = Role(name="trainer", image="my-image", entrypoint="train.py")
>>> set_overlay(role, "kubernetes", "V1Pod", {
...     "spec": {"nodeSelector": {"accelerator": "a100"}},
... })

>>> # Multiple set_overlay calls merge (dicts upsert, lists append)
>>> set_overlay(role, "kubernetes", "V1Pod", {
...     "spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
... })
>>> get_overlay(role, "kubernetes", "V1Pod")
{'spec': {'nodeSelector': {'accelerator': 'a100'}, 'tolerations': [{'key': 'gpu', 'operator': 'Exists'}]}}

By default dicts merge and lists append. Use :func:`PUT`, :func:`JOIN` and :func:`DEL` as dict
keys to override that per field:

>>> from anylaunch.specs import Role
>>> from anylaunch.specs.overlays import set_overlay, PUT, JOIN, DEL

>>> role = Role(name="trainer", image="my-image", entrypoint="train.py")

>>> # PUT: replace a list instead of appending
>>> set_overlay(role, "kubernetes", "V1Pod", {
...     "spec": {PUT("containers"): [{"name": "only"}]},
... })

>>> # JOIN: strategic merge list items by key field
>>> set_overlay(role, "kubernetes", "V1Pod", {
...     "spec": {JOIN("initContainers", on="name"): [
...         {"name": "setup", "image": "init:v2"},
...     ]},
... })

>>> # DEL: remove a field (server uses its default)
>>> set_overlay(role, "kubernetes", "V1Pod", {DEL("hostNetwork"): None})

Operator keys are plain strings (``PUT("x") == "$put(x)"``), so overlays survive JSON/YAML and
can live in files. They are stored as-is and resolved when the scheduler calls
:func:`apply_overlay` at submit time.

None vs DEL vs missing key:

- key missing from the overlay: the field is untouched in the base;
- ``"field": None``: the field is set to None/null ("present but null");
- ``DEL("field"): None``: the field is removed from the base ("not sent").
"""

from __future__ import annotations

import copy
import re
import warnings
from typing import TYPE_CHECKING, Any, NamedTuple

from anylaunch.specs.errors import InvalidSpecError

if TYPE_CHECKING:
    from anylaunch.specs.api import AppDef, Role

_Overlay = dict[str, Any]

__all__ = [
    "DEL",
    "JOIN",
    "PUT",
    "InvalidOverlayError",
    "apply_overlay",
    "get_overlay",
    "set_overlay",
    "validate_overlay",
]


class InvalidOverlayError(InvalidSpecError):
    """An overlay (or an operator key in it) is malformed or sets a field it must not."""


# ---------------------------------------------------------------------------------------------
# Operator keys
# ---------------------------------------------------------------------------------------------

_PUT, _JOIN, _DEL = "put", "join", "del"

# Whitespace around the separators is tolerated so that hand-written YAML such as
# "$join(containers, on=name)" still parses; PUT/JOIN/DEL always emit the canonical form.
_OP_RE = re.compile(r"\$(put|del)\(\s*([^(),]+?)\s*\)")
_JOIN_RE = re.compile(r"\$join\(\s*([^(),]+?)\s*,\s*on\s*=\s*([^(),]+?)\s*\)")
# Anything that starts like an operator must parse as one: a typo must not silently become
# a literal key in the scheduler's request.
_LOOKS_LIKE_OP_RE = re.compile(r"\$(put|join|del)\s*\(", re.IGNORECASE)


class _ParsedKey(NamedTuple):
    op: str | None  # None for a plain key
    field: str
    on: str | None  # JOIN only


def _check_name(name: object, what: str, forbidden: str = "(),") -> str:
    if (
        not isinstance(name, str)
        or not name
        or name != name.strip()
        or any(c in name for c in forbidden)
    ):
        raise InvalidOverlayError(
            what,
            name,
            f"must be a non-empty str without surrounding whitespace or any of {forbidden!r}",
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
    '$put(containers)'
    """
    return f"${_PUT}({_check_name(key, 'PUT(key)')})"


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
    '$join(containers,on=name)'

    Raises:
        TypeError: At apply time, if the base list contains non-dict items.
    """
    key = _check_name(key, "JOIN(key)")
    on = _check_name(on, "JOIN(on)", forbidden="(),=")
    return f"${_JOIN}({key},on={on})"


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
    '$del(hostNetwork)'
    """
    return f"${_DEL}({_check_name(key, 'DEL(key)')})"


def _parse_key(key: str, path: str = "") -> _ParsedKey:
    """Parses an overlay key into (op, field, on); plain keys give op None.

    >>> _parse_key("$join(containers, on=name)")
    _ParsedKey(op='join', field='containers', on='name')
    >>> _parse_key("spec")
    _ParsedKey(op=None, field='spec', on=None)
    """
    if not key.startswith("$"):  # fast path: the vast majority of keys
        return _ParsedKey(None, key, None)
    if m := _OP_RE.fullmatch(key):
        return _ParsedKey(m.group(1), m.group(2), None)
    if (m := _JOIN_RE.fullmatch(key)) and "=" not in m.group(2):
        return _ParsedKey(_JOIN, m.group(1), m.group(2))
    if _LOOKS_LIKE_OP_RE.match(key):
        raise InvalidOverlayError(
            f"overlay key {_join_path(path, key)!r}" if path else "overlay key",
            key,
            "looks like an operator key but does not parse",
            "build operator keys with PUT('f'), JOIN('f', on='k') or DEL('f'), or write them "
            "in lowercase as $put(f), $join(f,on=k), $del(f)",
        )
    return _ParsedKey(None, key, None)


def _join_path(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _check_structure(overlay: object, name: str, path: str = "") -> None:
    """Checks that ``overlay`` is a dict with str keys, valid operator keys and JOIN lists of
    dicts, so mistakes surface when the overlay is set rather than at submit time."""
    if not isinstance(overlay, dict):
        raise InvalidOverlayError(
            f"{name}.{path}" if path else name,
            overlay,
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
        parsed = _parse_key(key, path)
        sub = _join_path(path, parsed.field)
        if parsed.op == _JOIN and (
            not isinstance(value, list) or not all(isinstance(v, dict) for v in value)
        ):
            raise InvalidOverlayError(
                f"{name}[{_join_path(path, key)!r}]",
                value,
                "a JOIN value must be a list of dicts",
                f"pass a list of dicts keyed by {parsed.on!r}",
            )
        if parsed.op != _DEL:  # a DEL value is ignored
            _check_value(value, name, sub)


def _check_value(value: object, name: str, path: str) -> None:
    if isinstance(value, dict):
        _check_structure(value, name, path)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_value(item, name, f"{path}[{i}]")


# ---------------------------------------------------------------------------------------------
# apply_overlay
# ---------------------------------------------------------------------------------------------


def apply_overlay(base: dict[str, Any], overlay: dict[str, Any], *, _resolve: bool = True) -> None:
    """Merge overlay into base in-place.

    Default rules: (1) dict → recursive merge (upsert keys), (2) list → append overlay items,
    (3) anything else → overwrite. Operators (dict keys): :func:`PUT` replaces the value,
    :func:`JOIN` strategic-merges list items by a key field, :func:`DEL` removes the key.
    Values are deep-copied from the overlay and operators nested in them are resolved too,
    so ``base`` holds no operator key afterwards.

    During accumulation (multiple :func:`set_overlay` calls), operators for the same field
    replace earlier operations — last call wins.

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

    Args:
        base: the request dict to patch (mutated)
        overlay: the overlay to apply (not mutated)
        _resolve: internal only — do not pass. When True (default), operator keys resolve to
            their operations on plain field names. When False, operator keys are stored as-is
            (used by :func:`set_overlay` for accumulation).

    Raises:
        InvalidOverlayError: if the overlay is not a dict or holds a malformed key.
        TypeError: if a JOIN targets a base value that is not a list of dicts.
    """
    if not isinstance(base, dict):
        raise InvalidSpecError(
            "apply_overlay(base)", base, "must be a dict", "pass the request dict to patch"
        )
    _check_structure(overlay, "overlay")
    if _resolve:
        _resolve_into(base, overlay)
    else:
        _accumulate_into(base, overlay)


def _resolved(value: Any) -> Any:
    """Deep copy of an overlay value with every operator key in it resolved."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        _resolve_into(out, value)
        return out
    if isinstance(value, list):
        return [_resolved(v) for v in value]
    return copy.deepcopy(value)


def _resolve_into(base: dict[str, Any], overlay: dict[str, Any]) -> None:
    for key, value in overlay.items():
        op, field, on = _parse_key(key)
        if op == _DEL:
            base.pop(field, None)
        elif op == _PUT:
            base[field] = _resolved(value)
        elif op == _JOIN:
            assert on is not None  # the JOIN regex always captures it
            _join_into(base, field, on, value)
        else:
            current = base.get(field)
            if isinstance(current, dict) and isinstance(value, dict):
                _resolve_into(current, value)
            elif isinstance(current, list) and isinstance(value, list):
                current.extend(_resolved(v) for v in value)
            else:
                base[field] = _resolved(value)


def _join_into(base: dict[str, Any], field: str, on: str, items: list[dict[str, Any]]) -> None:
    if field not in base:
        base[field] = _resolved(items)
        return
    current = base[field]
    if not isinstance(current, list) or not all(isinstance(v, dict) for v in current):
        raise TypeError(
            f"JOIN({field!r}, on={on!r}) needs the base value of {field!r} to be a list of "
            f"dicts, got {current!r}. Fix: use PUT({field!r}) to replace it, or a plain "
            f"{field!r} key to append"
        )
    for item in items:
        # Items without the key field never match (e.g. a toleration with no "key"): append.
        match = next(
            (c for c in current if on in item and on in c and c[on] == item[on]),
            None,
        )
        if match is None:
            current.append(_resolved(item))
        else:
            _resolve_into(match, item)


def _accumulated(value: Any) -> Any:
    """Deep copy of an overlay value, normalized to one entry per field in every dict."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        _accumulate_into(out, value)
        return out
    if isinstance(value, list):
        return [_accumulated(v) for v in value]
    return copy.deepcopy(value)


def _accumulate_into(base: dict[str, Any], overlay: dict[str, Any]) -> None:
    """Merges ``overlay`` into a stored overlay ``base`` keeping operator keys, such that
    resolving the result equals resolving the two overlays one after the other (exactly so
    for plain overlays; for operators, the last one on a field wins)."""
    for key, value in overlay.items():
        op, field, _ = _parse_key(key)
        existing = [k for k in base if _parse_key(k).field == field]
        if op is not None:
            for k in existing:
                del base[k]
            base[key] = _accumulated(value)
            continue
        if not existing:
            base[key] = _accumulated(value)
            continue
        # Accumulation keeps one entry per field; a hand-written dict may hold more, in which
        # case the last one (the one applied last) is the one to merge into.
        old_key = existing[-1]
        old_op = _parse_key(old_key).op
        old = base[old_key]
        if old_op == _DEL or (old_op == _JOIN and not isinstance(value, list)):
            # After DEL (or a JOIN'ed list overwritten by a non-list) the field is exactly
            # `value`, whatever the base held: that is a PUT.
            del base[old_key]
            base[PUT(field)] = _accumulated(value)
        elif isinstance(old, dict) and isinstance(value, dict):
            _accumulate_into(old, value)
        elif isinstance(old, list) and isinstance(value, list):
            old.extend(_accumulated(value))
        elif old_op is None and isinstance(value, (dict, list)):
            # `value` overwrites `old` outright, but as a plain key it would merge into (or
            # append to) a dict/list already in the base: PUT keeps the one-after-the-other
            # meaning.
            del base[old_key]
            base[PUT(field)] = _accumulated(value)
        else:
            base[old_key] = _accumulated(value)


# ---------------------------------------------------------------------------------------------
# set_overlay / get_overlay
# ---------------------------------------------------------------------------------------------


def _check_target(target: object, namespace: object, kind: object, fn: str) -> dict[str, Any]:
    from anylaunch.specs.api import AppDef, Role

    if not isinstance(target, (AppDef, Role)):
        raise InvalidSpecError(
            f"{fn}(target)",
            target,
            "overlays attach to an AppDef or a Role",
            "pass the AppDef or one of its app.roles",
        )
    for arg, val, example in (("namespace", namespace, "kubernetes"), ("kind", kind, "V1Pod")):
        if not isinstance(val, str) or not val.strip():
            raise InvalidSpecError(
                f"{fn}({arg})",
                val,
                "must be a non-empty str",
                f"pass the scheduler's {arg}, e.g. {example!r}",
            )
    if not isinstance(target.metadata, dict):
        raise InvalidSpecError(
            f"{type(target).__name__}.metadata",
            target.metadata,
            "must be a dict",
            "set metadata to a dict (or leave it at its default)",
        )
    # AppDef.metadata is annotated dict[str, str] but overlays store nested dicts in it.
    metadata: dict[str, Any] = target.metadata
    return metadata


def _load_namespace(namespace: str, path: str) -> dict[str, Any]:
    """Loads a file-backed namespace (``metadata[namespace]`` is a path or fsspec URI)."""
    try:
        import fsspec

        with fsspec.open(path, "rt", encoding="utf-8") as f:
            text = f.read()
        if path.lower().endswith((".yaml", ".yml")):
            data = _load_yaml(text)
        else:
            import json

            try:
                data = json.loads(text)
            except json.JSONDecodeError:
                data = _load_yaml(text)
    except Exception as e:
        raise InvalidOverlayError(
            f"metadata[{namespace!r}]",
            path,
            f"could not load the overlay file ({type(e).__name__}: {e})",
            "point it at a readable JSON or YAML file (a local path or an fsspec URI such as "
            "file:///abs/overlays.yaml) holding a mapping of kind -> overlay",
        ) from e
    if data is None:  # an empty file
        return {}
    if not isinstance(data, dict):
        raise InvalidOverlayError(
            f"metadata[{namespace!r}]",
            path,
            f"the file holds a {type(data).__name__}, not a mapping",
            "write a mapping of kind -> overlay, e.g. {'V1Pod': {'spec': {...}}}",
        )
    return data


def _load_yaml(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


def set_overlay(target: AppDef | Role, namespace: str, kind: str, overlay: _Overlay) -> None:
    """Store an overlay in ``target.metadata[namespace][kind]``.

    Multiple calls for the same (namespace, kind) accumulate via :func:`apply_overlay` (dicts
    merge, lists append). Use :func:`PUT`, :func:`JOIN` and :func:`DEL` in the overlay dict to
    control per-field behavior; for the same field the last operator wins. If
    ``metadata[namespace]`` names a file, its content is loaded and stored inline first.

    >>> from anylaunch.specs import Role
    >>> from anylaunch.specs.overlays import set_overlay, get_overlay, PUT
    >>> role = Role(name="trainer", image="my-image", entrypoint="train.py")
    >>> set_overlay(role, "kubernetes", "V1Pod", {"spec": {"tolerations": [{"key": "a"}]}})
    >>> set_overlay(role, "kubernetes", "V1Pod", {"spec": {PUT("tolerations"): []}})
    >>> role.metadata
    {'kubernetes': {'V1Pod': {'spec': {'$put(tolerations)': []}}}}

    Args:
        target: the AppDef or Role to attach the overlay to
        namespace: scheduler namespace (e.g., ``"kubernetes"``, ``"mast"``)
        kind: scheduler struct type (e.g., ``"V1Pod"``, ``"HpcJobDefinition"``)
        overlay: the fields to patch into the scheduler's request

    Raises:
        InvalidSpecError: if the target, namespace or kind is invalid.
        InvalidOverlayError: if the overlay is malformed.
    """
    metadata = _check_target(target, namespace, kind, "set_overlay")
    _check_structure(overlay, f"{namespace}/{kind} overlay")
    ns = metadata.get(namespace)
    if ns is None:
        ns = metadata[namespace] = {}
    elif isinstance(ns, str):
        ns = metadata[namespace] = _load_namespace(namespace, ns)
    elif not isinstance(ns, dict):
        raise InvalidSpecError(
            f"metadata[{namespace!r}]",
            ns,
            "must be a dict of kind -> overlay or a file path/URI",
            f"remove it or replace it with {{{kind!r}: {{...}}}}",
        )
    stored = ns.setdefault(kind, {})
    if not isinstance(stored, dict):
        raise InvalidOverlayError(
            f"metadata[{namespace!r}][{kind!r}]",
            stored,
            "an overlay must be a dict",
            "remove the entry so set_overlay can store the overlay",
        )
    apply_overlay(stored, overlay, _resolve=False)


def _looks_like_kind(key: object) -> bool:
    """Kinds are CapWords type names (V1Pod, JobSpec); overlay fields start lowercase."""
    return isinstance(key, str) and key[:1].isupper()


def get_overlay(target: AppDef | Role, namespace: str, kind: str) -> _Overlay:
    """Retrieve overlay from ``target.metadata[namespace][kind]``.

    Returns ``{}`` if not found. If ``metadata[namespace]`` is a string, it is loaded as a
    file path or URI via fsspec (JSON, or YAML for ``.yaml``/``.yml`` or non-JSON text).
    Returns a deep copy: callers may mutate it.

    For backwards compatibility, if ``kind`` is not a key in ``metadata[namespace]`` and no key
    there looks like a kind name (CapWords, e.g. ``V1Job``), the entire namespace dict is
    returned as a flat overlay (with a DeprecationWarning).

    >>> from anylaunch.specs import Role
    >>> from anylaunch.specs.overlays import get_overlay
    >>> role = Role(name="trainer", image="my-image", entrypoint="train.py")
    >>> get_overlay(role, "kubernetes", "V1Pod")
    {}
    >>> role.metadata["kubernetes"] = {"V1Pod": {"spec": {"hostIPC": True}}}
    >>> get_overlay(role, "kubernetes", "V1Pod")
    {'spec': {'hostIPC': True}}

    Raises:
        InvalidSpecError: if the target, namespace or kind is invalid.
        InvalidOverlayError: if a file-backed namespace cannot be loaded or the stored overlay
            is not a dict.
    """
    metadata = _check_target(target, namespace, kind, "get_overlay")
    ns = metadata.get(namespace)
    if ns is None:
        return {}
    if isinstance(ns, str):
        ns = _load_namespace(namespace, ns)
    if not isinstance(ns, dict):
        raise InvalidOverlayError(
            f"metadata[{namespace!r}]",
            ns,
            "must be a dict of kind -> overlay or a file path/URI",
            f"replace it with {{{kind!r}: {{...}}}}",
        )
    if kind not in ns:
        if not ns or any(_looks_like_kind(key) for key in ns):
            # the namespace holds overlays of other kinds (V1Job, ...): none for this kind
            return {}
        warnings.warn(
            f"metadata[{namespace!r}] has no {kind!r} key: using the whole namespace as the "
            f"{kind} overlay. This flat layout is deprecated; store it under "
            f"metadata[{namespace!r}][{kind!r}] (set_overlay does this)",
            DeprecationWarning,
            stacklevel=2,
        )
        return copy.deepcopy(ns)
    overlay = ns[kind]
    if not isinstance(overlay, dict):
        raise InvalidOverlayError(
            f"metadata[{namespace!r}][{kind!r}]",
            overlay,
            "an overlay must be a dict",
            "store it with set_overlay(target, namespace, kind, {...})",
        )
    return copy.deepcopy(overlay)


# ---------------------------------------------------------------------------------------------
# validate_overlay
# ---------------------------------------------------------------------------------------------


def validate_overlay(
    overlay: dict[str, Any],
    *,
    blocklist: list[str] | None = None,
    forbidden_keys: set[str] | None = None,
    overlay_name: str = "overlay",
    suggestion: str = "",
) -> None:
    """Validate that overlay doesn't contain disallowed keys.

    Used by scheduler authors to guard against user error. Operator keys (e.g. ``PUT("env")``)
    are resolved to their field name before checking. A blocklist entry without a dot matches
    that key at any depth (inside dicts and dicts in lists); one with dots (``"spec.containers"``)
    matches that exact path. ``forbidden_keys`` are checked at the top level only.

    >>> from anylaunch.specs.overlays import validate_overlay

    >>> # "env" is blocklisted — should be set via Role.env
    >>> try:
    ...     validate_overlay(
    ...         {"env": {"FOO": "bar"}, "nodeSelector": {"gpu": "true"}},
    ...         blocklist=["env", "command"],
    ...         overlay_name="PodSpec",
    ...     )
    ... except ValueError as e:
    ...     "env" in str(e)
    True

    Args:
        overlay: the overlay to check
        blocklist: keys that should be set via Role/AppDef attributes
        forbidden_keys: keys that belong to a different overlay type
        overlay_name: overlay type name for error messages
        suggestion: hint appended to the fix

    Raises:
        InvalidOverlayError: (a ValueError) if validation fails.
    """
    _check_structure(overlay, overlay_name)
    for arg, given in (("blocklist", blocklist), ("forbidden_keys", forbidden_keys)):
        if isinstance(given, str):  # list("env") would silently check 'e', 'n', 'v'
            raise InvalidSpecError(
                f"validate_overlay({arg})",
                given,
                "must be a collection of str",
                f"pass [{given!r}]",
            )
    names = list(blocklist or [])
    forbidden = set(forbidden_keys or ())
    for entry in [*names, *forbidden]:
        if not isinstance(entry, str) or not entry:
            raise InvalidSpecError(
                "validate_overlay(blocklist/forbidden_keys)",
                entry,
                "entries must be non-empty str",
                "list field names such as 'env' or paths such as 'spec.containers'",
            )
    hint = f" {suggestion}" if suggestion else ""
    # "overlay" (the default name) must not read as "overlay overlay"
    label = overlay_name if overlay_name.lower().endswith("overlay") else f"{overlay_name} overlay"
    for key in overlay:
        field = _parse_key(key).field
        if field in forbidden:
            raise InvalidOverlayError(
                f"{label} key",
                key,
                f"{field!r} belongs to a different overlay type, not {overlay_name}",
                f"remove {key!r} from the {label}.{hint}",
            )
    anywhere = {b for b in names if "." not in b}
    exact = {b for b in names if "." in b}
    if anywhere or exact:
        _check_blocklist(overlay, anywhere, exact, label, hint, "", "")


def _check_blocklist(
    value: Any,
    anywhere: set[str],
    exact: set[str],
    label: str,
    hint: str,
    path: str,  # dotted field names, matched against `exact`
    shown: str,  # the same with list indices, for the message
) -> None:
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_blocklist(item, anywhere, exact, label, hint, path, f"{shown}[{i}]")
        return
    if not isinstance(value, dict):
        return
    for key, sub in value.items():
        field = _parse_key(key).field
        sub_path = _join_path(path, field)
        sub_shown = _join_path(shown, field)
        if field in anywhere or sub_path in exact:
            written = f" (written as {key!r})" if key != field else ""
            raise InvalidOverlayError(
                f"{label} key",
                sub_shown,
                f"{field!r}{written} is set by anylaunch and must not be overridden in the {label}",
                f"remove it from the overlay and set it through the Role/AppDef field instead.{hint}",
            )
        _check_blocklist(sub, anywhere, exact, label, hint, sub_path, sub_shown)
