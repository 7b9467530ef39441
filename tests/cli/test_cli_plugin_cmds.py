"""Subcommands from ``anylaunch.cli.cmds`` plugins, as real subprocesses: a plugin adds one, one
named like a built-in replaces it, a broken one is skipped with a warning.

The plugins are real: an installed distribution's metadata (a ``.dist-info`` directory with
its ``entry_points.txt``) and an ``anylaunch_plugins.cli.cmds`` namespace module, both on the
CLI's ``PYTHONPATH``, found the way a user's are.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Cli

COMMANDS = """
import argparse
import sys

from anylaunch.cli.cmd_base import SubCommand


class CmdHello(SubCommand):
    help = "say hello (a plugin)"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument("--name", default="world")

    def run(self, args: argparse.Namespace) -> int:
        print(f"hello {args.name}")
        return 0


class CmdMyList(SubCommand):
    help = "the plugin's own list"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace) -> int:
        print("the plugin list")
        return 0


class CmdBadArgs(SubCommand):
    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        raise RuntimeError("add_arguments blew up")

    def run(self, args: argparse.Namespace) -> int:
        return 0


def not_a_cmd() -> object:
    return 42
"""

EXITING = "raise SystemExit(3)\n"

ENTRY_POINTS = """[anylaunch.cli.cmds]
hello = hello_cli:CmdHello
list = hello_cli:CmdMyList
broken = hello_cli_missing:Cmd
badargs = hello_cli:CmdBadArgs
notacmd = hello_cli:not_a_cmd
exiting = exiting_cli:Cmd
"""

NAMESPACED = """
import argparse

from anylaunch.cli.cmd_base import SubCommand
from anylaunch.plugins import register


@register.cli_cmd(name="greet")
class CmdGreet(SubCommand):
    help = "greet (a namespace plugin)"

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace) -> int:
        print("greetings")
        return 0
"""


@pytest.fixture
def plugged(cli: Cli, tmp_path: Path) -> Cli:
    root = tmp_path / "site"
    dist = root / "anylaunch_hello_cli-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: anylaunch-hello-cli\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    (root / "hello_cli.py").write_text(COMMANDS)
    (root / "exiting_cli.py").write_text(EXITING)
    namespaced = root / "anylaunch_plugins" / "cli" / "cmds"
    namespaced.mkdir(parents=True)
    (namespaced / "greet.py").write_text(NAMESPACED)
    path = [str(root), cli.env.get("PYTHONPATH", "")]
    cli.env["PYTHONPATH"] = ":".join(p for p in path if p)
    return cli


def _skipped(stderr: str) -> set[str]:
    prefix = "anylaunch: warning: skipping the plugin subcommand '"
    return {line[len(prefix) :].split("'")[0] for line in stderr.splitlines() if prefix in line}


def test_a_plugin_adds_a_subcommand_with_its_own_arguments(plugged: Cli) -> None:
    result = plugged("hello", "--name", "plugins")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello plugins\n"
    helped = plugged("--help")
    assert "hello" in helped.stdout and "say hello (a plugin)" in helped.stdout


def test_a_plugin_named_like_a_builtin_overrides_it(plugged: Cli) -> None:
    result = plugged("list")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "the plugin list\n"


def test_a_namespace_plugin_adds_a_subcommand(plugged: Cli) -> None:
    result = plugged("greet")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "greetings\n"


def test_broken_plugins_are_skipped_with_a_warning_and_the_cli_keeps_working(
    plugged: Cli,
) -> None:
    result = plugged("builtins")
    assert result.returncode == 0, result.stderr
    assert "utils.echo" in result.stdout
    assert "Traceback" not in result.stderr
    assert _skipped(result.stderr) == {"badargs", "broken", "exiting", "notacmd"}
    assert "add_arguments blew up" in result.stderr
    assert "not a SubCommand" in result.stderr
    assert "Fix:" in result.stderr
    # a skipped plugin's name is no subcommand; argparse says so
    broken = plugged("badargs")
    assert broken.returncode == 2
    assert "invalid choice: 'badargs'" in broken.stderr


def test_a_real_run_still_works_beside_broken_plugins(plugged: Cli) -> None:
    result = plugged("run", "--wait", "--log", "utils.echo", "--msg", "still here")
    assert result.returncode == 0, result.stderr
    assert "echo/0 still here" in result.stderr


def test_an_unknown_subcommand_says_which_was_meant_plugins_included(plugged: Cli) -> None:
    result = plugged("helo")
    assert result.returncode == 2
    assert "Did you mean 'hello'?" in result.stderr
    builtin = plugged("stauts")
    assert builtin.returncode == 2
    assert "Did you mean 'status'?" in builtin.stderr


def test_an_unknown_subcommand_says_which_was_meant_without_plugins(cli: Cli) -> None:
    result = cli("describ", "local_cwd://s/a")
    assert result.returncode == 2
    assert "Did you mean 'describe'?" in result.stderr


def test_plugins_source_picks_the_channels(plugged: Cli) -> None:
    # 1: the namespace package only; the entry points (and their override) are not read
    only_ns = {"ANYLAUNCH_PLUGINS_SOURCE": "1"}
    assert plugged("greet", env=only_ns).returncode == 0
    assert plugged("hello", env=only_ns).returncode == 2
    listed = plugged("list", "--json", env=only_ns)
    assert listed.returncode == 0, listed.stderr
    assert "the plugin list" not in listed.stdout
    assert _skipped(listed.stderr) == set()
    # 0: built-ins only
    assert plugged("greet", env={"ANYLAUNCH_PLUGINS_SOURCE": "0"}).returncode == 2


def test_a_bad_plugins_source_warns_and_leaves_the_builtins(plugged: Cli) -> None:
    result = plugged("--version", env={"ANYLAUNCH_PLUGINS_SOURCE": "9"})
    assert result.returncode == 0, result.stderr
    assert "anylaunch: warning: plugin subcommands not loaded" in result.stderr
    assert "ANYLAUNCH_PLUGINS_SOURCE" in result.stderr
