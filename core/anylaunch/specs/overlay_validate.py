"""Validating overlays against fields a scheduler sets itself (:func:`validate_overlay`).

Import it from :mod:`anylaunch.specs.overlays`.
"""

from __future__ import annotations

from typing import Any

from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.overlay_apply import check_structure
from anylaunch.specs.overlay_keys import InvalidOverlayError, join_path, parse_key

__all__ = ["validate_overlay"]


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
    check_structure(overlay, overlay_name)
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
        field = parse_key(key).field
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
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_blocklist(item, anywhere, exact, label, hint, path, f"{shown}[{i}]")
        return
    if not isinstance(value, dict):
        return
    for key, sub in value.items():
        field = parse_key(key).field
        sub_path = join_path(path, field)
        sub_shown = join_path(shown, field)
        if field in anywhere or sub_path in exact:
            written = f" (written as {key!r})" if key != field else ""
            raise InvalidOverlayError(
                f"{label} key",
                sub_shown,
                f"{field!r}{written} is set by anylaunch and must not be overridden in the {label}",
                f"remove it from the overlay and set it through the Role/AppDef field instead.{hint}",
            )
        _check_blocklist(sub, anywhere, exact, label, hint, sub_path, sub_shown)
