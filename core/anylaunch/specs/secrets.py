"""The one secret policy: which env values are secret, and how they are masked.

A value is secret when its env name matches :data:`SECRET_NAME_PATTERN` or when the user
declared the name secret (``secret_env`` in the integrations, ``--secret-env`` names, config).
Every human-facing rendering (dryrun text, describe, exceptions, reprs, engine logs, metadata)
goes through :func:`mask_env` or a :class:`Redactor`; the request sent to the backend keeps the
real values. Nothing here does I/O or imports anything heavy.

>>> env = {"API_TOKEN": "s3cr3t-value", "DB_PASS": "hunter22", "LR": "0.1"}
>>> mask_env(env)
{'API_TOKEN': '***', 'DB_PASS': '***', 'LR': '0.1'}
>>> Redactor.for_env(env)("login with s3cr3t-value / hunter22 at lr 0.1")
'login with *** / *** at lr 0.1'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "MASK",
    "MIN_SECRET_LEN",
    "SECRET_NAME_PATTERN",
    "Redactor",
    "app_redactor",
    "is_secret_env_name",
    "mask_env",
    "secret_values",
]

#: What a masked value is shown as.
MASK = "***"
#: Shortest secret value masked inside free text: masking every "a" would make logs unreadable.
#: (Whole values in an env mapping are masked whatever their length.)
MIN_SECRET_LEN = 3
#: Env names whose values are secret whatever the user declared (searched, case-insensitive).
SECRET_NAME_PATTERN = re.compile(r"TOKEN|SECRET|PASS|PWD|KEY|CREDENTIAL|AUTH", re.IGNORECASE)


def is_secret_env_name(name: str, declared: Iterable[str] = ()) -> bool:
    """True if the value of env var ``name`` is secret (never printed).

    >>> is_secret_env_name("HF_TOKEN"), is_secret_env_name("aws_secret_access_key")
    (True, True)
    >>> is_secret_env_name("LR"), is_secret_env_name("LR", declared=["LR"])
    (False, True)
    """
    return name in set(declared) or bool(SECRET_NAME_PATTERN.search(name))


def secret_values(env: Mapping[str, str], declared: Iterable[str] = ()) -> list[str]:
    """The values of ``env`` that are secret, for a :class:`Redactor`.

    >>> secret_values({"API_KEY": "k-123", "HOME": "/root", "X": "y"}, declared=["X"])
    ['k-123', 'y']
    """
    names = set(declared)
    return [str(v) for k, v in env.items() if is_secret_env_name(str(k), names)]


def mask_env(env: Mapping[str, str], declared: Iterable[str] = ()) -> dict[str, str]:
    """A copy of ``env`` with every secret value replaced by :data:`MASK`.

    >>> mask_env({"PASSWORD": "", "USER": "me"})
    {'PASSWORD': '***', 'USER': 'me'}
    """
    names = set(declared)
    return {k: MASK if is_secret_env_name(str(k), names) else v for k, v in env.items()}


class Redactor:
    """Replaces every secret value inside a text with :data:`MASK`.

    Values shorter than :data:`MIN_SECRET_LEN` are not masked inside text. A secret that
    contains another is masked whole (longest first). The repr never shows a value.

    >>> redact = Redactor(["s3cr3t-token", "", "ab"])
    >>> redact("token=s3cr3t-token ab")
    'token=*** ab'
    >>> bool(redact), bool(Redactor([])), redact
    (True, False, Redactor(<1 secret>))
    >>> (redact | Redactor(["other-secret"]))("s3cr3t-token other-secret")
    '*** ***'
    >>> import json  # a secret quoted inside JSON is masked as JSON spells it
    >>> Redactor(['pa"ss-word1'])(json.dumps({"msg": 'pa"ss-word1'}))
    '{"msg": "***"}'
    """

    __slots__ = ("_pattern", "_secrets")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = tuple(
            sorted(
                {str(s) for s in secrets if len(str(s)) >= MIN_SECRET_LEN}, key=len, reverse=True
            )
        )
        # a secret quoted inside JSON (a structured error, an event) is escaped there: mask
        # that spelling too
        import json

        forms = {f for s in self._secrets for f in (s, json.dumps(s)[1:-1])}
        # one alternation (longest first) scans the text once however many secrets there are
        self._pattern = (
            re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))
            if forms
            else None
        )

    @classmethod
    def for_env(cls, env: Mapping[str, str], declared: Iterable[str] = ()) -> Redactor:
        """A redactor for the secret values of ``env`` (see :func:`secret_values`)."""
        return cls(secret_values(env, declared))

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MASK, text)

    def __or__(self, other: Redactor) -> Redactor:
        return Redactor((*self._secrets, *other._secrets))

    def __bool__(self) -> bool:
        return bool(self._secrets)

    @property
    def values(self) -> tuple[str, ...]:
        """The secret values masked (longest first), for an engine's own masker to register
        (e.g. Airflow's ``mask_secret``). Never log them."""
        return self._secrets

    def __repr__(self) -> str:
        n = len(self._secrets)
        return f"Redactor(<{n} secret{'' if n == 1 else 's'}>)"


def app_redactor(app: Any, declared: Iterable[str] = ()) -> Redactor:
    """A redactor for the secret env values of every role of ``app`` (an AppDef).

    >>> from anylaunch.specs.api import AppDef, Role
    >>> app = AppDef("a", [Role("w", image="i", entrypoint="e", env={"DB_URL": "pg://u:pw@h"})])
    >>> app_redactor(app, declared=["DB_URL"])("connecting to pg://u:pw@h")
    'connecting to ***'
    """
    names = set(declared)
    values: list[str] = []
    for role in getattr(app, "roles", ()):
        values += secret_values(getattr(role, "env", {}), names)
    return Redactor(values)
