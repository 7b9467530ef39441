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

Operator keys are plain strings in TorchX's format (``PUT("x") == "__put__:x"``,
``JOIN("x", on="k") == "__join__:x:k"``, ``DEL("x") == "__del__:x"``), so overlays survive
JSON/YAML and can live in files; the earlier ``"$put(x)"`` spelling is still read. They are
stored as-is and resolved when the scheduler calls :func:`apply_overlay` at submit time.

None vs DEL vs missing key:

- key missing from the overlay: the field is untouched in the base;
- ``"field": None``: the field is set to None/null ("present but null");
- ``DEL("field"): None``: the field is removed from the base ("not sent").

Scheduler authors declare each overlay surface once with :class:`OverlaySpec` and use
:func:`validate_overlay` and :func:`apply_overlay` at submit time.
"""

from __future__ import annotations

import copy
import logging
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from anylaunch.specs.checks import check_type
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.overlay_apply import accumulated, apply_overlay, check_structure
from anylaunch.specs.overlay_files import load_namespace
from anylaunch.specs.overlay_keys import (
    DEL,
    JOIN,
    PUT,
    InvalidOverlayError,
    OverlayTypeError,
    ParsedKey,
    parse_key,
)
from anylaunch.specs.overlay_validate import validate_overlay

if TYPE_CHECKING:
    from anylaunch.specs.api import AppDef, Role

_Overlay = dict[str, Any]

logger: logging.Logger = logging.getLogger(__name__)

__all__ = [
    "DEL",
    "FORMAT_KEY",
    "JOIN",
    "PUT",
    "InvalidOverlayError",
    "OverlaySpec",
    "OverlayTypeError",
    "apply_overlay",
    "get_overlay",
    "set_overlay",
    "validate_overlay",
]

#: Marker :func:`set_overlay` stamps into ``metadata[namespace]``: the namespace dict holds
#: ``{kind: overlay}``, so :func:`get_overlay` never reads it as one flat overlay. TorchX's
#: marker (``"__torchx_overlays__"``) is recognised too.
FORMAT_KEY = "__anylaunch_overlays__"
_FORMAT_KEYS = (FORMAT_KEY, "__torchx_overlays__")


def _parse_key(key: str, path: str = "") -> ParsedKey:
    """Parses an overlay key into (op, field, on); see :func:`overlay_keys.parse_key`."""
    return parse_key(key, path)


def _check_kind_arg(value: object, arg: str, where: str) -> str:
    example = "kubernetes" if arg == "namespace" else "V1Pod"
    if not isinstance(value, str) or not value.strip():
        raise InvalidSpecError(
            f"{where}({arg})",
            value,
            "must be a non-empty str",
            f"pass the scheduler's {arg}, e.g. {example!r}",
        )
    if arg == "kind" and value in _FORMAT_KEYS:
        raise InvalidSpecError(
            f"{where}(kind)",
            value,
            "is reserved for the nested-format marker",
            "pass the request struct's name, e.g. 'V1Pod'",
        )
    return value


def _check_target(target: object, namespace: object, kind: object, fn: str) -> dict[str, Any]:
    from anylaunch.specs.api import AppDef, Role

    if not isinstance(target, (AppDef, Role)):
        raise InvalidSpecError(
            f"{fn}(target)",
            type(target).__name__,
            "overlays attach to an AppDef or a Role",
            "pass the AppDef or one of its app.roles",
        )
    _check_kind_arg(namespace, "namespace", fn)
    _check_kind_arg(kind, "kind", fn)
    check_type(
        f"{type(target).__name__}.metadata",
        target.metadata,
        dict,
        "must be a dict",
        "set metadata to a dict (or leave it at its default)",
    )
    # AppDef.metadata is annotated dict[str, str] but overlays store nested dicts in it.
    metadata: dict[str, Any] = target.metadata
    return metadata


def _stored_namespace(
    metadata: dict[str, Any], namespace: str, action: str
) -> dict[str, Any] | None:
    """``metadata[namespace]`` as a dict (a file path or URI is loaded), None if unset. Any
    other value holds no overlays: as in TorchX, it is ignored with a warning (``get_overlay``
    finds nothing, ``set_overlay`` replaces it)."""
    ns = metadata.get(namespace)
    if ns is None:
        return None
    if isinstance(ns, str):
        return load_namespace(namespace, ns)
    if not isinstance(ns, dict):
        logger.warning(
            "metadata[%r] holds a %s, not a dict of kind -> overlay (nor a file path/URI): "
            "%s. Store overlays with set_overlay(target, %r, kind, {...})",
            namespace,
            type(ns).__name__,
            action,
            namespace,
        )
        return None
    stored: dict[str, Any] = ns
    return stored


def _stored_overlay(ns: dict[str, Any], namespace: str, kind: str, fix: str) -> _Overlay:
    """The overlay stored under ``kind`` in the namespace dict ``ns`` (``{}`` if none)."""
    overlay = ns.get(kind, {})
    check_type(
        f"metadata[{namespace!r}][{kind!r}]",
        overlay,
        dict,
        "an overlay must be a dict",
        fix,
        error=InvalidOverlayError,
    )
    stored: _Overlay = overlay
    return stored


def set_overlay(target: AppDef | Role, namespace: str, kind: str, overlay: _Overlay) -> None:
    """Store an overlay in ``target.metadata[namespace][kind]``.

    Multiple calls for the same (namespace, kind) accumulate via :func:`apply_overlay` (dicts
    merge, lists append). Use :func:`PUT`, :func:`JOIN` and :func:`DEL` in the overlay dict to
    control per-field behavior: for the same field the last PUT or DEL wins, and repeated JOINs
    accumulate. The stored overlay keeps one entry per field, with operator keys in TorchX's
    format. The namespace dict is stamped with :data:`FORMAT_KEY`. If ``metadata[namespace]``
    names a file, its content is loaded and stored inline first; any other non-dict value
    there (or a non-dict under ``kind``) holds no overlay and is replaced, with a logged
    warning, as in TorchX.

    >>> from anylaunch.specs import Role
    >>> from anylaunch.specs.overlays import set_overlay, get_overlay, JOIN, PUT
    >>> role = Role(name="trainer", image="my-image", entrypoint="train.py")
    >>> set_overlay(role, "kubernetes", "V1Pod", {"spec": {"tolerations": [{"key": "a"}]}})
    >>> set_overlay(role, "kubernetes", "V1Pod", {"spec": {PUT("tolerations"): []}})
    >>> role.metadata
    {'kubernetes': {'__anylaunch_overlays__': True, 'V1Pod': {'spec': {'__put__:tolerations': []}}}}
    >>> set_overlay(role, "kubernetes", "V1Job", {JOIN("c", on="n"): [{"n": 1, "x": 1}]})
    >>> set_overlay(role, "kubernetes", "V1Job", {JOIN("c", on="n"): [{"n": 1, "y": 2}]})
    >>> get_overlay(role, "kubernetes", "V1Job")
    {'__join__:c:n': [{'n': 1, 'x': 1, 'y': 2}]}

    Args:
        target: the AppDef or Role to attach the overlay to
        namespace: scheduler namespace (e.g., ``"kubernetes"``, ``"mast"``)
        kind: scheduler struct type (e.g., ``"V1Pod"``, ``"HpcJobDefinition"``)
        overlay: the fields to patch into the scheduler's request

    Raises:
        InvalidSpecError: (a ValueError) if the target, namespace or kind is invalid (``kind``
            must not be the reserved :data:`FORMAT_KEY`).
        InvalidOverlayError: (a ValueError) if the overlay is malformed.
        OverlayTypeError: (a TypeError) if a JOIN value is not a list of dicts, or the overlay
            does not fit the type of what is stored (e.g. a dict where a list is stored).
    """
    metadata = _check_target(target, namespace, kind, "set_overlay")
    check_structure(overlay, f"{namespace}/{kind} overlay")
    ns = _stored_namespace(metadata, namespace, "replacing it with the overlays' dict")
    if ns is None:
        ns = {}
    stored: _Overlay = ns.get(kind, {})
    if not isinstance(stored, dict):  # TorchX replaces it too (silently)
        logger.warning(
            "metadata[%r][%r] holds a %s, not an overlay dict: replacing it",
            namespace,
            kind,
            type(stored).__name__,
        )
        stored = {}
    check_structure(stored, f"metadata[{namespace!r}][{kind!r}]")
    # Build the new overlay aside: if it does not fit what is stored, nothing changes.
    merged = accumulated(stored)
    apply_overlay(merged, overlay, _resolve=False)
    metadata[namespace] = ns
    ns[FORMAT_KEY] = True
    ns[kind] = merged


def _looks_like_kind(key: object) -> bool:
    """Kinds are CapWords type names (V1Pod, JobSpec); overlay fields start lowercase."""
    return isinstance(key, str) and key[:1].isupper()


def _is_flat_overlay(ns: dict[str, Any]) -> bool:
    """A namespace dict that is itself one overlay (TorchX's legacy flat layout
    ``metadata[namespace] = {field: ...}``), not a ``{kind: overlay}`` dict.

    TorchX's rule: any non-empty dict, unless it has several keys that all hold dicts (those
    are kinds). Ours adds: never a dict :func:`set_overlay` marked, nor one with a key named
    like a kind (a lone ``{"V1Job": {...}}`` is no V1Pod overlay).

    >>> _is_flat_overlay({"spec": {"hostIPC": True}}), _is_flat_overlay({"V1Job": {}})
    (True, False)
    >>> _is_flat_overlay({"spec": {}, "metadata": {}}), _is_flat_overlay({"spec": {}, "x": 1})
    (False, True)
    """
    if not ns or any(ns.get(k) for k in _FORMAT_KEYS) or any(_looks_like_kind(k) for k in ns):
        return False
    return not (len(ns) > 1 and all(isinstance(v, dict) for v in ns.values()))


def get_overlay(
    target: AppDef | Role, namespace: str, kind: str, *, flat_fallback: bool = True
) -> _Overlay:
    """Retrieve overlay from ``target.metadata[namespace][kind]``.

    Returns ``{}`` if not found. If ``metadata[namespace]`` is a string, it is loaded as a
    file path or URI via fsspec (JSON, or YAML for ``.yaml``/``.yml`` or non-JSON text).
    Returns a deep copy: callers may mutate it.

    Namespace dicts written by :func:`set_overlay` carry :data:`FORMAT_KEY` and are
    nested-only: a missing ``kind`` gives ``{}``. For backwards compatibility (TorchX's legacy
    flat layout), an unmarked namespace dict without ``kind`` is returned whole as the
    overlay, with a logged warning and a DeprecationWarning, unless ``flat_fallback`` is
    False, or it looks nested: several keys that all hold dicts (TorchX's rule), or a key
    named like a kind (CapWords, e.g. ``V1Job``). A namespace that is neither a dict nor a
    file path holds no overlay: ``{}``, with a logged warning (as in TorchX).

    >>> from anylaunch.specs import Role
    >>> from anylaunch.specs.overlays import get_overlay
    >>> role = Role(name="trainer", image="my-image", entrypoint="train.py")
    >>> get_overlay(role, "kubernetes", "V1Pod")
    {}
    >>> role.metadata["kubernetes"] = {"V1Pod": {"spec": {"hostIPC": True}}}
    >>> get_overlay(role, "kubernetes", "V1Pod")
    {'spec': {'hostIPC': True}}
    >>> role.metadata["kubernetes"] = {"spec": {"hostIPC": True}}  # flat (deprecated)
    >>> get_overlay(role, "kubernetes", "V1Pod", flat_fallback=False)
    {}
    >>> role.metadata["kubernetes"] = 42  # no overlays in it
    >>> get_overlay(role, "kubernetes", "V1Pod")
    {}

    Raises:
        InvalidSpecError: (a ValueError) if the target, namespace or kind is invalid (``kind``
            must not be the reserved :data:`FORMAT_KEY`).
        InvalidOverlayError: (a ValueError) if a file-backed namespace cannot be loaded or the
            stored overlay is not a dict.
    """
    metadata = _check_target(target, namespace, kind, "get_overlay")
    ns = _stored_namespace(metadata, namespace, "no overlay is read from it")
    if ns is None:
        return {}
    if kind not in ns:
        if not flat_fallback or not _is_flat_overlay(ns):
            return {}  # the namespace holds overlays of other kinds (V1Job, ...) only
        message = (
            f"overlay kind {kind!r} not found in metadata[{namespace!r}] (keys: "
            f"{sorted(map(str, ns))}): using the whole namespace as a flat {kind} overlay. "
            f"This layout is deprecated; store it under metadata[{namespace!r}][{kind!r}] "
            f"with set_overlay(target, {namespace!r}, {kind!r}, overlay)"
        )
        logger.warning("%s", message)  # what TorchX does: seen in every log
        warnings.warn(message, DeprecationWarning, stacklevel=2)  # for test suites and -W
        return copy.deepcopy(ns)
    overlay = _stored_overlay(
        ns, namespace, kind, "store it with set_overlay(target, namespace, kind, {...})"
    )
    return copy.deepcopy(overlay)


@dataclass(frozen=True)
class OverlaySpec:
    """A scheduler's overlay surface declared once: namespace, kind and the keys users must set
    through Role/AppDef attributes instead (``blocklist``, checked as by
    :func:`validate_overlay`).

    >>> from anylaunch.specs import Role
    >>> from anylaunch.specs.overlays import OverlaySpec
    >>> V1POD = OverlaySpec("kubernetes", "V1Pod", blocklist=("command", "env"))
    >>> role = Role(name="trainer", image="img", entrypoint="train.py")
    >>> V1POD.set(role, {"spec": {"nodeSelector": {"gpu": "true"}}})
    >>> V1POD.get(role)
    {'spec': {'nodeSelector': {'gpu': 'true'}}}
    >>> V1POD.set(role, {"spec": {"containers": [{"name": "x", "env": []}]}})
    Traceback (most recent call last):
    ...
    anylaunch.specs.overlays.InvalidOverlayError: V1Pod overlay key='spec.containers[0].env' is invalid: ...

    Args:
        namespace: scheduler namespace (e.g. ``"kubernetes"``)
        kind: scheduler struct type (e.g. ``"V1Pod"``)
        blocklist: keys that must be set via Role/AppDef attributes (a list is kept as a tuple)

    Raises:
        InvalidSpecError: (a ValueError) if a field is not a non-empty str (``blocklist``: a
            collection of them).
    """

    namespace: str
    kind: str
    blocklist: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_kind_arg(self.namespace, "namespace", "OverlaySpec")
        _check_kind_arg(self.kind, "kind", "OverlaySpec")
        given: object = self.blocklist
        if isinstance(given, str) or not isinstance(given, (tuple, list, set, frozenset)):
            raise InvalidSpecError(
                "OverlaySpec.blocklist",
                given,
                "must be a tuple of field names",
                f"pass ({given!r},)" if isinstance(given, str) else "pass e.g. ('command', 'env')",
            )
        names = tuple(given)
        for name in names:
            if not isinstance(name, str) or not name:
                raise InvalidSpecError(
                    "OverlaySpec.blocklist",
                    names,
                    "entries must be non-empty str",
                    "list field names such as 'env' or paths such as 'spec.containers'",
                )
        object.__setattr__(self, "blocklist", names)

    def set(self, target: AppDef | Role, overlay: _Overlay) -> None:
        """Stores ``overlay`` with :func:`set_overlay` (it accumulates), after checking it
        against ``blocklist`` so a disallowed key fails where it is written.

        Raises:
            InvalidOverlayError: (a ValueError) if the overlay sets a blocklisted key or is
                malformed; see :func:`set_overlay` for the rest.
        """
        validate_overlay(overlay, blocklist=list(self.blocklist), overlay_name=self.kind)
        set_overlay(target, self.namespace, self.kind, overlay)

    def get(self, target: AppDef | Role) -> _Overlay:
        """The stored overlay (a copy), checked against ``blocklist``. Reads the nested format
        only (``flat_fallback=False``): never a legacy flat namespace written for another kind.

        Raises:
            InvalidOverlayError: (a ValueError) if the stored overlay sets a blocklisted key;
                see :func:`get_overlay` for the rest.
        """
        overlay = get_overlay(target, self.namespace, self.kind, flat_fallback=False)
        validate_overlay(overlay, blocklist=list(self.blocklist), overlay_name=self.kind)
        return overlay
