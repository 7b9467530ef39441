"""Linux inotify through ``ctypes`` on libc (no dependency): the flags and the three calls
the local schedulers' file followers and change feed use.

Every call degrades instead of raising: where inotify is unavailable (another OS, no libc
symbol, no instances or watches left) it returns -1 and the caller polls.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as d:
...     fd = inotify_init()
...     wd = add_watch(fd, d, IN_CREATE) if fd >= 0 else -1
...     ok = fd < 0 or wd >= 0
...     rm_watch(fd, wd); os.close(fd) if fd >= 0 else None
>>> ok
True
"""

from __future__ import annotations

import os
import struct
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ctypes

__all__ = [
    "EVENT",
    "IN_ATTRIB",
    "IN_CLOEXEC",
    "IN_CLOSE_WRITE",
    "IN_CREATE",
    "IN_DELETE",
    "IN_DELETE_SELF",
    "IN_IGNORED",
    "IN_MODIFY",
    "IN_MOVED_FROM",
    "IN_MOVED_TO",
    "IN_MOVE_SELF",
    "IN_ONLYDIR",
    "add_watch",
    "inotify_init",
    "load_libc",
    "rm_watch",
]

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_CLOEXEC = 0o2000000
#: struct inotify_event: wd, mask, cookie, len (then ``len`` bytes of name)
EVENT = struct.Struct("iIII")

_libc: ctypes.CDLL | None = None


def load_libc() -> ctypes.CDLL | None:
    """The running process's libc with the inotify calls typed, or None (not Linux)."""
    global _libc
    if _libc is None and sys.platform.startswith("linux"):
        import ctypes  # only where inotify can be used

        try:
            lib = ctypes.CDLL(None, use_errno=True)
            lib.inotify_init1.argtypes = [ctypes.c_int]
            lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
            _libc = lib
        except (OSError, AttributeError):
            return None
    return _libc


def inotify_init() -> int:
    """A new non-blocking, close-on-exec inotify fd, or -1."""
    libc = load_libc()
    if libc is None:
        return -1
    try:
        return int(libc.inotify_init1(os.O_NONBLOCK | IN_CLOEXEC))
    except (OSError, AttributeError):
        return -1


def add_watch(fd: int, path: str, mask: int) -> int:
    """Watches ``path`` on ``fd``: the watch descriptor, or -1 (see ``ctypes.get_errno``)."""
    libc = load_libc()
    if libc is None or fd < 0:
        return -1
    return int(libc.inotify_add_watch(fd, os.fsencode(path), mask))


def rm_watch(fd: int, wd: int) -> None:
    """Removes a watch (EINVAL if the kernel removed it already: fine)."""
    libc = load_libc()
    if libc is not None and fd >= 0 and wd >= 0:
        libc.inotify_rm_watch(fd, wd)
