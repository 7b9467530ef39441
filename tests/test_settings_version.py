"""anylaunch.settings and anylaunch.version: TorchX's constants, the same as the modules use."""

from __future__ import annotations

import subprocess
import sys

import anylaunch
from anylaunch import settings, version
from anylaunch.components import DEFAULT_IMAGE, get_component
from anylaunch.runner.config import ENV_ANYLAUNCHCONFIG
from anylaunch.tracker.api import (
    ENV_ANYLAUNCH_JOB_ID,
    ENV_ANYLAUNCH_PARENT_RUN_ID,
    ENV_ANYLAUNCH_TRACKERS,
)


def test_settings_are_the_names_the_code_uses() -> None:
    assert settings.ENV_ANYLAUNCH_TRACKERS == ENV_ANYLAUNCH_TRACKERS == "ANYLAUNCH_TRACKERS"
    assert settings.ENV_ANYLAUNCH_PARENT_RUN_ID == ENV_ANYLAUNCH_PARENT_RUN_ID
    assert settings.ENV_ANYLAUNCH_JOB_ID == ENV_ANYLAUNCH_JOB_ID == "ANYLAUNCH_JOB_ID"
    assert settings.ENV_ANYLAUNCHCONFIG == ENV_ANYLAUNCHCONFIG == "ANYLAUNCHCONFIG"
    assert all(getattr(settings, n).startswith("ANYLAUNCH") for n in settings.__all__)


def test_settings_import_nothing_of_ours() -> None:
    code = (
        "import sys, anylaunch.settings; print(sorted(m for m in sys.modules if 'anylaunch' in m))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "['anylaunch', 'anylaunch.settings']"


def test_version() -> None:
    assert version.__version__ == anylaunch.__version__
    assert version.ANYLAUNCH_IMAGE == DEFAULT_IMAGE
    # the built-ins run in it unless given an image
    assert get_component("utils.echo").fn().roles[0].image == version.ANYLAUNCH_IMAGE
