"""``--json`` on every subcommand that prints results: stdout parses with ``json.loads``."""

from __future__ import annotations

import json
from typing import Any

from anylaunch.specs import AppState


def json_of(cli: Any, *args: str) -> Any:
    result = cli(*args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_run_json_prints_the_handle_and_state(cli: Any) -> None:
    waited = json_of(cli, "run", "--wait", "--json", "utils.echo", "--msg", "hi")
    assert set(waited) == {"app_handle", "state"}
    assert waited["state"] == "SUCCEEDED"
    assert cli.status(waited["app_handle"])["state"] == "SUCCEEDED"

    launched = json_of(cli, "run", "--json", "utils.sh", "sleep", "60")
    try:
        assert launched["state"] in {"SUBMITTED", "PENDING", "RUNNING"}
    finally:
        cancelled = json_of(cli, "cancel", "--json", launched["app_handle"])
    assert cancelled == {
        "app_handle": launched["app_handle"],
        "cancelled": True,
        "state": cancelled["state"],
    }
    assert not AppState[cancelled["state"]].is_terminal()
    ended = cli.wait_for(launched["app_handle"], lambda s: AppState[s["state"]].is_terminal())
    again = json_of(cli, "cancel", "--json", launched["app_handle"])
    assert again == {
        "app_handle": launched["app_handle"],
        "cancelled": False,
        "state": ended["state"],
    }


def test_failed_run_json_still_prints_json_and_exits_1(cli: Any) -> None:
    result = cli("run", "--wait", "--json", "utils.sh", "exit", "3")
    assert result.returncode == 1
    assert json.loads(result.stdout)["state"] == "FAILED"


def test_dryrun_json_masks_secrets(cli: Any) -> None:
    secret = "s3cr3t-value-123"
    data = json_of(
        cli, "run", "--dryrun", "--json", "utils.sh", "--env", f"API_TOKEN={secret}", "true"
    )
    assert data["app"]["roles"][0]["args"][-1] == "true"
    assert data["app"]["roles"][0]["env"]["API_TOKEN"] == "***"
    assert secret not in json.dumps(data)
    assert json_of(cli, "list", "-s", "local_cwd", "--json") == []


def test_status_list_describe_delete_json(cli: Any) -> None:
    handle = json_of(cli, "run", "--wait", "--json", "utils.echo")["app_handle"]

    status = json_of(cli, "status", "--json", handle)
    assert status["app_handle"] == handle and status["state"] == "SUCCEEDED"
    listed = json_of(cli, "list", "-s", "local_cwd", "--json")
    assert [(a["app_handle"], a["state"]) for a in listed] == [(handle, "SUCCEEDED")]
    described = json_of(cli, "describe", "--json", handle)
    assert described["AppDef"]["roles"][0]["name"] == "echo"
    assert json_of(cli, "delete", "--json", handle) == {"app_handle": handle, "deleted": True}
    assert json_of(cli, "list", "-s", "local_cwd", "--json") == []


def test_log_json_prints_one_object_per_line(cli: Any) -> None:
    handle = json_of(
        cli, "run", "--wait", "--json", "utils.sh", "--num_replicas", "2", "--", "sh", "-c",
        "echo 'a \"quoted\" line'; echo second",
    )["app_handle"]  # fmt: skip

    result = cli("log", "--json", handle)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted((r["role"], r["replica"], r["line"]) for r in records) == [
        ("sh", 0, 'a "quoted" line'),
        ("sh", 0, "second"),
        ("sh", 1, 'a "quoted" line'),
        ("sh", 1, "second"),
    ]
    only = cli("log", "--json", "--regex", "sec", f"{handle}/sh/1")
    assert [json.loads(line) for line in only.stdout.splitlines()] == [
        {"role": "sh", "replica": 1, "line": "second"}
    ]


def test_runopts_json(cli: Any) -> None:
    from anylaunch.runner import get_runner
    from anylaunch.schedulers import get_scheduler_factories

    with get_runner() as runner:
        names = [name for name, _ in runner.scheduler_run_opts("local_cwd")]
    one = json_of(cli, "runopts", "--json", "local_cwd")
    assert list(one) == ["local_cwd"]
    assert one["local_cwd"]["available"] is True
    assert sorted(one["local_cwd"]["options"]) == sorted(names)
    option = one["local_cwd"]["options"][names[0]]
    assert set(option) == {"type", "default", "required", "help"}

    everything = json_of(cli, "runopts", "--json")
    assert set(everything) == set(get_scheduler_factories())
    for entry in everything.values():
        assert entry["available"] or entry["error"]


def test_builtins_json(cli: Any) -> None:
    from anylaunch.components import get_components

    listed = json_of(cli, "builtins", "--json")
    assert [c["name"] for c in listed] == sorted(get_components())
    echo = next(c for c in listed if c["name"] == "utils.echo")
    assert echo["description"] == get_components()["utils.echo"].description
    printed = json_of(cli, "builtins", "--json", "--print", "utils.echo")
    assert printed["name"] == "utils.echo"
    assert "def echo(" in printed["source"]
    assert printed["path"].endswith(".py")


def test_status_and_list_print_aligned_tables(cli: Any) -> None:
    failed = cli(
        "run", "--wait", "--json", "utils.sh", "--num_replicas", "2", "--", "sh", "-c",
        # replica 1 fails once replica 0 surely ended (a failure stops the others)
        "[ ${replica_id} = 0 ] || { sleep 2; exit 1; }",
    )  # fmt: skip
    assert failed.returncode == 1, failed.stderr
    handle = json.loads(failed.stdout)["app_handle"]

    lines = cli("status", handle).stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("ROLE"))
    table = lines[header : header + 3]
    assert [row.split()[:3] for row in table[1:]] == [
        ["sh", "0", "SUCCEEDED"],
        ["sh", "1", "FAILED"],
    ]
    # every column starts at the same offset in every row
    for column in ("REPLICA", "STATE", "EXIT", "HOSTNAME"):
        start = table[0].index(column)
        assert all(row[start - 2 : start] == "  " and row[start] != " " for row in table), table
    assert "sh[1] error_msg:" in "\n".join(lines)

    other = json_of(cli, "run", "--wait", "--json", "utils.echo")["app_handle"]
    listed = cli("list", "-s", "local_cwd").stdout.splitlines()
    assert listed[0].split() == ["APP", "HANDLE", "STATE", "NAME"]
    state_at = listed[0].index("STATE")
    by_handle = {row.split()[0]: row[state_at:].split()[0] for row in listed[1:]}
    assert by_handle == {handle: "FAILED", other: "SUCCEEDED"}


