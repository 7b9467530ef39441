"""TorchX's ``torchx.specs.finder`` path, for code ported from TorchX: component discovery.

Discovery lives in :mod:`anylaunch.components` (see there for the built-ins, plugins and
``path/to/file.py:fn`` names); this module re-exports it under TorchX's path. It stands above
:mod:`anylaunch.specs` although it sits in it: nothing in anylaunch imports it, and
``import anylaunch.specs`` does not load it.

>>> get_component("utils.echo").fn(msg="hi").roles[0].args
['hi']
>>> "dist.ddp" in get_components()
True
"""

from __future__ import annotations

import abc

from anylaunch.components import (
    Component,
    ComponentNotFoundException,
    ComponentValidationException,
    get_component,
    get_components,
)
from anylaunch.specs.file_linter import ComponentFunctionValidator

__all__ = [
    "Component",
    "ComponentNotFoundException",
    "ComponentValidationException",
    "ComponentsFinder",
    "get_component",
    "get_components",
]


class ComponentsFinder(abc.ABC):
    """Finds a set of components: the interface of TorchX's finders.

    >>> class Builtins(ComponentsFinder):
    ...     def find(self, validators=None):
    ...         return [c for n, c in get_components().items() if n.startswith("utils.")]
    >>> "utils.echo" in [c.name for c in Builtins().find()]
    True
    """

    @abc.abstractmethod
    def find(self, validators: list[ComponentFunctionValidator] | None = None) -> list[Component]:
        """Returns the components found.

        Args:
            validators: the component linter's rules to check each component against
                (``None``: its default rules)

        Returns:
            the components, each with what the linter found wrong with it
        """
