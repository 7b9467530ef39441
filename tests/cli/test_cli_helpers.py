"""In-process tests of the CLI's pure helpers (identifier parsing, argument splitting)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anylaunch.cli.cmd_base import one_line
from anylaunch.cli.cmd_log import parse_identifier
from anylaunch.cli.cmd_run import split_component_args
from anylaunch.cli.main import create_parser, get_sub_cmds
from anylaunch.specs import AppDef, Resource, Role, make_app_handle
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.serialize import appdef_to_dict

names = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,15}", fullmatch=True)


@given(
    scheduler=names,
    session=names,
    app_id=names,
    role=st.none() | names,
    ids=st.none() | st.lists(st.integers(0, 999), min_size=1, max_size=4),
)
def test_parse_identifier_round_trips(
    scheduler: str, session: str, app_id: str, role: str | None, ids: list[int] | None
) -> None:
    handle = make_app_handle(scheduler, session, app_id)
    identifier = handle
    if role is not None:
        identifier += f"/{role}"
        if ids is not None:
            identifier += "/" + ",".join(map(str, ids))
    expected_ids = ids if role is not None else None

    assert parse_identifier(identifier) == (handle, role, expected_ids)


@pytest.mark.parametrize(
    "identifier",
    [
        "",
        "no-scheme",
        "local_cwd://s",
        "local_cwd://s/a/r/x",
        "local_cwd://s/a/r/0/extra",
        "a b://s/x",
    ],
)
def test_parse_identifier_rejects_malformed(identifier: str) -> None:
    with pytest.raises(InvalidSpecError, match="not of the form"):
        parse_identifier(identifier)


@given(st.lists(st.text(min_size=1).filter(lambda a: not a.startswith("-")), min_size=1))
def test_first_non_option_is_the_component(args: list[str]) -> None:
    assert split_component_args(args, "from.config") == (args[0], args[1:])


def test_option_first_means_the_configured_component() -> None:
    assert split_component_args(["--msg", "x"], "utils.echo") == ("utils.echo", ["--msg", "x"])
    assert split_component_args([], None) == (None, [])


@given(st.text())
def test_one_line_has_no_newlines(message: str) -> None:
    assert "\n" not in one_line(message)
    assert "\r" not in one_line(message)


def test_the_printed_app_is_yaml_safe() -> None:
    import yaml

    app = AppDef("a", [Role("r", image="/tmp", entrypoint="echo", resource=Resource(1, 0, 64))])
    plain = appdef_to_dict(app)
    assert yaml.safe_load(yaml.safe_dump(plain)) == plain
    assert plain["roles"][0]["retry_policy"] == "APPLICATION"


def test_run_keeps_component_args_for_the_component() -> None:
    parser = create_parser(get_sub_cmds())
    args = parser.parse_args(["run", "--wait", "utils.echo", "--wait", "--msg", "hi"])
    assert args.wait
    assert args.component_and_args == ["utils.echo", "--wait", "--msg", "hi"]


# A Ctrl-C that lands inside code run by exec() of a string (dataclass creation, lazy
# imports) is remembered by CPython even after the CLI caught it; without care the process
# then ends by SIGINT (returncode -2) instead of with the CLI's 130. CI saw this flake.
_INTERRUPTED_IN_EXEC = """
import argparse
from anylaunch.cli import main as cli_main
from anylaunch.cli.cmd_base import SubCommand

class Interrupted(SubCommand):
    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace) -> int:
        print("partial output", flush=False)
        exec("raise KeyboardInterrupt")
        return 0

cli_main.get_sub_cmds = lambda: {"interrupted": Interrupted()}
cli_main.main(["interrupted"])
"""


def test_ctrl_c_inside_exec_still_exits_130_with_output_flushed(tmp_path: Path) -> None:
    # run with -m, as the console script's ``python -m anylaunch.cli.main`` is: with -c,
    # CPython exits inside its error printer and never looks at the remembered interrupt
    (tmp_path / "interrupted_cli.py").write_text(_INTERRUPTED_IN_EXEC)
    result = subprocess.run(
        [sys.executable, "-m", "interrupted_cli"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 130, (result.returncode, result.stderr)
    assert result.stdout == "partial output\n"
    assert result.stderr.strip() == "anylaunch: interrupted"
