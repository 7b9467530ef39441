"""Subcommands from plugins: the ``anylaunch.cli.cmds`` group (TorchX's ``torchx.cli.cmds``).

A distribution adds ``anylaunch <name>`` by declaring a
:class:`~anylaunch.cli.cmd_base.SubCommand` class as an entry point::

    [project.entry-points."anylaunch.cli.cmds"]
    hello = "my_pkg.cli:CmdHello"

or with ``@register.cli_cmd(name="hello")`` on the class in a module of the
``anylaunch_plugins.cli.cmds`` namespace package. Discovery is the plugin registry's
(:mod:`anylaunch.plugins`), so ``ANYLAUNCH_PLUGINS_SOURCE`` applies. A plugin named like a
built-in subcommand replaces it, as in TorchX. A plugin that fails to load, to build its
subcommand, or to add its arguments is skipped with a warning on stderr: the other
subcommands keep working.

>>> from anylaunch.cli.cmd_builtins import CmdBuiltins
>>> sorted(with_plugin_cmds({"builtins": CmdBuiltins()}))
['builtins']
"""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any

from anylaunch.cli.cmd_base import eprint

if TYPE_CHECKING:
    from anylaunch.cli.cmd_base import SubCommand

__all__ = ["with_plugin_cmds"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _is_subcommand(obj: object) -> bool:
    # duck-typed: a ported TorchX SubCommand has the same two methods
    return callable(getattr(obj, "add_arguments", None)) and callable(getattr(obj, "run", None))


def _build(factory: Any) -> SubCommand:
    """The subcommand a plugin's factory gives: a class or function is called, an instance is
    used as it is."""
    from anylaunch.plugins import EntryPointPlugin

    obj = factory.load() if isinstance(factory, EntryPointPlugin) else factory
    cmd = obj if _is_subcommand(obj) and not isinstance(obj, type) else obj()
    if not _is_subcommand(cmd):
        raise TypeError(f"it gave {type(cmd).__name__}, not a SubCommand (add_arguments and run)")
    # probed on a parser of its own: a failure here must not leave a half-built subparser
    cmd.add_arguments(argparse.ArgumentParser(prog="probe", add_help=False))
    return cmd  # type: ignore[no-any-return]


def _warn(name: str, factory: object, problem: str) -> None:
    eprint(
        f"anylaunch: warning: skipping the plugin subcommand {name!r} ({factory!r}): {problem}. "
        "Fix: repair or uninstall the distribution that provides it"
    )


def with_plugin_cmds(builtins: dict[str, SubCommand]) -> dict[str, SubCommand]:
    """Returns ``builtins`` with the plugins' subcommands added (or replacing a built-in)."""
    from anylaunch.plugins import PluginType, registry

    try:
        plugins = registry().get(PluginType.CLI_CMD)
    except Exception as e:  # e.g. a bad ANYLAUNCH_PLUGINS_SOURCE: the built-ins still work
        eprint(f"anylaunch: warning: plugin subcommands not loaded: {e}")
        return dict(builtins)
    cmds = dict(builtins)
    for name, factory in sorted(plugins.items()):
        if not _NAME.fullmatch(name):
            _warn(name, factory, "a subcommand name is letters, digits, '_', '.' or '-'")
            continue
        try:
            cmds[name] = _build(factory)
        except BaseException as e:  # SystemExit too: a plugin must not end the CLI
            if isinstance(e, KeyboardInterrupt):
                raise
            _warn(name, factory, f"{type(e).__name__}: {e}")
    return cmds
