"""The CLI's terminal colors (TorchX's ``torchx.cli.colors``), and the one rule of when to
use them.

Colors (and the live view's redraws) go to a terminal only: :func:`colors_enabled` is true
for a stream that is a TTY, with ``TERM`` not ``dumb`` and ``NO_COLOR`` unset or empty
(https://no-color.org). :data:`GREEN`, :data:`BLUE`, :data:`ORANGE`, :data:`GRAY` and
:data:`ENDC` are the codes when standard output passed that rule at import, else ``""``, so
``f"{GREEN}ok{ENDC}"`` prints plain text into a pipe or a file. The ``ANSI_*`` constants are
the codes themselves, for a caller that decides per stream.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TextIO

__all__ = [
    "ANSI_BLUE",
    "ANSI_GRAY",
    "ANSI_GREEN",
    "ANSI_ORANGE",
    "ANSI_RED",
    "ANSI_RESET",
    "BLUE",
    "ENDC",
    "GRAY",
    "GREEN",
    "ORANGE",
    "colors_enabled",
    "prefix_container_name",
]

ANSI_GREEN = "\x1b[32m"
ANSI_RED = "\x1b[31m"
ANSI_BLUE = "\x1b[34m"
#: TorchX's orange (24-bit color, 238/76/44)
ANSI_ORANGE = "\x1b[38:2:238:76:44m"
ANSI_GRAY = "\x1b[2m"
ANSI_RESET = "\x1b[0m"


def colors_enabled(stream: TextIO | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """True if ``stream`` (default: standard output) is a terminal that may get colors and
    redraws: a TTY, ``TERM`` not ``dumb``, ``NO_COLOR`` unset or empty.

    >>> import io
    >>> colors_enabled(io.StringIO())
    False

    Args:
        stream: the stream to write to; a closed or replaced one gets no colors
        environ: the environment to read ``TERM`` and ``NO_COLOR`` from (default: this
            process's)
    """
    stream = sys.stdout if stream is None else stream
    env = os.environ if environ is None else environ
    try:
        tty = not stream.closed and stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False
    return tty and env.get("TERM", "") != "dumb" and not env.get("NO_COLOR", "")


_ON = colors_enabled()
GREEN = ANSI_GREEN if _ON else ""
BLUE = ANSI_BLUE if _ON else ""
ORANGE = ANSI_ORANGE if _ON else ""
GRAY = ANSI_GRAY if _ON else ""
ENDC = ANSI_RESET if _ON else ""


def prefix_container_name(container_name: str, role_name: str, replica_id: int) -> str:
    """The prefix naming a replica's container in log lines: ``""`` for the replica's own
    (default) container ``{role_name}-{replica_id}``, else the container's name (blue on a
    terminal) and a space.

    >>> prefix_container_name("trainer-0", "trainer", 0)
    ''
    >>> prefix_container_name("sidecar", "trainer", 0) == f"{BLUE}sidecar{ENDC} "
    True
    """
    if container_name == f"{role_name}-{replica_id}":
        return ""
    return f"{BLUE}{container_name}{ENDC} "
