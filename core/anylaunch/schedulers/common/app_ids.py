"""App ids for schedulers that make their own: ``{sanitized app name}-{8 random chars}``.

Stdlib only and cheap to import: ``local_cwd``'s supervisor and fork-server load it with
``python -S -E``.
"""

from __future__ import annotations

import os
import re

__all__ = ["is_valid_app_id", "make_app_id", "random_suffix", "sanitize_app_name"]

_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
_APP_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_MAX_NAME = 40


def sanitize_app_name(name: str) -> str:
    """Turns an app name into the name part of an app id (no ``/``, whitespace or quotes).

    >>> sanitize_app_name("my train/v2 ")
    'my-train-v2'
    >>> sanitize_app_name("../..")
    'app'
    """
    cleaned = _UNSAFE.sub("-", name).strip("-.")[:_MAX_NAME].strip("-.")
    return cleaned or "app"


def make_app_id(app_name: str) -> str:
    """Returns ``{sanitized app name}-{8 random lowercase alphanumerics}``.

    >>> app_id = make_app_id("echo hello")
    >>> app_id[:11], len(app_id), is_valid_app_id(app_id)
    ('echo-hello-', 19, True)
    """
    return f"{sanitize_app_name(app_name)}-{random_suffix()}"


def random_suffix(length: int = 8) -> str:
    """``length`` (at most 12) random lowercase alphanumerics, which make a name unique.

    >>> suffix = random_suffix(6)
    >>> len(suffix), suffix.isalnum() and suffix == suffix.lower()
    (6, True)
    """
    # base-36 digits of a random 64-bit number (one system call; the bias is ~1e-7)
    number = int.from_bytes(os.urandom(8), "big")
    digits = []
    for _ in range(length):
        number, digit = divmod(number, len(_ALPHABET))
        digits.append(_ALPHABET[digit])
    return "".join(digits)


def is_valid_app_id(app_id: object) -> bool:
    """True if ``app_id`` could name an app directory (no path separators, no leading dot).

    >>> is_valid_app_id("echo-ab12cd34"), is_valid_app_id("../etc"), is_valid_app_id(".tmp")
    (True, False, False)
    """
    return isinstance(app_id, str) and bool(_APP_ID.match(app_id))
