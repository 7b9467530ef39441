"""Shell text a backend prints for a request: a command fed a here-document (``sbatch``,
``bsub``), safe to paste whatever the script holds."""

from __future__ import annotations

__all__ = ["heredoc"]


def heredoc(command: str, content: str, terminator: str = "ANYLAUNCH_EOF") -> str:
    """``command <<'TERMINATOR'`` + ``content`` + the terminator: a here-document safe to paste
    whatever ``content`` holds. The terminator is quoted (nothing in the content expands) and
    made unique: if a line of the content equals it, a numbered one is used.

    >>> print(heredoc("sbatch", "echo hi\\nANYLAUNCH_EOF\\n"))
    sbatch <<'ANYLAUNCH_EOF_1'
    echo hi
    ANYLAUNCH_EOF
    ANYLAUNCH_EOF_1
    """
    lines = set(content.splitlines())
    chosen, n = terminator, 0
    while chosen in lines:
        n += 1
        chosen = f"{terminator}_{n}"
    body = content if content.endswith("\n") else content + "\n"
    return f"{command} <<'{chosen}'\n{body}{chosen}"
