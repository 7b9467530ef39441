"""Macros: template variables substituted at runtime in a role's args, env and metadata."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anylaunch.specs.api import Role

__all__ = ["macros", "substitute_nested"]


def substitute_nested(value: Any, substitute: Callable[[str], str]) -> Any:
    """``value`` with ``substitute`` applied to every str in it (dicts and lists walked)."""
    if isinstance(value, str):
        return substitute(value)
    if isinstance(value, dict):
        return {k: substitute_nested(v, substitute) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_nested(v, substitute) for v in value]
    return value


class macros:
    """Template variables substituted at runtime in ``Role.args``, ``Role.env`` and
    ``Role.metadata`` (macros in other fields are NOT substituted).

    - ``img_root``: root directory of the pulled image
    - ``app_id``: application id as assigned by the scheduler
    - ``replica_id``: per-role replica index (0, 1, ...), kept by a replacement replica
    - ``rank0_env``: the NAME of the environment variable holding the rank-0 host address;
      expand it in a shell as ``$${${rank0_env}}`` (``$$`` escapes a literal ``$``)

    >>> from anylaunch.specs import AppDef, Role, macros
    >>> trainer = Role(
    ...     name="trainer",
    ...     image="my_image:latest",
    ...     entrypoint="train.py",
    ...     args=["--app_id", macros.app_id],
    ...     env={"IMG_ROOT": macros.img_root},
    ... )
    >>> app = AppDef("train_app", roles=[trainer])
    >>> values = macros.Values(img_root="/img", app_id="a1", replica_id="0", rank0_env="HOST0")
    >>> values.apply(trainer).args
    ['--app_id', 'a1']
    >>> values.substitute("$${${rank0_env}:=localhost}:29500")  # for a shell to expand
    '${HOST0:=localhost}:29500'
    """

    img_root = "${img_root}"
    base_img_root = "${base_img_root}"
    app_id = "${app_id}"
    replica_id = "${replica_id}"
    rank0_env = "${rank0_env}"

    @dataclass
    class Values:
        """Concrete macro values for one replica."""

        img_root: str
        app_id: str
        replica_id: str
        rank0_env: str
        base_img_root: str = "DEPRECATED"

        def apply(self, role: Role) -> Role:
            """Returns a deep copy of ``role`` with macros substituted."""
            role = copy.deepcopy(role)
            role.args = [self.substitute(arg) for arg in role.args]
            role.env = {k: self.substitute(v) for k, v in role.env.items()}
            role.metadata = substitute_nested(role.metadata, self.substitute)
            return role

        def substitute(self, arg: str) -> str:
            """Substitutes macro placeholders in ``arg`` (unknown ``${x}`` are left alone)."""
            from string import Template  # only at launch: importing specs need not pay for it

            return Template(arg).safe_substitute(**self.to_dict())

        def to_dict(self) -> dict[str, Any]:
            """Returns the macro values as a plain dict."""
            return asdict(self)
