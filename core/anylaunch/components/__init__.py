"""Built-in components and component discovery.

A component is a function that returns an :class:`~anylaunch.specs.AppDef` and passes the
component linter (:mod:`anylaunch.specs.file_linter`): Google-style docstring, every
parameter annotated with a type the CLI can parse, ``-> AppDef``. Components are found by name:

- built-ins: ``{module}.{function}`` for each module of this package (``dist.ddp``,
  ``utils.echo``, ``serve.torchserve``, ...);
- plugins: functions decorated with ``@anylaunch.plugins.register.component()`` in modules of
  the ``anylaunch_plugins.components`` namespace package of installed distributions, named
  ``<module>.<fn>`` (``anylaunch_plugins/components/team.py:train`` is ``team.train``) or by
  the decorator's ``name``;
- legacy plugins: entry points in the ``anylaunch.components`` group of installed distributions.
  ``foo = mypkg.components`` registers every component of that module (and of its
  sub-packages) as ``foo.<fn>`` (``foo.<submodule>.<fn>``); a name starting with ``_`` adds no
  prefix. ``foo = mypkg.components:train`` registers the one function as ``foo``.

  A plugin named like a built-in replaces it, and a warning is logged;
- files: ``path/to/file.py:fn`` loads ``fn`` from that file.

>>> from anylaunch.components import get_component
>>> get_component("utils.echo").description
'Echoes a message to stdout (runs ``echo``).'
>>> get_component("utils.ecoh")
Traceback (most recent call last):
...
anylaunch.components.ComponentNotFoundException: unknown component 'utils.ecoh'. Did you mean 'utils.echo'? Fix: ...

Importing this package is cheap: built-in modules and plugins are imported on first lookup.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from anylaunch.specs.errors import AnylaunchError, InvalidSpecError, did_you_mean

if TYPE_CHECKING:
    from types import ModuleType

    from anylaunch.specs.api import AppDef
    from anylaunch.specs.file_linter import LinterMessage

__all__ = [
    "DEFAULT_IMAGE",
    "ENTRY_POINT_GROUP",
    "PYTHON",
    "Component",
    "ComponentLoadError",
    "ComponentNotFoundException",
    "ComponentValidationException",
    "get_component",
    "get_components",
]

logger: logging.Logger = logging.getLogger(__name__)

#: Default ``image`` of the built-ins: the current directory. The local schedulers run a role
#: in a directory (``local_cwd`` in the current one), so ``anylaunch run -s local_cwd
#: utils.echo`` works as-is; container schedulers need an explicit ``--image``.
DEFAULT_IMAGE: str = "."

#: The interpreter the Python-based built-ins run, looked up on the replica's PATH: a fixed
#: name (not this process's ``sys.executable``) keeps the AppDef portable across hosts.
PYTHON: str = "python3"

#: Entry-point group in which installed distributions register components.
ENTRY_POINT_GROUP: str = "anylaunch.components"

# Modules of this package that hold helpers, not components.
_NOT_COMPONENT_MODULES = frozenset({"component_test_base", "structured_arg"})


@dataclass
class Component:
    """A component found by discovery.

    Args:
        name: the name to run it by (``dist.ddp``, ``foo.train``, ``path/to/file.py:fn``)
        fn: the function that returns the AppDef
        description: the first line of the function's docstring
        validation_errors: what the component linter found wrong (empty if valid)
    """

    name: str
    fn: Callable[..., AppDef]
    description: str
    validation_errors: list[LinterMessage] = field(default_factory=list)

    @property
    def is_valid(self) -> bool:
        """True if the component linter found no errors."""
        return not self.validation_errors


class ComponentNotFoundException(AnylaunchError, LookupError):
    """No component is known by the requested name (or the file or function is missing)."""

    def __init__(self, name: str, problem: str, fix: str) -> None:
        self.name = name
        end = "" if problem.endswith((".", "?")) else "."
        super().__init__(f"{problem}{end} Fix: {fix}")


class ComponentLoadError(ComponentNotFoundException):
    """A component file could not be imported: it has a syntax error, its import raised, or it
    called ``sys.exit``. The message names the file, the line and the error in one line."""

    def __init__(self, name: str, path: str, error: BaseException) -> None:
        self.path = path
        self.error = error
        line = _line_in(path, error)
        where = f"{path}, line {line}" if line is not None else path
        if isinstance(error, SystemExit):
            problem = f"{where} called sys.exit({error.code!r}) while being imported"
            fix = "do not exit at import time: put the code under `if __name__ == '__main__':`"
        else:
            detail = error.msg if isinstance(error, SyntaxError) else str(error)
            problem = f"cannot import {where}: {type(error).__name__}: {detail}"
            fix = "fix the file (`python " + path + "` shows the same error)"
        super().__init__(name, problem, fix)


def _line_in(path: str, error: BaseException) -> int | None:
    """The line of ``path`` where ``error`` arose (the innermost frame in that file)."""
    if isinstance(error, SyntaxError) and error.filename == path:
        return error.lineno
    import traceback

    line = None
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename == path:
            line = frame.lineno
    return line


class ComponentValidationException(InvalidSpecError):
    """A component was found but does not pass the component linter."""

    def __init__(self, component: Component) -> None:
        self.component = component
        problems = "; ".join(f"line {m.line}: {m.description}" for m in component.validation_errors)
        super().__init__(
            "component",
            component.name,
            f"fails the component linter: {problems}",
            "make it a top-level function with a Google-style docstring, a supported type on "
            "every parameter and -> AppDef (see anylaunch.specs.file_linter)",
        )


def _description(fn: Callable[..., object]) -> str:
    import inspect

    doc = inspect.getdoc(fn) or ""
    return next((line.strip() for line in doc.splitlines() if line.strip()), fn.__name__)


def _module_components(module: ModuleType, prefix: str) -> Iterator[Component]:
    """Yields the components defined in ``module`` (public functions annotated -> AppDef)."""
    import ast

    from anylaunch.specs.file_linter import ReturnTypeValidator, validate

    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py"):
        return
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    returns_appdef = ReturnTypeValidator()
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
            continue
        # the linter's return-type rule decides what is a component; the other rules only
        # decide whether it is a valid one
        if returns_appdef.validate(node):
            continue
        fn = getattr(module, node.name, None)
        if not callable(fn):
            continue
        yield Component(
            name=f"{prefix}.{node.name}" if prefix else node.name,
            fn=fn,
            description=_description(fn),
            validation_errors=validate(path, node.name),
        )


def _walk(
    module: ModuleType, prefix: str, skip: frozenset[str] = frozenset()
) -> Iterator[Component]:
    """Yields the components of ``module`` and, for a package, of its public sub-modules."""
    import importlib
    import pkgutil

    yield from _module_components(module, prefix)
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        if info.name.startswith("_") or info.name in skip:
            continue
        sub_name = f"{module.__name__}.{info.name}"
        try:
            sub = importlib.import_module(sub_name)
        except Exception as e:
            # one broken module must not hide the components of the others
            logger.warning(
                "skipping module %r: importing it failed (%s: %s)", sub_name, type(e).__name__, e
            )
            continue
        yield from _walk(sub, f"{prefix}.{info.name}" if prefix else info.name)


def _builtins() -> Iterator[Component]:
    import sys

    package = sys.modules[__name__]
    yield from _walk(package, "", skip=_NOT_COMPONENT_MODULES)


def _namespace_component(name: str, fn: Callable[..., AppDef]) -> Component:
    import inspect

    from anylaunch.specs.file_linter import validate

    path = getattr(inspect.getmodule(fn), "__file__", None) or "<unknown>"
    return Component(name, fn, _description(fn), validate(path, fn.__name__))


def _plugin_components() -> Iterator[Component]:
    """Components of the ``anylaunch_plugins.components`` package, then of entry points."""
    import inspect

    from anylaunch.plugins.discovery import EntryPointPlugin
    from anylaunch.plugins.plugin_registry import registry
    from anylaunch.plugins.types import PluginType

    plugins = registry().get(PluginType.COMPONENT)
    for name, plugin in plugins.items():
        if not isinstance(plugin, EntryPointPlugin):
            yield _namespace_component(name, plugin)
    for plugin in plugins.values():
        if not isinstance(plugin, EntryPointPlugin):
            continue
        ep = plugin.entry_point
        prefix = "" if ep.name.startswith("_") else ep.name
        try:
            target = ep.load()
        except Exception as e:
            # one broken plugin must not hide the other components
            logger.warning(
                "skipping entry point %r (group %r) = %r: importing it failed (%s: %s)",
                ep.name,
                ENTRY_POINT_GROUP,
                ep.value,
                type(e).__name__,
                e,
            )
            continue
        if inspect.ismodule(target):
            yield from _walk(target, prefix)
        elif inspect.isfunction(target):
            # the linter reports a function that is not a top-level def annotated -> AppDef
            yield _namespace_component(ep.name, target)
        else:
            logger.warning(
                "skipping entry point %r (group %r) = %r: it is a %s, not a module or function",
                ep.name,
                ENTRY_POINT_GROUP,
                ep.value,
                type(target).__name__,
            )


@functools.cache
def _discover() -> dict[str, Component]:
    from anylaunch.plugins.plugin_registry import on_clear

    on_clear(_discover.cache_clear)
    found = {c.name: c for c in _builtins()}
    builtins = set(found)
    for component in _plugin_components():
        if component.name in builtins:
            module = getattr(component.fn, "__module__", "?")
            logger.warning(
                "plugin component %r from %s replaces the built-in", component.name, module
            )
        found[component.name] = component
    return found


def get_components(include_invalid: bool = False) -> dict[str, Component]:
    """Returns the built-in and plugin components by name (found once, then cached).

    >>> components = get_components()
    >>> sorted(n for n in components if n.startswith("dist."))
    ['dist.ddp', 'dist.spmd']

    Args:
        include_invalid: also return components that fail the component linter

    Returns:
        a map from component name to component
    """
    return {
        name: c for name, c in _discover().items() if include_invalid or not c.validation_errors
    }


def _file_component(name: str) -> Component:
    import hashlib
    import importlib.util
    import inspect
    import os
    import sys

    from anylaunch.specs.file_linter import validate

    path, _, fn_name = name.rpartition(":")
    if not os.path.isfile(path):
        raise ComponentNotFoundException(
            name, f"component file {path!r} does not exist", "pass path/to/file.py:function"
        )
    if not fn_name.isidentifier():
        raise ComponentNotFoundException(
            name,
            f"{fn_name!r} is not a function name",
            "pass path/to/file.py:function, e.g. my_components.py:train",
        )
    abspath = os.path.abspath(path)
    # a unique module name per file: dataclasses and pickling look modules up by name
    digest = hashlib.sha1(abspath.encode(), usedforsecurity=False).hexdigest()[:16]
    module_name = f"_anylaunch_component_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, abspath)
    if spec is None or spec.loader is None:
        raise ComponentNotFoundException(
            name, f"{path!r} cannot be loaded as Python", "pass a .py file"
        )
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        del sys.modules[module_name]
        raise
    except BaseException as e:  # SystemExit too: a component file must not end the caller
        del sys.modules[module_name]
        raise ComponentLoadError(name, abspath, e) from None
    fn = getattr(module, fn_name, None)
    if not inspect.isfunction(fn):
        defined = [n for n, v in vars(module).items() if inspect.isfunction(v)]
        raise ComponentNotFoundException(
            name,
            f"{path!r} defines no function {fn_name!r}.{did_you_mean(fn_name, defined)}",
            f"use one of {', '.join(sorted(defined)) or '(no functions)'}",
        )
    return Component(name, fn, _description(fn), validate(abspath, fn_name))


def _unknown(name: str, known: Iterable[str]) -> ComponentNotFoundException:
    return ComponentNotFoundException(
        name,
        f"unknown component {name!r}.{did_you_mean(name, known)}",
        "use a built-in (`anylaunch builtins` lists them), a plugin component "
        "(@anylaunch.plugins.register.component() in the anylaunch_plugins.components package, "
        f"or the legacy {ENTRY_POINT_GROUP!r} entry-point group), or path/to/file.py:function",
    )


def get_component(name: str) -> Component:
    """Returns the component called ``name``: a built-in, a plugin, or ``path/to/file.py:fn``.

    >>> app = get_component("utils.echo").fn(msg="hi")
    >>> app.roles[0].args
    ['hi']

    Args:
        name: ``dist.ddp``-style name, or ``path/to/file.py:function``

    Returns:
        the component

    Raises:
        ComponentNotFoundException: no such component, file or function (with a hint).
        ComponentValidationException: the component fails the component linter.
    """
    if not isinstance(name, str) or not name.strip():
        raise ComponentNotFoundException(
            str(name), f"{name!r} is not a component name", "pass e.g. 'utils.echo'"
        )
    if ":" in name:
        component = _file_component(name)
    else:
        components = _discover()
        if name not in components:
            raise _unknown(name, components)
        component = components[name]
    if component.validation_errors:
        raise ComponentValidationException(component)
    return component
