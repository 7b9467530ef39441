"""How tests ask for a real backend: skip on a developer machine without it, fail in CI."""

import os

import pytest


def in_ci() -> bool:
    """True when running under CI (`CI=true`), where every backend must be present."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_backend(name: str, available: bool, how: str) -> None:
    """Skips (locally) or fails (in CI) the calling test when backend ``name`` is unavailable.

    Args:
        name: the backend, e.g. "dockerd"
        available: whether it was found
        how: what brings it up, e.g. "bash scripts/provision/docker.sh"
    """
    if available:
        return
    message = f"backend {name} is not available; bring it up with: {how}"
    if in_ci():
        pytest.fail(f"{message} (CI must run every backend: a missing one is a failure)")
    pytest.skip(message)
