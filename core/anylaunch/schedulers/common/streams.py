"""Copying files as they grow into one writer: :class:`Tee`, public as
:mod:`anylaunch.schedulers.streams` (TorchX's ``torchx.schedulers.streams``).

>>> import io, os, tempfile
>>> d = tempfile.mkdtemp()
>>> paths = [os.path.join(d, n) for n in ("stdout", "stderr")]
>>> for p, text in zip(paths, (b"out\\n", b"err\\n")):
...     with open(p, "wb") as f:
...         _ = f.write(text)
>>> class Kept(io.BytesIO):
...     def close(self) -> None: self.text = self.getvalue(); super().close()
>>> out = Kept()
>>> with Tee(out, *paths):
...     pass
>>> sorted(out.text.splitlines())
[b'err', b'out']
"""

from __future__ import annotations

import os
import threading
from typing import Protocol

from anylaunch.schedulers.common.closing import Closing
from anylaunch.schedulers.common.tail import ChangeWaiter

__all__ = ["Tee"]

_CHUNK = 1 << 16
#: The longest a quiet :class:`Tee` sleeps (inotify wakes it sooner on Linux).
_IDLE_S = 0.05


class _Writer(Protocol):
    def write(self, data: bytes, /) -> int | None: ...

    def close(self) -> None: ...


class Tee(Closing):
    """Copies what is written to ``sources`` (paths of files or named pipes, e.g. a replica's
    stdout and stderr) into ``out``, from a background thread, until :meth:`close`.

    The sources are opened when the Tee is made (without blocking on a pipe that has no
    writer yet) and read from their start. :meth:`close` copies what was written
    before it, then closes the sources and ``out``; if writing to ``out`` failed, it raises
    that error. Use it as a context manager, or call :meth:`close`: the thread runs until
    then. Chunks from different sources, or from :meth:`write`, never interleave within a
    chunk, but their order across sources is not kept.

    Args:
        out: where the data goes (anything with ``write(bytes)`` and ``close()``)
        sources: the paths to copy from (at least one)

    Raises:
        ValueError: no source was given.
        OSError: a source cannot be opened.
    """

    def __init__(self, out: _Writer, *sources: str) -> None:
        if not sources:
            raise ValueError("Tee needs at least one source path to copy from")
        self.out = out
        self._lock = threading.Lock()  # one write at a time into `out`
        self._fds: list[int] = []
        try:
            for source in sources:
                self._fds.append(os.open(source, os.O_RDONLY | os.O_NONBLOCK))
        except OSError:
            self._close_fds()
            raise
        self._waiter = ChangeWaiter(sources)
        self._closing = False
        self._closed = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._copy, name="anylaunch-tee", daemon=True)
        self._thread.start()

    def _read(self, fd: int) -> bytes:
        try:
            return os.read(fd, _CHUNK)
        except BlockingIOError:  # a pipe whose writer has written nothing yet
            return b""

    def _copy(self) -> None:
        try:
            while True:
                # read the flag BEFORE the pass: stopping after a pass that started once
                # close() was called and found nothing drains what was written before it
                closing = self._closing
                copied = False
                for fd in self._fds:
                    data = self._read(fd)
                    if data:
                        copied = True
                        self.write(data)
                if copied:
                    self._waiter.reset()
                elif closing:
                    return
                else:
                    self._waiter.wait(_IDLE_S)
        except BaseException as e:  # surfaced by close()
            self._error = e

    def write(self, data: bytes) -> int:
        """Writes ``data`` into ``out`` (between the chunks the thread copies).

        Args:
            data: the bytes to write

        Returns:
            the number of bytes written
        """
        with self._lock:
            written = self.out.write(data)
        return len(data) if written is None else written

    def _close_fds(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []

    def close(self) -> None:
        """Copies what is left, then closes the sources and ``out``. Safe to call twice.

        Raises:
            Exception: the error that stopped the copy (e.g. ``out`` was closed).
        """
        if self._closed:
            return
        self._closed = True
        self._closing = True
        self._thread.join()
        self._waiter.close()
        self._close_fds()
        with self._lock:
            self.out.close()
        if self._error is not None:
            raise self._error
