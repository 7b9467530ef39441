"""The documentation site builds without a warning, and every code sample in it runs.

Python samples (```python fences) run page by page, in order, in one namespace per page, as a
reader would paste them. Console samples (```console, lines starting with ``$``) run the
``anylaunch`` command they show in this venv; the test command itself (``bash
scripts/test.sh``) is what CI runs, so it is not run again from here.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)


def _blocks(page: Path, language: str) -> list[str]:
    return [m.group(2) for m in FENCE.finditer(page.read_text()) if m.group(1) == language]


def _anylaunch_argv(line: str) -> list[str] | None:
    """The anylaunch command a console line shows, or None for the test command itself."""
    command = line.removeprefix("$").strip()
    if command == "bash scripts/test.sh":
        return None
    # README's first command installs uv, then runs anylaunch through it: run that anylaunch
    command = command.split("uv run --frozen ", 1)[-1]
    argv = shlex.split(command)
    assert argv[0] == "anylaunch", f"a console sample runs something else: {line!r}"
    return [str(Path(sys.executable).parent / "anylaunch"), *argv[1:]]


def test_docs_build_without_warnings(tmp_path: Path) -> None:
    build = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]
    result = subprocess.run(
        [*build, str(DOCS), str(tmp_path / "html")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "html" / "torchx" / "index.html").is_file()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_python_samples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _blocks(page, "python")
    if not blocks:
        return  # a page without Python samples has nothing to run (counted, never skipped)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for number, source in enumerate(blocks, 1):
        code = compile(source, f"{page.relative_to(ROOT)}[python sample {number}]", "exec")
        exec(code, namespace)


CONSOLE_LINES = [
    pytest.param(page, line, id=f"{page.relative_to(DOCS)}:{line[:60]}")
    for page in PAGES
    for block in _blocks(page, "console")
    for line in block.splitlines()
    if line.startswith("$")
]


@pytest.mark.parametrize(("page", "line"), CONSOLE_LINES)
def test_console_samples_run(page: Path, line: str, tmp_path: Path) -> None:
    argv = _anylaunch_argv(line)
    if argv is None:
        return  # the test command: CI runs it
    env = {**os.environ, "ANYLAUNCH_LOCAL_STATE_DIR": str(tmp_path / "state")}
    result = subprocess.run(
        argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )
    assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"
