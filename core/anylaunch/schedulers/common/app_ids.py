"""App ids for schedulers that make their own: ``{sanitized app name}-{8 random chars}``; and
TorchX's random ids and unique names (:func:`random_uint64`, :func:`random_id`,
:func:`make_unique`, public as :mod:`anylaunch.schedulers.ids`), from the same random numbers.

The entropy comes from ``os.urandom``, so ``random.seed()`` never repeats an id. Stdlib only
and cheap to import: ``local_cwd``'s supervisor and fork-server load it with ``python -S -E``.
"""

from __future__ import annotations

import os
import re

__all__ = [
    "is_valid_app_id",
    "make_app_id",
    "make_unique",
    "random_id",
    "random_suffix",
    "random_uint64",
    "sanitize_app_name",
]

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_ALPHABET = _LETTERS + "0123456789"
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
    number = random_uint64()
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


def random_uint64() -> int:
    """Returns a random unsigned 64-bit integer (from ``os.urandom``).

    >>> 0 <= random_uint64() < 2**64
    True
    """
    return int.from_bytes(os.urandom(8), "big")


def random_id(max_length: int | None = None) -> str:
    """Returns a random id of lowercase letters and digits that starts with a letter.

    A valid Kubernetes name (an RFC 1035 label) and name part of a Slurm, LSF or Batch job. It
    spells out one :func:`random_uint64`: at most 13 characters (13 for 4 numbers in 5);
    ``max_length`` caps it, and ``max_length <= 0`` gives ``""``.

    >>> rid = random_id()
    >>> rid[0].isalpha(), rid.isalnum(), rid == rid.lower(), len(rid) <= 13
    (True, True, True, True)
    >>> len(random_id(5)), random_id(0)
    (5, '')

    Args:
        max_length: the most characters to return (``None``: no limit)

    Returns:
        the id
    """
    if max_length is not None and max_length <= 0:
        return ""
    number, digit = divmod(random_uint64(), len(_LETTERS))
    chars = [_LETTERS[digit]]
    while number and (max_length is None or len(chars) < max_length):
        number, digit = divmod(number, len(_ALPHABET))
        chars.append(_ALPHABET[digit])
    return "".join(chars)


def make_unique(name: str, string_length: int = 0) -> str:
    """Appends a random id to ``name``: ``{name}-{random_id}`` (TorchX's unique names).

    >>> unique = make_unique("echo", 6)
    >>> unique[:5], len(unique), unique != make_unique("echo", 6)
    ('echo-', 11, True)

    Args:
        name: the name to make unique
        string_length: the most characters of the random id; 0 (the default) keeps all of
            :func:`random_id` (at most 13 characters)

    Returns:
        ``{name}-{unique suffix}``
    """
    return f"{name}-{random_id(string_length or None)}"
