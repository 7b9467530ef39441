"""``anylaunch run`` names its calling context in the job's metadata, as TorchX's CLI does:
``cli_run`` unless ``$ANYLAUNCH_CONTEXT_NAME`` says otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from anylaunch.specs import ANYLAUNCH_CONTEXT_NAME, app_metadata
from tests.cli.test_cli_json import json_of


@pytest.mark.parametrize(("given", "context"), [(None, "cli_run"), ("nightly", "nightly")])
def test_run_stamps_its_calling_context_into_the_job(
    cli: Any, given: str | None, context: str
) -> None:
    cli.env.pop(ANYLAUNCH_CONTEXT_NAME, None)
    if given is not None:
        cli.env[ANYLAUNCH_CONTEXT_NAME] = given
    handle = json_of(cli, "run", "--wait", "--json", "utils.echo")["app_handle"]
    described = json_of(cli, "describe", "--json", handle)
    assert described["AppDef"]["metadata"][app_metadata.CONTEXT] == context
