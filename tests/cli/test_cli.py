"""End-to-end tests of the ``anylaunch`` CLI: real subprocesses on the real local_cwd scheduler."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest
import yaml

from anylaunch.specs import AppState, parse_app_handle
from anylaunch.specs.serialize import appdef_from_yaml, appdef_to_dict


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "error:" in line]


def assert_one_line_error(result: Any, *fragments: str, code: int = 1) -> str:
    """The command failed with ``code`` and one error line (no traceback) naming ``fragments``."""
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return str(lines[0])


def terminal(status: dict[str, Any]) -> bool:
    return AppState[status["state"]].is_terminal()


# --- run ------------------------------------------------------------------------------------


def test_run_wait_log_echo_prints_prefixed_lines_and_only_the_handle_on_stdout(cli: Any) -> None:
    result = cli("run", "--wait", "--log", "utils.echo", "--msg", "hello from the cli")

    assert result.returncode == 0, result.stderr
    handle = result.stdout.strip()
    assert result.stdout == handle + "\n"  # nothing but the handle: scripts capture it
    assert parse_app_handle(handle).scheduler_backend == "local_cwd"
    assert "echo/0 hello from the cli" in result.stderr.splitlines()
    assert "SUCCEEDED" in result.stderr


def test_run_wait_log_sh_streams_every_replica(cli: Any) -> None:
    result = cli(
        "run", "--log", "utils.sh", "--num_replicas", "2", "echo", "line-one", "&&", "echo", "x"
    )

    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    # utils.sh quotes each argument: "&&" reaches echo literally
    assert "sh/0 line-one && echo x" in lines
    assert "sh/1 line-one && echo x" in lines


def test_run_wait_of_a_failing_app_exits_1_and_prints_the_status(cli: Any) -> None:
    result = cli("run", "--wait", "utils.sh", "exit", "3")

    assert result.returncode == 1
    assert "FAILED" in result.stderr
    assert "Traceback" not in result.stderr
    handle = result.stdout.strip()
    assert cli.status(handle)["state"] == "FAILED"


def test_run_log_of_a_failing_app_shows_its_output_and_exits_1(cli: Any) -> None:
    result = cli("run", "--log", "utils.sh", "--", "sh", "-c", "echo before-failing; exit 3")

    assert result.returncode == 1
    assert "sh/0 before-failing" in result.stderr.splitlines()
    assert "FAILED" in result.stderr


def test_run_without_wait_returns_the_handle_of_a_running_app(cli: Any) -> None:
    handle = cli.launch("utils.sh", "sleep", "30")
    try:
        assert cli.status(handle)["state"] in {"SUBMITTED", "PENDING", "RUNNING"}
    finally:
        cli("cancel", handle)


def test_dryrun_shows_the_request_and_submits_nothing(cli: Any) -> None:
    result = cli("run", "--dryrun", "utils.echo", "--msg", "dry-message")

    assert result.returncode == 0, result.stderr
    assert "=== SCHEDULER REQUEST ===" in result.stdout
    app_part, request_part = result.stdout.split("=== SCHEDULER REQUEST ===")
    app = yaml.safe_load(app_part.replace("=== APPLICATION ===", ""))
    assert app["roles"][0]["args"] == ["dry-message"]
    assert "dry-message" in request_part
    listed = cli("list", "-s", "local_cwd", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []


def test_run_takes_defaults_from_the_cli_run_section(cli: Any) -> None:
    (cli.cwd / ".anylaunchconfig").write_text(
        "[cli:run]\ncomponent = utils.echo\nscheduler = local_cwd\n"
        "[component:utils.echo]\nmsg = from-the-config\n"
    )

    result = cli("run", "--log")
    assert result.returncode == 0, result.stderr
    assert "echo/0 from-the-config" in result.stderr.splitlines()

    overridden = cli("run", "--log", "--", "--msg", "from-the-cli")
    assert overridden.returncode == 0, overridden.stderr
    assert "echo/0 from-the-cli" in overridden.stderr.splitlines()


def test_parent_run_id_reaches_the_app(cli: Any) -> None:
    result = cli(
        "run", "--log", "--parent_run_id", "parent-42", "utils.sh", "--", "printenv",
        "ANYLAUNCH_PARENT_RUN_ID",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert "sh/0 parent-42" in result.stderr.splitlines()


def test_ctrl_c_while_waiting_exits_130_and_leaves_the_app_running(cli: Any) -> None:
    proc = cli.popen("run", "--wait", "utils.sh", "sleep", "60")
    try:
        assert proc.stdout is not None
        handle = proc.stdout.readline().strip()  # printed before waiting starts
        parse_app_handle(handle)
        # as a terminal's Ctrl-C does: SIGINT to the whole foreground process group
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert f"anylaunch cancel {handle}" in stderr
    assert "Traceback" not in stderr
    assert cli.status(handle)["state"] == "RUNNING"

    assert cli("cancel", handle).returncode == 0
    assert cli.wait_for(handle, terminal)["state"] == "CANCELLED"


# --- status, describe, list, cancel, delete ---------------------------------------------------


def test_status_json_parses_and_filters_roles(cli: Any) -> None:
    handle = cli("run", "--wait", "utils.echo", "--num_replicas", "2").stdout.strip()

    status = cli.status(handle)
    assert status["app_handle"] == handle
    assert status["state"] == "SUCCEEDED"
    [role] = status["roles"]
    assert role["role"] == "echo"
    assert sorted(r["id"] for r in role["replicas"]) == [0, 1]

    filtered = json.loads(cli("status", "--json", "--roles", "other", handle).stdout)
    assert filtered["roles"] == []

    text = cli("status", handle)
    assert text.returncode == 0
    assert ["State:", "SUCCEEDED"] in [line.split() for line in text.stdout.splitlines()]


def test_describe_prints_the_app_as_yaml(cli: Any) -> None:
    handle = cli("run", "--wait", "utils.echo", "--msg", "described").stdout.strip()

    result = cli("describe", handle)
    assert result.returncode == 0, result.stderr
    data = yaml.safe_load(result.stdout)
    assert data["app_handle"] == handle
    [role] = data["AppDef"]["roles"]
    assert role["name"] == "echo"
    assert role["num_replicas"] == 1
    # the printed document reads back as the AppDef it shows
    app = appdef_from_yaml(result.stdout)
    assert app.roles[0].args == ["described"]
    assert appdef_to_dict(app) == data["AppDef"]


def test_list_shows_launched_apps(cli: Any) -> None:
    handle = cli("run", "--wait", "utils.echo").stdout.strip()

    table = cli("list", "-s", "local_cwd")
    assert table.returncode == 0, table.stderr
    assert handle in table.stdout
    listed = json.loads(cli("list", "-s", "local_cwd", "--json").stdout)
    assert [(a["app_handle"], a["state"]) for a in listed] == [(handle, "SUCCEEDED")]


def test_cancel_a_sleeping_app_ends_cancelled(cli: Any) -> None:
    handle = cli.launch("utils.sh", "sleep", "60")

    result = cli("cancel", handle)
    assert result.returncode == 0, result.stderr
    assert cli.wait_for(handle, terminal)["state"] == "CANCELLED"
    # cancelling again is harmless
    assert cli("cancel", handle).returncode == 0


def test_delete_removes_the_app(cli: Any) -> None:
    handle = cli("run", "--wait", "utils.echo").stdout.strip()

    assert cli("delete", handle).returncode == 0
    gone = cli("status", handle)
    assert gone.returncode == 3
    assert json.loads(cli("list", "--json").stdout) == []


# --- log --------------------------------------------------------------------------------------


@pytest.fixture
def two_replica_app(cli: Any) -> str:
    result = cli(
        "run", "--wait", "utils.sh", "--num_replicas", "2", "--", "sh", "-c",
        # the scheduler substitutes the replica_id macro per replica
        "echo alpha-${replica_id}; echo beta",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return str(result.stdout.strip())


def log_lines(cli: Any, *args: str) -> list[str]:
    result = cli("log", *args)
    assert result.returncode == 0, result.stderr
    return sorted(result.stdout.splitlines())


def test_log_of_the_whole_app_prefixes_every_replica(cli: Any, two_replica_app: str) -> None:
    lines = log_lines(cli, two_replica_app)

    assert lines == ["sh/0 alpha-0", "sh/0 beta", "sh/1 alpha-1", "sh/1 beta"]


def test_log_selects_a_role_and_replicas(cli: Any, two_replica_app: str) -> None:
    everything = log_lines(cli, two_replica_app)
    assert log_lines(cli, f"{two_replica_app}/sh") == everything
    assert log_lines(cli, f"{two_replica_app}/sh/0,1") == everything
    assert log_lines(cli, f"{two_replica_app}/sh/1") == ["sh/1 alpha-1", "sh/1 beta"]


def test_log_regex_filters_lines(cli: Any, two_replica_app: str) -> None:
    assert log_lines(cli, "--regex", "^bet", two_replica_app) == ["sh/0 beta", "sh/1 beta"]


def test_log_tail_follows_a_running_app_to_its_end(cli: Any) -> None:
    handle = cli.launch("utils.sh", "--", "sh", "-c", "echo first; sleep 2; echo second")

    assert log_lines(cli, "--tail", handle) == ["sh/0 first", "sh/0 second"]


def test_ctrl_c_stops_a_tail_with_130(cli: Any) -> None:
    handle = cli.launch("utils.sh", "--", "sh", "-c", "echo started; sleep 60")
    proc = cli.popen("log", "--tail", handle)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "sh/0 started\n"
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
        cli("cancel", handle)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr


def test_log_of_an_unknown_role_suggests_the_right_one(cli: Any, two_replica_app: str) -> None:
    result = cli("log", f"{two_replica_app}/shh")
    assert_one_line_error(result, "'shh'", "Did you mean 'sh'?")

    out_of_range = cli("log", f"{two_replica_app}/sh/5")
    assert_one_line_error(out_of_range, "2 replica")


# --- runopts, builtins, configure -------------------------------------------------------------


def test_runopts_of_local_cwd(cli: Any) -> None:
    from anylaunch.runner import get_runner

    with get_runner() as runner:
        options = [name for name, _ in runner.scheduler_run_opts("local_cwd")]
    result = cli("runopts", "local_cwd")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("local_cwd:")
    for name in options:
        assert name in result.stdout


def test_runopts_of_all_schedulers_survives_unavailable_ones(cli: Any) -> None:
    from anylaunch.schedulers import get_scheduler_factories

    result = cli("runopts")
    assert result.returncode == 0, result.stderr
    for name in get_scheduler_factories():
        assert f"\n{name}:" in "\n" + result.stdout


def test_builtins_lists_components_and_prints_source(cli: Any) -> None:
    from anylaunch.components import get_components

    listed = cli("builtins")
    assert listed.returncode == 0, listed.stderr
    for name, component in get_components().items():
        assert name in listed.stdout
        assert component.description in listed.stdout

    source = cli("builtins", "--print", "utils.echo")
    assert source.returncode == 0, source.stderr
    assert "def echo(" in source.stdout


def test_configure_print_and_write(cli: Any) -> None:
    printed = cli("configure", "--print", "-s", "local_cwd", "--all")
    assert printed.returncode == 0, printed.stderr
    assert "[local_cwd]" in printed.stdout
    assert not (cli.cwd / ".anylaunchconfig").exists()

    assert cli("configure", "-s", "local_cwd").returncode == 0
    assert "[local_cwd]" in (cli.cwd / ".anylaunchconfig").read_text()
    again = cli("configure", "-s", "local_cwd")
    assert_one_line_error(again, "already exists", "--force")
    assert cli("configure", "-s", "local_cwd", "--force").returncode == 0


# --- bad input: one line, no traceback ---------------------------------------------------------


def test_unknown_scheduler_suggests_the_right_one(cli: Any) -> None:
    assert_one_line_error(cli("run", "-s", "local_cdw", "utils.echo"), "Did you mean 'local_cwd'?")
    assert_one_line_error(cli("runopts", "local_cdw"), "Did you mean 'local_cwd'?")
    assert_one_line_error(cli("configure", "--print", "-s", "local_cdw"), "Did you mean")


def test_unknown_component_suggests_the_right_one(cli: Any) -> None:
    assert_one_line_error(cli("run", "utils.ecoh"), "Did you mean 'utils.echo'?")
    assert_one_line_error(cli("builtins", "--print", "utils.ecoh"), "Did you mean 'utils.echo'?")


def test_bad_component_args_show_argparse_message_and_usage(cli: Any) -> None:
    result = cli("run", "utils.echo", "--num_replicas", "two")

    line = assert_one_line_error(result, "--num_replicas", "'two'", code=2)
    assert "utils.echo" in line
    assert "usage:" in result.stderr
    assert "--msg" in result.stderr  # the component's usage, not run's


def test_unknown_run_option_suggests_the_right_one(cli: Any) -> None:
    from anylaunch.runner import get_runner

    with get_runner() as runner:
        name = next(name for name, _ in runner.scheduler_run_opts("local_cwd"))
    typo = name[:-1] + ("x" if name[-1] != "x" else "y")
    result = cli("run", "--dryrun", "-cfg", f"{typo}=1", "utils.echo")
    assert_one_line_error(result, typo, f"Did you mean '{name}'?")


PLUGIN_SCHEDULER = """
from anylaunch.schedulers.api import Scheduler
from anylaunch.specs import AppDryRunInfo, runopts


