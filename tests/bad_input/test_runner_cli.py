"""The Runner and the CLI: bad handles, sessions, intervals and arguments."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from anylaunch.runner import get_runner
from anylaunch.specs import AppDef, Role
from anylaunch.specs.builders import materialize_appdef
from anylaunch.specs.runopts import runopts
from tests.bad_input.conftest import SECRET, Case, assert_rejected

APP = AppDef("a", [Role("w", ".", entrypoint="true")])
HANDLE = "local_cwd://anylaunch/a-12345678"


def _runner_call(method: str, *args: Any, **kwargs: Any) -> Any:
    with get_runner() as runner:
        return getattr(runner, method)(*args, **kwargs)


def component(lr: float = 0.1, steps: int = 10, name: str = "x") -> AppDef:
    """A component with typed parameters.

    Args:
        lr: learning rate
        steps: number of steps
        name: a name
    """
    return AppDef("c", [Role("w", ".", entrypoint="echo", args=[str(lr), str(steps), name])])


def broken_component(name: str = "x") -> AppDef:
    """A component whose body raises (issue 31).

    Args:
        name: a name
    """
    settings: dict[str, str] = {}
    return AppDef(settings[name], [])


def _float_opts() -> runopts:
    opts = runopts()
    opts.add("x", type_=float, default=1.0, help="a float option")
    return opts


CASES: list[Case] = [
    Case("session-empty", lambda: get_runner(""), "name"),
    Case("session-space", lambda: get_runner("my team"), "name"),
    Case("session-newline", lambda: get_runner("team\n"), "name"),
    Case("session-int", lambda: get_runner(3), "name"),  # type: ignore[arg-type]
    Case(
        "wait-interval-zero", lambda: _runner_call("wait", HANDLE, wait_interval=0), "wait_interval"
    ),
    Case(
        "wait-interval-nan",
        lambda: _runner_call("wait", HANDLE, wait_interval=math.nan),
        "wait_interval",
    ),
    Case(
        "wait-interval-inf",
        lambda: _runner_call("wait", HANDLE, wait_interval=math.inf),
        "wait_interval",
    ),
    Case("wait-timeout-nan", lambda: _runner_call("wait", HANDLE, timeout=math.nan), "timeout"),
    Case("wait-timeout-negative", lambda: _runner_call("wait", HANDLE, timeout=-1), "timeout"),
    Case("status-bad-handle", lambda: _runner_call("status", "not-a-handle"), "app_handle"),
    Case("describe-bad-handle", lambda: _runner_call("describe", "local_cwd:/x"), "app_handle"),
    Case("cancel-bad-handle", lambda: _runner_call("cancel", "x://"), "app_handle"),
    Case("log_lines-bad-handle", lambda: _runner_call("log_lines", "nope", "w"), "app_handle"),
    Case("status-unknown-scheduler", lambda: _runner_call("status", "nosuch://s/a-1"), "nosuch"),
    Case("dryrun-app-str", lambda: _runner_call("dryrun", "app", "local_cwd"), "app"),
    Case("dryrun-cfg-int-key", lambda: _runner_call("dryrun", APP, "local_cwd", {1: "x"}), "cfg"),
    Case(
        "dryrun-misspelt-option-secret",
        lambda: _runner_call("dryrun", APP, "local_cwd", {"log_dri": SECRET}),
        "log_dri",
    ),
    Case(
        "run_component-unknown",
        lambda: _runner_call("dryrun_component", "utils.ecoh", [], "local_cwd"),
        "utils.ecoh",
    ),
    Case("runopts-resolve-list", lambda: runopts().resolve([1]), "cfg"),  # type: ignore[arg-type]
    Case("component-arg-nan", lambda: materialize_appdef(component, ["--lr=nan"]), "lr"),
    Case("component-arg-inf", lambda: materialize_appdef(component, ["--lr=inf"]), "lr"),
    Case("component-arg-not-int", lambda: materialize_appdef(component, ["--steps=ten"]), "steps"),
    Case("component-arg-unknown", lambda: materialize_appdef(component, ["--sterps=10"]), "sterps"),
    Case("component-arg-missing-value", lambda: materialize_appdef(component, ["--lr"]), "lr"),
    # issue 31
    Case("cfg_from_str-none", lambda: _float_opts().cfg_from_str(None), "cfg"),  # type: ignore[arg-type]
    Case("cfg_from_str-int", lambda: _float_opts().cfg_from_str(3), "cfg"),  # type: ignore[arg-type]
    Case("cfg_from_str-nan", lambda: _float_opts().cfg_from_str("x=nan"), "x"),
    Case("cfg_from_str-inf", lambda: _float_opts().cfg_from_str("x=inf"), "x"),
    Case("cfg_from_str-neg-inf", lambda: _float_opts().cfg_from_str("x=-inf"), "x"),
    Case(
        "runner-cfg_from_str-none",
        lambda: _runner_call("cfg_from_str", "local_cwd", None),
        "cfg",
    ),
    Case(
        "component-body-raises",
        lambda: materialize_appdef(broken_component, []),
        "test_runner_cli.py:",  # the file and line that raised
    ),
    Case(
        "component-body-raises-names-it",
        lambda: materialize_appdef(broken_component, []),
        "broken_component",
    ),
    Case(
        "component-dict-arg-object",
        lambda: _runner_call("dryrun_component", "utils.echo", {"msg": object()}, "local_cwd"),
        "component_args['msg']",
    ),
    Case(
        "component-dict-arg-list-for-str",
        lambda: _runner_call("dryrun_component", "utils.echo", {"msg": ["a"]}, "local_cwd"),
        "component_args['msg']",
    ),
    Case(
        "component-dict-arg-bytes",
        lambda: _runner_call("dryrun_component", "utils.echo", {"msg": b"hi"}, "local_cwd"),
        "component_args['msg']",
    ),
    Case(
        "component-dict-arg-nan",
        lambda: _runner_call("dryrun_component", "utils.echo", {"msg": math.nan}, "local_cwd"),
        "component_args['msg']",
    ),
    Case(
        "wait-interval-negative",
        lambda: _runner_call("wait", HANDLE, wait_interval=-1),
        "wait_interval",
    ),
    Case(
        "wait-interval-bool",
        lambda: _runner_call("wait", HANDLE, wait_interval=True),
        "wait_interval",
    ),
    Case(
        "wait-interval-neg-inf",
        lambda: _runner_call("wait", HANDLE, wait_interval=-math.inf),
        "wait_interval",
    ),
]


@pytest.mark.parametrize(("call", "field"), [c.param() for c in CASES])
def test_rejected(call: Any, field: str) -> None:
    assert_rejected(call, field)


CLI = [
    ("run-unknown-scheduler", ["run", "-s", "local_cwdd", "utils.echo"], "local_cwdd"),
    ("run-unknown-component", ["run", "-s", "local_cwd", "utils.ecoh"], "utils.ecoh"),
    ("run-bad-env", ["run", "-s", "local_cwd", "--env", "NOEQUALS", "utils.echo"], "env"),
    ("run-bad-cfg", ["run", "-s", "local_cwd", "-cfg", "log_dri=x", "utils.echo"], "log_dri"),
    ("run-bad-component-arg", ["run", "-s", "local_cwd", "utils.echo", "--nsg", "hi"], "nsg"),
    ("status-bad-handle", ["status", "not-a-handle"], "app_handle"),
    ("describe-bad-handle", ["describe", "local_cwd:/x"], "app_handle"),
    ("cancel-bad-handle", ["cancel", "://"], "app_handle"),
    ("log-bad-handle", ["log", "nope"], "identifier"),
    ("list-unknown-scheduler", ["list", "-s", "nosuch"], "nosuch"),
    ("runopts-unknown-scheduler", ["runopts", "nosuch"], "nosuch"),
    ("reap-no-scheduler", ["reap", "--engine", "prefect"], "scheduler"),
    ("reap-airflow-without-url", ["reap", "-s", "local_cwd", "--engine", "airflow"], "airflow-url"),
    ("broken-component-file", ["run", "-s", "local_cwd", "BROKEN:fn"], "broken.py"),
    ("raising-component-body", ["run", "-s", "local_cwd", "RAISES:fn"], "raises.py:10"),
]
# a component whose body raises on its line 10 (the error names raises.py:10)
RAISES = (
    "from anylaunch.specs import AppDef\n"
    "\n"
    "\n"
    "def fn(name: str = 'x') -> AppDef:\n"
    '    """Raises.\n\n    Args:\n        name: a name\n    """\n'
    "    return {}[name]\n"
)


@pytest.mark.parametrize(("argv", "field"), [pytest.param(a, f, id=i) for i, a, f in CLI])
def test_cli_rejects_with_one_clear_line(argv: list[str], field: str, tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def fn(:\n")
    (tmp_path / "raises.py").write_text(RAISES)
    files = {"BROKEN:fn": str(broken) + ":fn", "RAISES:fn": str(tmp_path / "raises.py") + ":fn"}
    argv = [files.get(a, a) for a in argv]
    result = subprocess.run(
        [str(Path(sys.executable).parent / "anylaunch"), *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**__import__("os").environ, "ANYLAUNCH_LOCAL_STATE_DIR": str(tmp_path / "state")},
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    assert field in result.stderr, result.stderr
