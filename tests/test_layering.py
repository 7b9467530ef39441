"""The layers import only downwards: read from every module's imports, never by importing it.

Every ``.py`` under ``core/anylaunch`` and ``integrations/`` is parsed with :mod:`ast`; every
import counts, at the top, inside a function or under ``if TYPE_CHECKING:``, and so does
``importlib.import_module("...")`` with a literal name. The layers (see docs/contributing.md)::

    specs  <-  schedulers  <-  runner  <-  cli, integrations (the engines)
    specs  <-  workspace;  plugins registers into specs, never the other way round

Each rule is one test per module it applies to, so a module that breaks a rule today because
another branch owns it is marked ``xfail(strict=True)`` on its own: the mark names the branch
whose landing fixes it, and turns into a failure (to delete) once the module is fixed.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "core"
INTEGRATIONS = ROOT / "integrations"
ENGINE_PACKAGES = ("airflow_anylaunch", "prefect_anylaunch", "dagster_anylaunch")
OUR_PACKAGES = ("anylaunch", *ENGINE_PACKAGES)
#: The scheduler backends, each a package under schedulers/.
BACKENDS = ("local", "docker", "kubernetes", "aws", "slurm", "lsf")


@dataclass(frozen=True)
class Module:
    name: str  # dotted: anylaunch.specs.api
    path: Path
    package: str  # the package the module is in (itself, for an __init__.py)


@dataclass(frozen=True)
class Import:
    line: int
    target: str  # the dotted module (or module.name) imported
    names: tuple[str, ...] = ()  # for `from target import a, b`


def _module_of(path: Path) -> Module:
    # core/anylaunch/specs/api.py -> anylaunch.specs.api; integrations/airflow/airflow_anylaunch/
    # hooks.py -> airflow_anylaunch.hooks
    base = (
        CORE
        if path.is_relative_to(CORE)
        else INTEGRATIONS / path.relative_to(INTEGRATIONS).parts[0]
    )
    parts = list(path.relative_to(base).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    name = ".".join(parts)
    return Module(name, path, name if is_package else ".".join(parts[:-1]))


@functools.cache
def modules() -> tuple[Module, ...]:
    files = sorted((CORE / "anylaunch").rglob("*.py")) + sorted(
        INTEGRATIONS.glob("*/*_anylaunch/**/*.py")
    )
    return tuple(_module_of(p) for p in files if "__pycache__" not in p.parts)


def in_package(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@functools.cache
def nodes_of(module: Module) -> tuple[ast.AST, ...]:
    """The module's imports, calls and attribute uses, from one walk of its whole tree."""
    tree = ast.parse(module.path.read_text(), str(module.path))
    kinds = (ast.Import, ast.ImportFrom, ast.Call, ast.Attribute)
    return tuple(node for node in ast.walk(tree) if isinstance(node, kinds))


