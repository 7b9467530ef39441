"""The ``app`` field of an AnylaunchJob block: an AppDef given as an AppDef, its dict form or
YAML text of it (see :mod:`anylaunch.specs.serialize`, which does the converting). Nothing
here imports Prefect.

>>> app = appdef_from_data('''
... name: hello
... roles:
...   - name: greeter
...     image: .
...     entrypoint: echo
...     args: [hi]
...     resource: {cpu: 1, gpu: 0, memMB: 256}
... ''')
>>> app.roles[0].entrypoint, app.roles[0].resource.memMB
('echo', 256)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from anylaunch.specs.api import AppDef
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.serialize import appdef_from_dict, appdef_from_yaml

__all__ = ["appdef_from_data"]


def appdef_from_data(value: AppDef | Mapping[str, Any] | str) -> AppDef:
    """A launchable AppDef from an AppDef (copied), its dict form, or YAML/JSON text of the
    dict form.

    >>> appdef_from_data({"name": "no-roles"})
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: AppDef.roles=[] is invalid: an app needs at least one role. Fix: ...

    Raises:
        InvalidSpecError: the value is none of these, names an unknown field (with a
            did-you-mean), has a bad value, or the app cannot be launched (e.g. no roles)
    """
    if isinstance(value, AppDef):
        app = copy.deepcopy(value)
    elif isinstance(value, str):
        app = appdef_from_yaml(value)
    elif isinstance(value, Mapping):
        app = appdef_from_dict(value)
    else:
        raise InvalidSpecError(
            "app",
            type(value).__name__,
            "must be an AppDef, a dict or YAML text of one",
            "pass e.g. {'name': 'x', 'roles': [{'name': 'r', 'image': '.', 'entrypoint': 'echo'}]}",
        )
    app.validate()
    return app
