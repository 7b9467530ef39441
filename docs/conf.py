"""Sphinx configuration: Markdown pages (MyST), the API reference from docstrings.

Built by the test command with warnings as errors (``tests/test_docs.py``).
"""

import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "anylaunch"
author = "the anylaunch authors"
copyright = "2026, the anylaunch authors"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "anylaunch_runopts",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# the integrations' engines are real imports in the docs build; keep the reference readable
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = "furo"


def _markdown_fences_to_rst(app, what, name, obj, options, lines):  # type: ignore[no-untyped-def]
    """Prefect renders block docstrings as Markdown in its UI, so they use ``` fences; Sphinx
    reads reStructuredText, so a fence becomes a code-block here (docstrings stay as they are)."""
    out: list[str] = []
    fenced = False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("```"):
            indent = line[: len(line) - len(line.lstrip())]
            if not fenced:
                language = stripped[3:].strip() or "text"
                out += [f"{indent}.. code-block:: {language}", ""]
            else:
                out.append("")
            fenced = not fenced
            continue
        out.append(f"   {line}" if fenced and line else line)
    lines[:] = out


def _quiet_engine_homes(root: Path) -> None:
    """Autodoc imports the engines, and importing one writes its home (Airflow its config and
    logs under ``~/airflow``, Prefect ``~/.prefect``) and logs at INFO: keep both inside the
    build directory, and quiet."""
    for variable, name in (
        ("AIRFLOW_HOME", "airflow"),
        ("PREFECT_HOME", "prefect"),
        ("DAGSTER_HOME", "dagster"),
    ):
        home = root / name
        home.mkdir(parents=True, exist_ok=True)
        os.environ[variable] = str(home)
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["AIRFLOW__LOGGING__LOGGING_LEVEL"] = "WARNING"
    os.environ["PREFECT_LOGGING_LEVEL"] = "WARNING"
    for logger in ("airflow", "prefect", "dagster"):
        logging.getLogger(logger).setLevel(logging.WARNING)


def setup(app):  # type: ignore[no-untyped-def]
    app.connect("autodoc-process-docstring", _markdown_fences_to_rst)
    _quiet_engine_homes(Path(app.doctreedir) / "engine-homes")
    # Dagster builds its pydantic config models at import; importing it while autodoc is
    # importing another module fails inside pydantic (a Sphinx/pydantic interaction, not ours),
    # so load it here, before autodoc runs (and once its home is set).
    import dagster  # noqa: F401


html_title = "anylaunch"
