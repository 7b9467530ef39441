"""``anylaunch run --stdin`` (the run's arguments as JSON) and ``run --tee_logs``, as real
subprocesses on the real local_cwd scheduler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli
from tests.cli.test_cli import assert_one_line_error


def _json(**fields: Any) -> str:
    base: dict[str, Any] = {
        "component_name": "utils.echo",
        "scheduler": "local_cwd",
        "scheduler_args": {},
    }
    return json.dumps({**base, **fields})


# --- run --stdin ------------------------------------------------------------------------------


def test_stdin_runs_the_component_with_its_mapping_args_and_waits_with_logs(cli: Cli) -> None:
    given = _json(component_args={"msg": "from json", "num_replicas": 2}, log=True)
    result = cli("run", "--stdin", input=given)
    assert result.returncode == 0, result.stderr
    handle = result.stdout.strip()
    assert handle.startswith("local_cwd://"), result.stdout
    assert "echo/0 from json" in result.stderr
    assert "echo/1 from json" in result.stderr
    assert cli.status(handle)["state"] == "SUCCEEDED"


def test_stdin_cli_style_args_win_and_dryrun_prints_json_with_run_options(
    cli: Cli, tmp_path: Path
) -> None:
    given = _json(
        component_args={"msg": "ignored"},
        component_args_str=["--msg", "from args_str"],
        scheduler_args={"log_dir": str(tmp_path / "logs")},
        dryrun=True,
    )
    result = cli("run", "--stdin", "--json", input=given)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["app"]["roles"][0]["args"] == ["from args_str"]
    assert str(tmp_path / "logs") in out["request"]
    assert not (tmp_path / "logs").exists()  # nothing was submitted


def test_stdin_without_wait_prints_the_handle_and_launches(cli: Cli) -> None:
    result = cli("run", "--stdin", input=_json(component_args={"msg": "bg"}))
    assert result.returncode == 0, result.stderr
    status = cli.wait_for(result.stdout.strip(), lambda s: s["state"] == "SUCCEEDED")
    assert status["state"] == "SUCCEEDED"


@pytest.mark.parametrize(
    ("given", "fragments"),
    [
        ("", ["run --stdin", "standard input is empty", "Fix:"]),
        ('{"component_name": ', ["run --stdin", "not valid JSON", "line 1", "Fix:"]),
        ("[1, 2]", ["run --stdin", "must be a JSON object", "Fix:"]),
        (
            '{"component_name": "utils.echo", "scheduler": "local_cwd"}',
            ["scheduler_args=<missing>", "required", 'Fix: add "scheduler_args": {}'],
        ),
        (_json(dryun=True), ["dryun", "not a run argument", "Did you mean 'dryrun'?", "Fix:"]),
        (_json(wait="yes"), ["wait='yes'", "must be a boolean", "JSON string", "Fix:"]),
        (_json(scheduler=3), ["scheduler=3", "non-empty string", "Fix:"]),
        (_json(component_args=["--msg"]), ["component_args", "an object", "JSON array", "Fix:"]),
        (_json(component_args_str="--msg hi"), ["component_args_str", "array of strings"]),
        (_json(parent_run_id=7), ["parent_run_id=7", "a string or null"]),
        (
            _json(scheduler_args={"log_dri": "/tmp"}),
            ["log_dri", "unknown run option", "Did you mean 'log_dir'?", "Fix:"],
        ),
        (_json(scheduler_args={"log_dir": 5}), ["log_dir=5", "Fix:"]),
    ],
)
def test_stdin_bad_input_is_one_error_naming_the_field_and_the_fix(
    cli: Cli, given: str, fragments: list[str]
) -> None:
    result = cli("run", "--stdin", input=given)
    assert_one_line_error(result, *fragments)
    assert result.stdout == ""


def test_stdin_malformed_json_is_not_echoed(cli: Cli) -> None:
    result = cli("run", "--stdin", input='{"component_args": {"token": "s3cr3t-value"')
    assert_one_line_error(result, "not valid JSON")
    assert "s3cr3t-value" not in result.stderr


def test_stdin_refuses_run_flags_besides_it(cli: Cli) -> None:
    result = cli("run", "--stdin", "--wait", "-s", "local_cwd", "utils.echo", input=_json())
    assert result.returncode == 2, result.stderr
    assert "--stdin" in result.stderr
    assert "--wait" in result.stderr and "-s/--scheduler" in result.stderr
    assert "COMPONENT" in result.stderr


def test_stdin_masks_the_secret_env_it_is_told_of(cli: Cli) -> None:
    given = _json(
        component_name="utils.sh",
        component_args_str=["--env", "DB_URL=postgres://pw@db", "--", "echo", "$DB_URL"],
        dryrun=True,
    )
    result = cli("run", "--stdin", "--secret-env", "DB_URL", input=given)
    assert result.returncode == 0, result.stderr
    assert "postgres://pw@db" not in result.stdout


# --- run --tee_logs ---------------------------------------------------------------------------


def test_tee_logs_waits_and_prefixes_every_line_with_its_replica(cli: Cli) -> None:
    result = cli(
        "run",
        "--tee_logs",
        "utils.sh",
        "--num_replicas",
        "2",
        "printf",
        "10%%\\r20%%\\ndone\\n",
    )
    assert result.returncode == 0, result.stderr
    handle = result.stdout.strip()
    assert handle.startswith("local_cwd://"), result.stdout
    for k in (0, 1):
        # each part of a progress line (split at its carriage return) keeps the prefix
        assert f"sh/{k} 10%\n" in result.stderr, repr(result.stderr)
        assert f"sh/{k} 20%\n" in result.stderr, repr(result.stderr)
        assert f"sh/{k} done\n" in result.stderr
    assert "\x1b[" not in result.stderr  # no colors off a terminal
    assert cli.status(handle)["state"] == "SUCCEEDED"


def test_tee_logs_of_a_failing_app_exits_1(cli: Cli) -> None:
    result = cli("run", "--tee_logs", "utils.sh", "sh", "-c", "echo oops; exit 3")
    assert result.returncode == 1, result.stderr
    assert "sh/0 oops" in result.stderr
    assert "FAILED" in result.stderr


def test_tee_logs_from_stdin(cli: Cli) -> None:
    result = cli("run", "--stdin", input=_json(component_args={"msg": "teed"}, tee_logs=True))
    assert result.returncode == 0, result.stderr
    assert "echo/0 teed" in result.stderr


def test_stdin_on_a_terminal_says_it_waits_for_the_json(cli: Cli) -> None:
    import os
    import pty
    import subprocess

    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            cli.argv("run", "--stdin"),
            cwd=cli.cwd,
            env=cli.env,
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.write(leader, _json(component_args={"msg": "typed"}, dryrun=True).encode() + b"\n")
        os.write(leader, b"\x04")  # Ctrl-D at the start of a line: end of input
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(leader)
        os.close(follower)
    assert proc.returncode == 0, err
    assert "reading the run's arguments as JSON; end them with Ctrl-D" in err
    assert "=== SCHEDULER REQUEST ===" in out
