"""anylaunch.components.component_test_base: ComponentTestCase validates and runs components."""

from __future__ import annotations

import importlib.util
import sys
import unittest
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from anylaunch.components import ComponentValidationException, get_components, utils
from anylaunch.components.component_test_base import ComponentTestCase
from anylaunch.schedulers.local import forkserver
from anylaunch.specs import AppDef, AppState, Role

GOOD_AND_BAD = '''
import anylaunch.specs as specs


def good(msg: str = "hi") -> specs.AppDef:
    """Echoes.

    Args:
        msg: what to echo
    """
    return specs.AppDef("good", [specs.Role("good", image=".", entrypoint="echo", args=[msg])])


def undocumented(msg: str) -> specs.AppDef:
    return specs.AppDef("bad", [specs.Role("bad", image=".", entrypoint="echo", args=[msg])])
'''


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"cmpnts_{path.parent.name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def module(tmp_path: Path) -> ModuleType:
    path = tmp_path / "my_components.py"
    path.write_text(GOOD_AND_BAD)
    return load(path)


def result_of(case: unittest.TestCase) -> unittest.TestResult:
    result = unittest.TestResult()
    case.run(result)
    return result


def test_validate_passes_a_valid_component(module: ModuleType) -> None:
    class T(ComponentTestCase):
        def test_it(self) -> None:
            self.validate(module, "good")
            self.validate(utils, "echo")

    assert result_of(T("test_it")).wasSuccessful()


def test_validate_fails_a_component_the_linter_rejects(module: ModuleType) -> None:
    class T(ComponentTestCase):
        def test_it(self) -> None:
            with self.assertRaises(ComponentValidationException):
                self.validate(module, "undocumented")

    assert result_of(T("test_it")).wasSuccessful()


def test_each_test_gets_a_fresh_test_dir_removed_after_it() -> None:
    seen: list[str] = []

    class T(ComponentTestCase):
        def test_it(self) -> None:
            self.assertTrue(Path(self.test_dir).is_dir())
            seen.append(self.test_dir)

    assert result_of(T("test_it")).wasSuccessful()
    assert result_of(T("test_it")).wasSuccessful()
    assert len(set(seen)) == 2 and not any(Path(d).exists() for d in seen)


def failing() -> AppDef:
    return AppDef("fails", [Role("fails", image=".", entrypoint="false")])


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A local_cwd home of the test's own, whose fork-server connections close after it."""
    monkeypatch.setenv("ANYLAUNCH_HOME", str(tmp_path / "home"))
    yield
    forkserver.close_connections()


@pytest.mark.usefixtures("home")
def test_run_component_runs_it_to_the_end() -> None:
    statuses = []

    class T(ComponentTestCase):
        def test_it(self) -> None:
            statuses.append(self.run_component(utils.echo, {"msg": "x"}, timeout=30))
            statuses.append(self.run_component(failing, timeout=30))

    result = result_of(T("test_it"))
    assert result.wasSuccessful(), result.errors
    assert [s.state if s else None for s in statuses] == [AppState.SUCCEEDED, AppState.FAILED]


@pytest.mark.usefixtures("home")
def test_run_component_returns_the_last_status_on_timeout() -> None:
    statuses = []

    class T(ComponentTestCase):
        def test_it(self) -> None:
            args = {"msg": "x"}
            statuses.append(self.run_component(utils.echo, args, timeout=0, interval=0.01))

    assert result_of(T("test_it")).wasSuccessful()
    assert statuses[0] is not None  # known to the scheduler, maybe not ended yet


def test_the_module_holds_no_component() -> None:
    assert not [n for n in get_components(include_invalid=True) if "component_test" in n]
