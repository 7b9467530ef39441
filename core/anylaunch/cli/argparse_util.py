"""The CLI's argparse helpers (TorchX's ``torchx.cli.argparse_util``): defaults of a
subcommand's flags from the ``[cli:<subcommand>]`` section of ``.anylaunchconfig``, and flags
that may be given once only.

``anylaunch run`` reads its section with :func:`cli_defaults` (known keys only, a warning with
a did-you-mean for the others); ``anylaunch list`` takes its ``--scheduler`` default through
the :class:`anylaunchconfig_list` action. A subcommand of a plugin can do the same::

    subparser.add_argument("--scheduler", action=anylaunchconfig_run, default="local_cwd")

takes ``scheduler`` from ``[cli:run]`` when it is set there, and a flag marked
``required=True`` is then no longer required on the command line.
"""

from __future__ import annotations

import argparse
import logging
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "ArgOnceAction",
    "anylaunchconfig",
    "anylaunchconfig_list",
    "anylaunchconfig_run",
    "cli_defaults",
    "cli_section",
]

logger: logging.Logger = logging.getLogger(__name__)


def cli_section(subcmd: str) -> dict[str, str]:
    """The keys of ``[cli:<subcmd>]`` in ``.anylaunchconfig`` that hold a value (a key set to
    blank counts as unset).

    >>> import os, tempfile
    >>> from anylaunch.settings import ENV_ANYLAUNCHCONFIG
    >>> path = os.path.join(tempfile.mkdtemp(), ".anylaunchconfig")
    >>> _ = open(path, "w").write("[cli:run]\\nscheduler = local_cwd\\nworkspace =\\n")
    >>> old, os.environ[ENV_ANYLAUNCHCONFIG] = os.environ.get(ENV_ANYLAUNCHCONFIG), path
    >>> cli_section("run")
    {'scheduler': 'local_cwd'}
    >>> _ = os.environ.pop(ENV_ANYLAUNCHCONFIG) if old is None else os.environ.update({ENV_ANYLAUNCHCONFIG: old})
    """
    from anylaunch.runner.config import get_configs

    return {k: v for k, v in get_configs("cli", subcmd).items() if v.strip()}


def cli_defaults(subcmd: str, known: Iterable[str]) -> dict[str, str]:
    """The keys of ``[cli:<subcmd>]`` among ``known`` that hold a value; each other key is
    ignored with a warning naming the closest known one."""
    from anylaunch.specs.errors import did_you_mean

    known = tuple(known)
    section = cli_section(subcmd)
    for key in section:
        if key not in known:
            logger.warning(
                "ignoring %r in [cli:%s] of .anylaunchconfig.%s Known keys: %s",
                key,
                subcmd,
                did_you_mean(key, known),
                ", ".join(known),
            )
    return {k: v for k, v in section.items() if k in known}


# The flags seen in each parse, by namespace: a fresh namespace per parse_args call, so one
# parse never sees another's. Kept beside the namespace, not on it: an attribute would show
# in vars(args) and break namespace comparisons. Keyed by id() (a Namespace is unhashable);
# the finalizer drops the entry when the namespace goes, before its id can be reused.
_seen_by_namespace: dict[int, set[str]] = {}


def _once(
    parser: argparse.ArgumentParser,
    namespace: argparse.Namespace,
    action: argparse.Action,
    flag: str | None,
) -> None:
    if flag is None:  # a positional argument
        return
    key = id(namespace)
    seen = _seen_by_namespace.get(key)
    if seen is None:
        seen = _seen_by_namespace[key] = set()
        weakref.finalize(namespace, _seen_by_namespace.pop, key, None)
    # by dest: -cfg and --scheduler_args are one flag
    if action.dest in seen:
        spellings = "/".join(action.option_strings)
        parser.error(f"{flag} ({spellings}) is specified more than once: give it once")
    seen.add(action.dest)


class ArgOnceAction(argparse.Action):
    """Stores the flag's value, refusing the flag when it is given twice in one command line
    (a usage error, exit code 2).

    >>> p = argparse.ArgumentParser(prog="demo", exit_on_error=False)
    >>> _ = p.add_argument("--cfg", action=ArgOnceAction)
    >>> p.parse_args(["--cfg", "a=1"]).cfg
    'a=1'
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        _once(parser, namespace, self, option_string)
        setattr(namespace, self.dest, values)


class anylaunchconfig(argparse.Action):  # TorchX: torchxconfig
    """Stores a flag's value given once (as :class:`ArgOnceAction`), with its default taken
    from ``[cli:<subcmd>]`` of ``.anylaunchconfig`` (the key named like the flag's ``dest``)
    when set there, else from ``add_argument(default=...)``. A flag found in the section is no
    longer required on the command line.

    argparse builds an action from its class, so each subcommand has its own subclass
    (:class:`anylaunchconfig_run`, :class:`anylaunchconfig_list`); the section is read when
    the parser is built.
    """

    def __init__(
        self,
        subcmd: str,
        dest: str,
        option_strings: Sequence[str],
        required: bool = False,
        default: Any = None,
        **kwargs: Any,
    ) -> None:
        configured = cli_section(subcmd).get(dest)
        if configured is not None:
            default, required = configured, False
        super().__init__(
            option_strings=option_strings, dest=dest, default=default, required=required, **kwargs
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        _once(parser, namespace, self, option_string)
        setattr(namespace, self.dest, values)


class anylaunchconfig_run(anylaunchconfig):  # TorchX: torchxconfig_run
    """:class:`anylaunchconfig` for ``[cli:run]``."""

    def __init__(
        self,
        dest: str,
        option_strings: Sequence[str],
        required: bool = False,
        default: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__("run", dest, option_strings, required, default, **kwargs)


class anylaunchconfig_list(anylaunchconfig):  # TorchX: torchxconfig_list
    """:class:`anylaunchconfig` for ``[cli:list]``."""

    def __init__(
        self,
        dest: str,
        option_strings: Sequence[str],
        required: bool = False,
        default: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__("list", dest, option_strings, required, default, **kwargs)
