"""Named components made into apps: the arguments as the command line or a mapping, with
the defaults of the runner, ``.anylaunchconfig`` and the component function."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from anylaunch.specs.api import AppDef
from anylaunch.specs.errors import InvalidSpecError

__all__ = ["materialize"]


def materialize(
    component: str,
    component_args: Sequence[str] | Mapping[str, object],
    runner_defaults: Mapping[str, Mapping[str, str]],
) -> AppDef:
    """The AppDef of ``component`` (see ``Runner.materialize_component``): defaults come from
    ``runner_defaults``, then ``[component:NAME]`` of ``.anylaunchconfig``, then the function.

    >>> materialize("utils.echo", {"msg": "hi"}, {}).roles[0].args
    ['hi']
    """
    from anylaunch.components import get_component
    from anylaunch.runner.config import get_configs
    from anylaunch.specs.builder_values import component_cli_args
    from anylaunch.specs.builders import materialize_appdef

    if not isinstance(component, str) or not component:
        raise InvalidSpecError(
            "component", component, "must be a non-empty str", "e.g. 'utils.echo'"
        )
    component_fn = get_component(component).fn
    if isinstance(component_args, Mapping):
        cli_args = component_cli_args(component_fn, component_args)
    elif isinstance(component_args, (list, tuple)) and all(
        isinstance(a, str) for a in component_args
    ):
        cli_args = list(component_args)
    else:
        raise InvalidSpecError(
            "component_args",
            component_args,
            "must be a list of str (as on the command line) or a {param: value} dict",
            "pass e.g. ['--msg', 'hi'] or {'msg': 'hi'}",
        )
    defaults = {
        **get_configs("component", component),
        **runner_defaults.get(component, {}),
    }
    return materialize_appdef(component_fn, cli_args, defaults or None)
