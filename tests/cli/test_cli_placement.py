"""The CLI of placement: ``run -s A -s B`` (ordered targets), its flags and their refusals,
``--dryrun`` of every target, ``status`` and ``describe`` of the stable handle.

The real ``anylaunch`` command runs in a subprocess. ``fulllocal`` is a plugin scheduler (a
real ``anylaunch_plugins`` namespace package on the CLI's path): local_cwd whose capacity
check says no, so the first target is skipped and the app runs on the real local_cwd.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import with_plugin_scheduler
from tests.cli.test_cli_arrays import one_error

# the plugin the Airflow tests use, as a user's plugin file
FULLLOCAL = (
    Path(__file__).resolve().parents[1]
    / "integrations/airflow/plugins/anylaunch_plugins/schedulers/fulllocal.py"
).read_text()


@pytest.fixture
def place_cli(cli: Any, tmp_path: Path) -> Any:
    with_plugin_scheduler(cli, tmp_path, "fulllocal", FULLLOCAL)
    cli.env["ANYLAUNCH_HOME"] = str(tmp_path / "al-home")
    cli.env["ANYLAUNCH_CHECKPOINT_ROOT"] = str(tmp_path / "ckpt")
    return cli


def test_repeated_s_skips_a_full_target_and_status_and_describe_show_the_history(
    place_cli: Any, tmp_path: Path
) -> None:
    result = place_cli(
        "run", "-s", "fulllocal", "-s", "local_cwd", "--wait", "utils.echo", "--msg", "placed"
    )
    assert result.returncode == 0, result.stderr
    handle = result.stdout.strip().splitlines()[0]
    assert handle.startswith("placement://")
    assert "not placing attempt 0 on fulllocal: no: every slot is taken" in result.stderr

    status = place_cli("status", handle)
    assert status.returncode == 0, status.stderr
    assert "State:         SUCCEEDED" in status.stdout
    assert "Placement:     attempt 0 on local_cwd (local_cwd://" in status.stdout
    assert "attempt 0 on fulllocal: skipped (no: every slot is taken)" in status.stdout

    described = place_cli("describe", "--json", handle)
    assert described.returncode == 0, described.stderr
    placement = json.loads(described.stdout)["placement"]
    assert [(e["scheduler"], e["outcome"]) for e in placement["entries"]] == [
        ("fulllocal", "skipped"),
        ("local_cwd", "ended"),
    ]
    assert placement["checkpoint_url"].startswith(str(tmp_path / "ckpt"))
    log = place_cli("log", handle)
    assert log.returncode == 0 and "placed" in log.stdout, (log.stdout, log.stderr)


def test_dryrun_shows_every_targets_request_and_submits_nothing(place_cli: Any) -> None:
    result = place_cli(
        "run", "-s", "local_cwd", "-s", "fulllocal", "--dryrun", "utils.echo", "--msg", "x"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("=== SCHEDULER REQUEST ===") == 2
    assert "=== TARGET local_cwd ===" in result.stdout
    assert "=== TARGET fulllocal ===" in result.stdout
    listed = place_cli("list", "-s", "local_cwd", "--json")
    assert json.loads(listed.stdout or "[]") == []


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (["-s", "local_cwd", "-s", "local_cwd", "-cfg", "log_dir=/x"], ("-cfg", "ambiguous")),
        (["-s", "local_cwd", "-cfg", "", "-cfg", ""], ("-cfg", "2 times for 1")),
        (["--max-infra-retries", "-1"], ("--max-infra-retries", "whole number")),
        (["--max-infra-retries", "101"], ("max_infra_retries", "0..100")),
        (["--startup-timeout", "nan"], ("--startup-timeout", "seconds > 0")),
        (["--startup-timeout", "0"], ("--startup-timeout", "seconds > 0")),
        (["-s", "local_cwd", "-s", "nosuch"], ("nosuch",)),
    ],
)
def test_bad_placement_flags_are_refused_before_anything_runs(
    place_cli: Any, flags: list[str], fragments: tuple[str, ...]
) -> None:
    result = place_cli("run", *flags, "utils.echo", "--msg", "x")
    one_error(result, *fragments)
    listed = place_cli("list", "-s", "local_cwd", "--json")
    assert json.loads(listed.stdout or "[]") == []
