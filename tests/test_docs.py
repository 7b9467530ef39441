"""The documentation site builds without a warning, and every code sample in it runs.

Samples run page by page, in reading order, in one directory per page, as a reader would paste
them: Python samples (```python fences) in one namespace per page, console samples (```console,
lines starting with ``$``) as the ``anylaunch`` command they show in this venv, so a Python
sample can write the component file a later console line runs. The test command itself (``bash
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
    # a fresh HOME, and no engine home of the caller's: the build must write nothing outside
    # its build directory (autodoc imports Airflow, Prefect and Dagster, which write homes)
    home = tmp_path / "home"
    home.mkdir()
    engine_vars = ("AIRFLOW_HOME", "PREFECT_HOME", "DAGSTER_HOME")
    env = {k: v for k, v in os.environ.items() if k not in engine_vars and not k.startswith("XDG_")}
    result = subprocess.run(
        [*build, str(DOCS), str(tmp_path / "html")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**env, "HOME": str(home)},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert (tmp_path / "html" / "torchx" / "index.html").is_file()
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == [], "the build wrote in HOME"
    assert not re.search(r"\b(DEBUG|INFO)\b", output), f"an engine logged into the build:\n{output}"
    # every scheduler has a page whose run options table (generated at build time by
    # docs/_ext/anylaunch_runopts.py) lists each of its options
    from anylaunch.schedulers import get_scheduler_factories

    for name, factory in get_scheduler_factories().items():
        page = tmp_path / "html" / "schedulers" / f"{name}.html"
        assert page.is_file(), f"scheduler {name} has no page docs/schedulers/{name}.md"
        html = page.read_text()
        start = html.find("anylaunch-runopts")
        table = html[start : html.find("</table>", start)] if start >= 0 else ""
        missing = [opt for opt, _ in factory("docs").run_opts() if f">{opt}<" not in table]
        assert not missing, f"{page.name}: run options missing from the table: {missing}"


def _samples(page: Path) -> list[tuple[str, str]]:
    """The page's runnable samples in reading order: ("python", code) or ("console", line)."""
    samples: list[tuple[str, str]] = []
    for m in FENCE.finditer(page.read_text()):
        if m.group(1) == "python":
            samples.append(("python", m.group(2)))
        elif m.group(1) == "console":
            samples += [("console", ln) for ln in m.group(2).splitlines() if ln.startswith("$")]
    return samples


def _run_console(line: str, cwd: Path) -> None:
    argv = _anylaunch_argv(line)
    if argv is None:
        return  # the test command: CI runs it
    result = subprocess.run(
        argv, capture_output=True, text=True, cwd=cwd, env=dict(os.environ), timeout=300
    )
    assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_samples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page's samples run in reading order in one directory, as a reader would run them: a
    Python sample may write the file that a later console line runs."""
    samples = _samples(page)
    if not samples:
        return  # a page without samples has nothing to run (counted, never skipped)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    # a sample may set env vars as a reader would (an archive URL): none outlives its page
    saved_env = dict(os.environ)
    try:
        _run_samples(page, samples, tmp_path)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)


def _run_samples(page: Path, samples: list[tuple[str, str]], tmp_path: Path) -> None:
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    number = 0
    for kind, text in samples:
        if kind == "console":
            _run_console(text, tmp_path)
            continue
        number += 1
        where = f"{page.relative_to(ROOT)}[python sample {number}]"
        # dont_inherit: not this module's `from __future__ import annotations` (a reader's
        # session has none; Dagster, for one, reads annotations as classes)
        code = compile(text, where, "exec", dont_inherit=True)
        exec(code, namespace)
