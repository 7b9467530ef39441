"""What every backend asks of a role and keeps of it: no NUL byte in what a process gets, a
container image reference where replicas run in containers, the rank-0 host variable, and the
role's record (the plain data a backend stores with an app to describe it later).

Backends import these from here (never from another backend's package), so each rule has one
definition and one answer for the same input.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from anylaunch.specs.api import Role
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.secrets import is_secret_env_name, mask_env

__all__ = [
    "CONTROL_CHAR",
    "RANK0_ENV",
    "check_image_ref",
    "check_no_nul",
    "check_role_no_nul",
    "role_from_record",
    "role_record",
]


#: The env var through which replicas of backends without DNS for rank 0 find its host.
RANK0_ENV = "ANYLAUNCH_RANK0_HOST"
#: A control character (C0 or DEL), which no job path or job name a backend writes may hold.
CONTROL_CHAR = re.compile(r"[\x00-\x1f\x7f]")


def check_no_nul(field: str, value: str, secret: bool = False) -> None:
    """Raises if ``value`` holds a NUL byte, which no process argument, env value or job
    script can carry. The error never quotes a ``secret`` value.

    >>> check_no_nul("Role[w].args[0]", "ok")
    >>> check_no_nul("Role[w].env[API_TOKEN]", "s3cr3t\\x00", secret=True)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Role[w].env[API_TOKEN]='<secret, 7 characters>' is invalid: contains a NUL byte (at index 6), which no process argument, env value or job script can carry. Fix: remove the NUL byte
    """
    index = value.find("\x00")
    if index < 0:
        return
    shown: object = f"<secret, {len(value)} characters>" if secret else value
    raise InvalidSpecError(
        field,
        shown,
        f"contains a NUL byte (at index {index}), which no process argument, env value or "
        "job script can carry",
        "remove the NUL byte",
    )


def check_role_no_nul(role: Role) -> None:
    """Rejects a role whose entrypoint, args or env values hold a NUL byte (no backend can
    carry one; a secret env value is never echoed).

    >>> from anylaunch.specs.api import Role
    >>> check_role_no_nul(Role("w", image="i", entrypoint="echo", args=["a" + chr(0)]))
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Role[w].args[0]='a\\x00' is invalid: contains a NUL byte (at index 1), which no process argument, env value or job script can carry. Fix: remove the NUL byte
    """
    where = f"Role[{role.name}]"
    check_no_nul(f"{where}.entrypoint", role.entrypoint)
    for i, arg in enumerate(role.args):
        check_no_nul(f"{where}.args[{i}]", arg)
    for key, value in role.env.items():
        check_no_nul(f"{where}.env[{key!r}]", value, secret=is_secret_env_name(key))


# [host[:port]/]path[:tag][@digest], or an image id
_IMAGE_REF = re.compile(
    r"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-]+[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[0-9a-f]{64})?|(?:sha256:)?[0-9a-f]{12,64}"
)


def check_image_ref(role: Role, backend: str) -> None:
    """Rejects a role whose image is not a container image reference (empty, or a directory
    such as the default ``.``) on a backend that runs containers.

    >>> from anylaunch.specs.api import Role
    >>> check_image_ref(Role("w", image="busybox:latest", entrypoint="sh"), "kubernetes")
    >>> check_image_ref(Role("w", image=".", entrypoint="sh"), "kubernetes")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Role[w].image='.' is invalid: is not a container image reference (the kubernetes scheduler runs each replica in a container of this image). Fix: pass an image such as busybox:latest or registry.example.com/team/app:1
    """
    if not isinstance(role.image, str) or _IMAGE_REF.fullmatch(role.image) is None:
        raise InvalidSpecError(
            f"Role[{role.name}].image",
            role.image,
            f"is not a container image reference (the {backend} scheduler runs each replica in "
            "a container of this image)",
            "pass an image such as busybox:latest or registry.example.com/team/app:1",
        )


def role_record(role: Role, mask_secrets: bool = False) -> dict[str, Any]:
    """The plain-data record of a role that a backend keeps with the app (labels, a
    ConfigMap, a state file) to describe it later: the same form everywhere,
    ``anylaunch.specs.serialize``'s. With ``mask_secrets`` (a record others can read, such as
    a ConfigMap) secret env values are stored as ``***``.

    >>> from anylaunch.specs.api import Role
    >>> record = role_record(Role("w", image="img", entrypoint="echo", args=["hi"]))
    >>> record["name"], record["args"], role_from_record(record).args
    ('w', ['hi'], ['hi'])
    >>> role_record(Role("w", image="i", entrypoint="e", env={"HF_TOKEN": "t"}), True)["env"]
    {'HF_TOKEN': '***'}
    """
    from anylaunch.specs.serialize import role_to_dict

    record = role_to_dict(role)
    if mask_secrets:
        record["env"] = mask_env(record["env"])
    return record


def role_from_record(record: Mapping[str, Any]) -> Role:
    """The role back from :func:`role_record` (also reads the older record forms of
    local_cwd, local_docker and kubernetes, whose ``retry_policy`` is the policy's value and
    whose ``resource`` holds fewer keys)."""
    from anylaunch.specs.serialize import role_from_dict

    return role_from_dict(record)
