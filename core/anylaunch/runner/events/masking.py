"""What an event may carry: its run options, metadata and text under the secret policy.

Options and metadata keys are judged by :func:`~anylaunch.specs.secrets.is_secret_env_name`
(as a misspelt option's value is in a run-option error); free text (the exception, the
traceback, ``detail``) and every value are also passed through the app's
:class:`~anylaunch.specs.secrets.Redactor` when the app is known.

>>> masked_runcfg({"log_dir": "/tmp", "api_token": "t0k3n", "opts": {"DB_PASS": "pw-1"}})
'{"log_dir": "/tmp", "api_token": "***", "opts": {"DB_PASS": "***"}}'
>>> masked_runcfg('not json')
'***'
>>> masked_metadata({"team": "ml", "hf_token": "abc"})
{'team': 'ml', 'hf_token': '***'}
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from anylaunch.runner.events.api import AnylaunchEvent
from anylaunch.specs.secrets import MASK, Redactor, is_secret_env_name

__all__ = ["mask_event", "masked_metadata", "masked_runcfg"]

#: Deepest nesting of an option's value that is walked (deeper values are masked whole).
_MAX_DEPTH = 8
#: The fields of free text an exception or an action can fill.
_TEXT_FIELDS = (
    "raw_exception",
    "exception_message",
    "exception_source_location",
    "detail",
    "workspace",
    "app_image",
)


def _masked(value: Any, depth: int = 0) -> Any:
    """``value`` with every secret-named key's value masked, and ``KEY=VALUE`` strings in
    lists masked by their key (how env-like options are written)."""
    if depth > _MAX_DEPTH:
        return MASK
    if isinstance(value, Mapping):
        return {
            str(k): MASK if is_secret_env_name(str(k)) else _masked(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_masked(v, depth + 1) for v in value]
    if isinstance(value, str) and "=" in value:
        key = value.split("=", 1)[0]
        if key.strip() and is_secret_env_name(key.strip()):
            return f"{key}={MASK}"
    return value


def masked_runcfg(
    cfg: Mapping[str, Any] | str | None, redact: Redactor | None = None
) -> str | None:
    """The run options as an event's ``runcfg``: a JSON object whose secret options are
    masked. Text that is not a JSON object cannot be judged, and is masked whole."""
    if cfg is None:
        return None
    if isinstance(cfg, str):
        try:
            cfg = json.loads(cfg)
        except ValueError:
            return MASK
        if not isinstance(cfg, Mapping):
            return MASK
    text = json.dumps(_masked(cfg), default=str)
    return redact(text) if redact is not None else text


def masked_metadata(
    metadata: Mapping[str, Any] | None, redact: Redactor | None = None
) -> dict[str, str] | None:
    """The app's metadata as an event's ``app_metadata``: values as text, secret keys'
    values masked."""
    if metadata is None:
        return None
    shown: dict[str, str] = {}
    for key, value in _masked(dict(metadata)).items():
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        shown[key] = redact(text) if redact is not None else text
    return shown


def mask_event(event: AnylaunchEvent, redact: Redactor | None = None) -> AnylaunchEvent:
    """A copy of ``event`` fit for a handler: options and metadata masked by key, and (with
    ``redact``) every text field redacted of the app's secret values.

    >>> event = AnylaunchEvent("s", "k", "schedule", runcfg='{"token": "x"}',
    ...                        exception_message="bad value s3cr3t")
    >>> shown = mask_event(event, Redactor(["s3cr3t"]))
    >>> shown.runcfg, shown.exception_message
    ('{"token": "***"}', 'bad value ***')
    """
    changes: dict[str, Any] = {
        "runcfg": masked_runcfg(event.runcfg, redact),
        "app_metadata": masked_metadata(event.app_metadata, redact),
    }
    if redact:
        for name in _TEXT_FIELDS:
            value = getattr(event, name)
            if isinstance(value, str):
                changes[name] = redact(value)
    return dataclasses.replace(event, **changes)
