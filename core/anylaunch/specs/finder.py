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
import dataclasses
import inspect
import os
from pathlib import Path
from types import ModuleType

from anylaunch.components import (
    Component,
    ComponentNotFoundException,
    ComponentValidationException,
    get_component,
    get_components,
)
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.file_linter import ComponentFunctionValidator, validate

__all__ = [
    "Component",
    "ComponentNotFoundException",
    "ComponentValidationException",
    "ComponentsFinder",
    "get_builtin_source",
    "get_component",
    "get_components",
    "is_namespace_package",
    "is_package",
    "module_relname",
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


def is_namespace_package(module: ModuleType) -> bool:
    """True if ``module`` is a namespace package (a package without ``__init__.py``).

    >>> import anylaunch, anylaunch.specs
    >>> is_namespace_package(anylaunch), is_namespace_package(anylaunch.specs.api)
    (False, False)
    """
    return getattr(module, "__file__", None) is None


def is_package(module: ModuleType) -> bool:
    """True if ``module`` is a package, regular or namespace (it has a ``__path__``).

    >>> import anylaunch.specs.api
    >>> is_package(anylaunch.specs), is_package(anylaunch.specs.api)
    (True, False)
    """
    return hasattr(module, "__path__")


def module_relname(module: ModuleType, relative_to: ModuleType) -> str:
    """The name of ``module`` relative to the package ``relative_to`` (``""`` for itself).

    >>> import anylaunch.components as c, anylaunch.components.dist as d
    >>> module_relname(d, relative_to=c), module_relname(d, relative_to=d)
    ('dist', '')

    Raises:
        InvalidSpecError: ``module`` is not ``relative_to`` or one of its submodules
    """
    name, base = module.__name__, relative_to.__name__
    if name == base:
        return ""
    if not name.startswith(base + "."):
        raise InvalidSpecError(
            "module",
            name,
            f"is not a submodule of {base!r}",
            "pass a module inside the package given as relative_to",
        )
    return str(Path(name.replace(".", os.sep)).relative_to(base.replace(".", os.sep))).replace(
        os.sep, "."
    )


def get_builtin_source(
    name: str, validators: list[ComponentFunctionValidator] | None = None
) -> str:
    """The source of the component ``name``, after the ``import``/``from`` lines of its file
    that precede its ``def``: a template to copy and edit (``anylaunch builtins --print``).

    Every import line above the function is kept, so the copy may import more than it uses:
    pass it through a linter.

    >>> src = get_builtin_source("utils.echo")
    >>> "def echo(" in src and "import anylaunch.specs as specs" in src
    True

    Args:
        name: the component's name, e.g. ``utils.echo``
        validators: the linter rules the component must pass (``None``: the default rules)

    Raises:
        ComponentNotFoundException: no component has that name
        ComponentValidationException: the component fails the linter
    """
    component = get_component(name)
    fn = component.fn
    if validators is not None:
        errors = validate(inspect.getfile(fn), fn.__name__, validators)
        if errors:
            raise ComponentValidationException(
                dataclasses.replace(component, validation_errors=errors)
            )
    with open(inspect.getfile(fn), encoding="utf-8") as f:
        lines = f.readlines()
    imports = []
    for line in lines:
        if line.startswith(("import ", "from ")):
            imports.append(line.rstrip("\n"))
        elif line.startswith(f"def {fn.__name__}("):
            break
    return "\n".join([*imports, "\n", inspect.getsource(fn), "\n"])
