"""The bad-input suite (issue 15): every public entry point rejects input that cannot work
with the project's error (or, for pydantic-based engine configs, the engine's own validation
error carrying ours) that names the field, never an internal exception, and never quotes a
secret. Each module is a table of cases; ``python -m pytest tests/bad_input --collect-only``
counts them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from anylaunch.specs.errors import AnylaunchError

SECRET = "s3cr3t-bad-input-value"


@dataclass(frozen=True)
class Case:
    """One bad input: what to call, and the field its error must name."""

    id: str
    call: Callable[[], Any]
    field: str

    def param(self) -> Any:
        return pytest.param(self.call, self.field, id=self.id)


def _accepted_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [AnylaunchError]
    try:  # the engines' own validation errors (pydantic-based configs), if installed
        from pydantic import ValidationError

        types.append(ValidationError)
    except ImportError:
        pass
    try:
        from airflow_anylaunch.exceptions import AnylaunchInputError

        types.append(AnylaunchInputError)
    except ImportError:
        pass
    return tuple(types)


ACCEPTED = _accepted_types()


def assert_rejected(call: Callable[[], Any], field: str) -> None:
    """``call`` raises one of the accepted error types, naming ``field``, without the secret."""
    try:
        call()
    except ACCEPTED as e:
        text = str(e)
        named = field in text or field in str(getattr(e, "field", ""))
        assert named, f"{type(e).__name__} does not name {field!r}: {text}"
        assert SECRET not in text, f"the error quotes a secret: {text}"
        assert "Traceback" not in text
        return
    pytest.fail(f"accepted: no error naming {field!r}")


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Nothing a case might launch lands in a shared state dir."""
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    yield
    state = tmp_path / "state"
    launched = [p.name for p in state.iterdir()] if state.exists() else []
    assert not [p for p in launched if not p.startswith((".", "forkserver"))], (
        f"a rejected input launched something: {launched}"
    )