@functools.cache
def imports_of(module: Module) -> tuple[Import, ...]:
    found: list[Import] = []
    for node in nodes_of(module):
        if isinstance(node, ast.Import):
            found += [Import(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package upwards
                anchor = module.package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.append(Import(node.lineno, base, tuple(a.name for a in node.names)))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append(Import(node.lineno, node.args[0].value))
    return tuple(found)


def imported_modules(module: Module) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of what ``module`` imports; ``from a import b`` gives ``a`` and
    ``a.b`` (b may be a sub-module)."""
    for imp in imports_of(module):
        yield imp.line, imp.target
        for name in imp.names:
            yield imp.line, f"{imp.target}.{name}"


def where(module: Module, line: int) -> str:
    path = module.path.relative_to(ROOT) if module.path.is_relative_to(ROOT) else module.path
    return f"{path}:{line}"


def forbidden_imports(module: Module, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        {
            f"{where(module, line)} imports {target}"
            for line, target in imported_modules(module)
            if any(in_package(target, f) for f in forbidden)
        }
    )


def params(applies: tuple[str, ...], pending: dict[str, str]) -> list[object]:
    """One param per module in the ``applies`` packages; ``pending`` maps a module that breaks
    the rule today to the branch that fixes it (a mark for a module that is gone is unused)."""
    return [
        pytest.param(
            m,
            id=m.name,
            marks=[pytest.mark.xfail(strict=True, reason=f"pending {pending[m.name]}")]
            if m.name in pending
            else [],
        )
        for m in modules()
        if any(in_package(m.name, p) for p in applies)
    ]


def assert_none(breaches: list[str]) -> None:
    assert not breaches, "\n".join(breaches)


# --- what each layer may import ---------------------------------------------------------------

SPECS_MAY_NOT = tuple(
    f"anylaunch.{p}" for p in ("plugins", "schedulers", "runner", "workspace", "cli", "components")
)


#: TorchX's module paths that sit in a layer below the code they name: each re-exports the one
#: package named here, for code ported from TorchX, and no module of ours imports it (see
#: test_no_module_imports_a_torchx_path_alias), so its layer never depends on what it names.
TORCHX_PATH_ALIASES = {"anylaunch.specs.finder": "anylaunch.components"}


@pytest.mark.parametrize("module", params(("anylaunch.specs",), {}))
def test_specs_imports_nothing_above_it(module: Module) -> None:
    named = TORCHX_PATH_ALIASES.get(module.name)
    assert_none(forbidden_imports(module, tuple(p for p in SPECS_MAY_NOT if p != named)))


def test_no_module_imports_a_torchx_path_alias() -> None:
    assert all(_is_module(alias) for alias in TORCHX_PATH_ALIASES), "an alias is gone"
    assert_none(
        [
            f"{where(module, line)} imports {target}"
            for module in modules()
            for line, target in imported_modules(module)
            if any(in_package(target, alias) for alias in TORCHX_PATH_ALIASES)
        ]
    )


@pytest.mark.parametrize(
    "module",
    params(("anylaunch.workspace",), {}),
)
def test_workspace_imports_no_scheduler_runner_or_cli(module: Module) -> None:
    may_not = ("anylaunch.schedulers", "anylaunch.runner", "anylaunch.cli")
    assert_none(forbidden_imports(module, may_not))


@pytest.mark.parametrize("module", params(("anylaunch.schedulers",), {}))
def test_schedulers_import_no_runner_or_cli(module: Module) -> None:
    assert_none(forbidden_imports(module, ("anylaunch.runner", "anylaunch.cli")))


@pytest.mark.parametrize("module", params(("anylaunch.runner",), {}))
def test_runner_imports_no_cli(module: Module) -> None:
    assert_none(forbidden_imports(module, ("anylaunch.cli",)))


@pytest.mark.parametrize("module", params(("anylaunch",), {}))
def test_core_imports_no_engine_integration(module: Module) -> None:
    assert_none(forbidden_imports(module, ENGINE_PACKAGES))


# --- private names stay inside their package ---------------------------------------------------


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(module: Module) -> list[str]:
    """``from x import _y``, ``import x._y`` and ``x._y`` on an imported module, where the
    private name belongs to another of our packages than ``module``'s."""
    found: set[str] = set()

    def check(line: int, owner: str, dotted: str) -> None:
        # owner: the package (or module) the private name lives in
        if not any(in_package(owner, p) for p in OUR_PACKAGES):
            return
        parts = dotted.split(".")
        for i, part in enumerate(parts):
            if _is_private(part):
                home = ".".join(parts[:i])
                if module.package != _package_of(home):
                    found.add(f"{where(module, line)} uses {dotted}")
                return

    for imp in imports_of(module):
        check(imp.line, imp.target, imp.target)
        for name in imp.names:
            check(imp.line, imp.target, f"{imp.target}.{name}")
    aliases: dict[str, str] = {}  # local name -> the module it is bound to
    for node in nodes_of(module):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if _is_module(f"{node.module}.{alias.name}"):
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in nodes_of(module):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            # `mod._x`, `pkg.mod._x`: the text before ._x starts with an imported name
            head, _, rest = ast.unparse(node.value).partition(".")
            if head in aliases:
                target = ".".join(filter(None, [aliases[head], rest]))
                if _is_module(target):
                    check(node.lineno, target, f"{target}.{node.attr}")
    return sorted(found)


@functools.cache
def _packages() -> dict[str, str]:
    return {m.name: m.package for m in modules()}


def _is_module(name: str) -> bool:
    return name in _packages()


def _package_of(name: str) -> str:
    """The package ``name`` (a module or package) belongs to: itself if a package."""
    return _packages().get(name) or name.rpartition(".")[0] or name


@pytest.mark.parametrize(
    "module",
    params(OUR_PACKAGES, {}),
)
def test_no_private_name_crosses_a_package(module: Module) -> None:
    assert_none(private_uses(module))


# --- scheduler backends -----------------------------------------------------------------------


def backend_packages() -> list[str]:
    root = CORE / "anylaunch" / "schedulers"
    missing = [b for b in BACKENDS if not (root / b / "__init__.py").is_file()]
    assert not missing, f"scheduler backend packages missing: {missing}"
    return [f"anylaunch.schedulers.{b}" for b in BACKENDS]


def entry_modules() -> list[str]:
    root = CORE / "anylaunch" / "schedulers"
    return [f"anylaunch.schedulers.{p.stem}" for p in sorted(root.glob("*_scheduler.py"))]


def test_backends_import_neither_each_other_nor_an_entry_module() -> None:
    breaches: list[str] = []
    for backend in backend_packages():
        others = tuple(b for b in backend_packages() if b != backend) + tuple(entry_modules())
        for module in modules():
            if in_package(module.name, backend):
                breaches += forbidden_imports(module, others)
    assert_none(breaches)


# --- the reader itself -------------------------------------------------------------------------


def test_the_reader_sees_every_kind_of_import_and_private_use(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text(
        "from __future__ import annotations\n"
        "import importlib\n"
        "from typing import TYPE_CHECKING\n"
        "import anylaunch.specs.runopts\n"
        "from anylaunch.specs import runopts as opts\n"
        "if TYPE_CHECKING:\n"
        "    from anylaunch.plugins import registry\n"
        "def f() -> object:\n"
        "    from ..runner.api import Runner\n"
        "    from anylaunch.specs.runopts import _split_items\n"
        "    importlib.import_module('anylaunch.cli.main')\n"
        "    return opts._TRUE, anylaunch.specs.runopts._FALSE, Runner, registry\n"
    )
    probe = Module("anylaunch.specs.probe", path, "anylaunch.specs")
    assert [line for line, _ in imported_modules(probe) if line > 4] == [
        5,
        5,
        7,
        7,
        9,
        9,
        10,
        10,
        11,
    ]
    assert sorted(b.split(" ", 1)[1] for b in forbidden_imports(probe, SPECS_MAY_NOT)) == [
        "imports anylaunch.cli.main",
        "imports anylaunch.plugins",
        "imports anylaunch.plugins.registry",
        "imports anylaunch.runner.api",
        "imports anylaunch.runner.api.Runner",
    ]
    elsewhere = Module("anylaunch.cli.probe", path, "anylaunch.cli")
    assert sorted(b.split(" ", 1)[1] for b in private_uses(elsewhere)) == [
        "uses anylaunch.specs.runopts._FALSE",
        "uses anylaunch.specs.runopts._TRUE",
        "uses anylaunch.specs.runopts._split_items",
    ]
    assert private_uses(probe) == []  # inside its own package