class QueueScheduler(Scheduler):
    def _run_opts(self):
        opts = runopts()
        opts.add("queue", type_=str, help="queue to submit to", required=True)
        return opts

    def _submit_dryrun(self, app, cfg):
        return AppDryRunInfo({"queue": cfg["queue"], "app": app.name}, repr)

    def schedule(self, dryrun_info):
        raise RuntimeError("this test scheduler never submits")

    def describe(self, app_id):
        return None

    def list(self, cfg=None):
        return []

    def _cancel_existing(self, app_id):
        pass


def create_scheduler(session_name, **kwargs):
    return QueueScheduler("queue_test", session_name)
"""


@pytest.fixture
def plugin_env(tmp_path: Any) -> dict[str, str]:
    """A real entry-point plugin: one scheduler with a required option, one that cannot load."""
    site = tmp_path / "plugins"
    (site / "clitest_plugins-0.0.0.dist-info").mkdir(parents=True)
    (site / "clitest_plugins-0.0.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: clitest-plugins\nVersion: 0.0.0\n"
    )
    (site / "clitest_plugins-0.0.0.dist-info" / "entry_points.txt").write_text(
        "[anylaunch.schedulers]\n"
        "queue_test = clitest_queue_scheduler:create_scheduler\n"
        "broken_test = clitest_no_such_module:create_scheduler\n"
    )
    (site / "clitest_queue_scheduler.py").write_text(PLUGIN_SCHEDULER)
    return {"PYTHONPATH": str(site)}


def test_missing_required_run_option(cli: Any, plugin_env: dict[str, str]) -> None:
    result = cli("run", "--dryrun", "-s", "queue_test", "utils.echo", env=plugin_env)
    assert_one_line_error(result, "queue", "required", "-cfg queue=")

    given = cli(
        "run", "--dryrun", "-s", "queue_test", "-cfg", "queue=q1", "utils.echo", env=plugin_env
    )
    assert given.returncode == 0, given.stderr
    assert "'queue': 'q1'" in given.stdout


def test_runopts_shows_why_a_scheduler_is_unavailable(cli: Any, plugin_env: dict[str, str]) -> None:
    everything = cli("runopts", env=plugin_env)
    assert everything.returncode == 0, everything.stderr
    assert any("queue" in line and "required" in line for line in everything.stdout.splitlines())
    [broken] = [line for line in everything.stdout.splitlines() if line.startswith("broken_test:")]
    assert "unavailable" in broken
    assert "clitest_no_such_module" in broken

    only_broken = cli("runopts", "broken_test", env=plugin_env)
    assert only_broken.returncode == 1
    assert "Traceback" not in only_broken.stderr
    assert "clitest_no_such_module" in only_broken.stdout


@pytest.mark.parametrize("command", ["status", "describe", "log", "cancel", "delete"])
def test_malformed_handle(cli: Any, command: str) -> None:
    assert_one_line_error(cli(command, "not-a-handle"), "not-a-handle", "not of the form")


def test_status_of_an_unknown_app_exits_3(cli: Any) -> None:
    result = cli("status", "local_cwd://anylaunch/no-such-app-123")
    assert_one_line_error(result, "unknown app", code=3)


@pytest.mark.parametrize("command", ["describe", "log", "cancel", "delete"])
def test_other_commands_on_an_unknown_app_exit_1(cli: Any, command: str) -> None:
    result = cli(command, "local_cwd://anylaunch/no-such-app-123")
    assert_one_line_error(result, "unknown app")


def test_usage_errors_exit_2(cli: Any) -> None:
    assert cli("run").returncode == 2  # no component, none configured
    assert cli("status").returncode == 2
    assert cli("log", "--streams", "nope", "x://s/a").returncode == 2
    assert cli().returncode == 2


def test_debug_env_shows_the_traceback(cli: Any) -> None:
    result = cli("status", "not-a-handle", env={"ANYLAUNCH_DEBUG": "1"})
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert "MalformedAppHandleException" in result.stderr


SECRET = "s3cr3t-value-9d2f"
DECLARED = "conn-string-77ab"


def test_no_secret_value_reaches_any_cli_output(cli: Any) -> None:
    """Secret env values (by name pattern, and declared with --secret-env) never appear in what
    the CLI prints: the dryrun's app and request, the app's streamed log lines, the failure
    status, describe."""
    env = f"API_TOKEN={SECRET},DB_CONN={DECLARED}"
    dryrun = cli("run", "--dryrun", "--secret-env", "DB_CONN", "utils.sh", "--env", env, "true")
    assert dryrun.returncode == 0, dryrun.stderr
    assert "API_TOKEN" in dryrun.stdout and "DB_CONN" in dryrun.stdout
    outputs = [dryrun.stdout, dryrun.stderr]

    # the app prints both values, then fails: lines and the failure status are masked
    script = "echo token=$API_TOKEN conn=$DB_CONN; echo $API_TOKEN >&2; exit 3"
    run = cli(
        "run", "--log", "--secret-env", "DB_CONN", "utils.sh", "--env", env, "sh", "-c", script
    )
    assert run.returncode == 1
    assert "sh/0 token=*** conn=***" in run.stderr
    outputs += [run.stdout, run.stderr]

    handle = run.stdout.strip()
    described = cli("describe", "--secret-env", "DB_CONN", handle)
    assert described.returncode == 0, described.stderr
    outputs += [described.stdout, described.stderr]
    for output in outputs:
        assert SECRET not in output
        assert DECLARED not in output


def test_a_misplaced_env_value_is_not_quoted_in_the_error(cli: Any) -> None:
    result = cli("run", "--dryrun", "utils.sh", "--env", f"{SECRET},A=b", "true")
    assert result.returncode == 2
    assert "--env" in result.stderr
    assert SECRET not in result.stderr
