"""anylaunch.specs.finder: TorchX's finder path over anylaunch.components' discovery."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import anylaunch.components as components
from anylaunch.specs import finder

COMPONENT = '''
import anylaunch.specs as specs


def train(lr: float = 0.1) -> specs.AppDef:
    """Trains.

    Args:
        lr: learning rate
    """
    return specs.AppDef("train", [specs.Role("train", image=".", entrypoint="echo", args=[str(lr)])])


def bad(lr) -> specs.AppDef:
    return specs.AppDef("bad", [specs.Role("bad", image=".", entrypoint="echo")])
'''


def test_the_names_are_the_components_ones() -> None:
    for name in ("get_component", "get_components", "Component"):
        assert getattr(finder, name) is getattr(components, name)
    assert finder.ComponentNotFoundException is components.ComponentNotFoundException
    assert finder.ComponentValidationException is components.ComponentValidationException


def test_it_finds_builtins_and_files(tmp_path: Path) -> None:
    assert {"dist.ddp", "utils.echo"} <= set(finder.get_components())
    path = tmp_path / "mine.py"
    path.write_text(COMPONENT)
    app = finder.get_component(f"{path}:train").fn(lr=0.5)
    assert app.roles[0].args == ["0.5"]
    with pytest.raises(finder.ComponentValidationException):
        finder.get_component(f"{path}:bad")
    with pytest.raises(finder.ComponentNotFoundException, match=r"Did you mean 'utils\.echo'"):
        finder.get_component("utils.ecoh")


def test_components_finder_is_an_interface() -> None:
    with pytest.raises(TypeError):
        finder.ComponentsFinder()  # type: ignore[abstract]

    class Dist(finder.ComponentsFinder):
        def find(self, validators: object = None) -> list[finder.Component]:
            return [c for n, c in finder.get_components().items() if n.startswith("dist.")]

    assert sorted(c.name for c in Dist().find()) == ["dist.ddp", "dist.spmd"]


def test_importing_specs_does_not_load_the_finder() -> None:
    code = "import sys, anylaunch.specs; print('anylaunch.specs.finder' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "False"