def test_status_and_log_mask_the_apps_secrets(cli: Any) -> None:
    token, declared = "tok-0123456789", "conn-9876543210"
    script = "echo token=$API_TOKEN conn=$DB_CONN; echo $API_TOKEN $DB_CONN >&2; exit 3"
    failed = cli(
        "run", "--wait", "--json", "utils.sh", "--env", f"API_TOKEN={token},DB_CONN={declared}",
        "sh", "-c", script,
    )  # fmt: skip
    assert failed.returncode == 1, failed.stderr
    handle = json.loads(failed.stdout)["app_handle"]

    outputs = []
    for args in (["status"], ["status", "--json"], ["log"], ["log", "--json"]):
        result = cli(*args, "--secret-env", "DB_CONN", handle)
        assert result.returncode == 0, result.stderr
        outputs.append(result.stdout)
    status_text, status_json, log_text, log_json = outputs
    assert "sh/0 token=*** conn=***" in log_text.splitlines()
    assert {"role": "sh", "replica": 0, "line": "token=*** conn=***"} in [
        json.loads(line) for line in log_json.splitlines()
    ]
    status = json.loads(status_json)
    assert status["state"] == "FAILED"
    # the failure's stderr tail quotes both values: masked
    assert "*** ***" in status["structured_error_msg"]
    assert "FAILED" in status_text
    for output in outputs:
        assert token not in output
        assert declared not in output
