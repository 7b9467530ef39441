"""Workspace parity with TorchX: the YAML string form, empty workspaces, str() and hashing."""

from pathlib import Path

import pytest

from anylaunch.specs import Workspace
from anylaunch.specs.errors import InvalidSpecError


@pytest.mark.parametrize(
    ("text", "projects"),
    [
        # TorchX's YAML forms
        ("~/github/torch: torch", {"~/github/torch": "torch"}),
        ("a: x\nb: y\n", {"a": "x", "b": "y"}),
        ("# copied into the image\nsrc: app   # the code\nconf:\n", {"src": "app", "conf": ""}),
        ("{a: x, b: }", {"a": "x", "b": ""}),
        ("s3://bucket/dir: data", {"s3://bucket/dir": "data"}),
        ("'my project': sub", {"my project": "sub"}),
        ("code: 2024", {"code": "2024"}),
        # a single path
        ("~/proj", {"~/proj": ""}),
        (".", {".": ""}),
        ("~", {"~": ""}),  # YAML reads a bare ~ as null: it is still the home directory
        ("1", {"1": ""}),
        ("s3://bucket/dir", {"s3://bucket/dir": ""}),
        # the list form, with , or ; (what str() prints)
        ("src:app,conf:etc", {"src": "app", "conf": "etc"}),
        ("src:app;conf", {"src": "app", "conf": ""}),
        ("s3://b/d,local:x", {"s3://b/d": "", "local": "x"}),
    ],
)
def test_from_str_forms(text: str, projects: dict[str, str]) -> None:
    assert Workspace.from_str(text).projects == projects


@pytest.mark.parametrize("text", [None, "", "   ", "\n"])
def test_blank_is_the_empty_workspace(text: str | None) -> None:
    ws = Workspace.from_str(text)
    assert ws.projects == {}
    assert not ws
    assert str(ws) == ""
    assert not ws.is_unmapped_single_project()


def test_empty_workspace_is_allowed_and_falsy() -> None:
    assert not Workspace({})
    assert Workspace({"a": ""})
    assert Workspace({}) == Workspace.from_str("")


def test_none_sub_directory_means_no_sub_directory() -> None:
    ws = Workspace({"~/proj": None})  # type: ignore[dict-item]
    assert ws.projects == {"~/proj": ""}
    assert ws.is_unmapped_single_project()


def test_str_joins_with_semicolons_and_prints_a_single_path_bare() -> None:
    assert str(Workspace({"~/proj": ""})) == "~/proj"
    assert str(Workspace({"~/proj": "p"})) == "~/proj:p"
    assert str(Workspace({"a": "x", "b": "", "c": "z"})) == "a:x;b;c:z"


def test_str_round_trips_plain_paths() -> None:
    ws = Workspace({"src": "app", "conf": "", "docs/README": "docs/README"})
    assert Workspace.from_str(str(ws)) == ws


def test_equal_workspaces_hash_equal() -> None:
    a = Workspace({"a": "x", "b": ""})
    b = Workspace.from_str("b:\na: x")
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != Workspace({"a": "y", "b": ""})
    assert a != {"a": "x", "b": ""}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("- a\n- b", "YAML list"),
        ("a: [1, 2]", "plain path"),
        ("a:\n  b: c", "plain path"),
        ("a: b\n  c: : d", "not a YAML mapping"),
        (":x", "no local path"),
    ],
)
def test_bad_text_names_the_problem(text: str, problem: str) -> None:
    with pytest.raises(InvalidSpecError, match=problem) as info:
        Workspace.from_str(text)
    assert "Fix:" in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "projects",
    [["a"], {"a": 1}, {1: "a"}],
)
def test_bad_projects_are_rejected(projects: object) -> None:
    with pytest.raises(InvalidSpecError, match=r"Workspace\.projects"):
        Workspace(projects)  # type: ignore[arg-type]


def test_non_str_is_rejected_by_from_str() -> None:
    with pytest.raises(InvalidSpecError, match="must be a str"):
        Workspace.from_str(3)  # type: ignore[arg-type]


def test_yaml_workspace_is_merged(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text("x = 1\n")
    (tmp_path / "README").write_text("hi\n")
    ws = Workspace.from_str(f"# projects\n{tmp_path / 'src'}: code\n{tmp_path / 'README'}: doc\n")
    out = tmp_path / "out"
    ws.merge_into(out)
    assert (out / "code" / "m.py").read_text() == "x = 1\n"
    assert (out / "doc").read_text() == "hi\n"
