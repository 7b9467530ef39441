"""The log-line batcher every engine uses: exactly one engine log record per app line.

Reader threads (a :class:`anylaunch.runner.logs.LogPump`) hand lines to a :class:`LineBuffer`;
the one thread that may log (engines keep their run context in thread- or context-locals)
takes them and emits one record each, prefixed ``role/replica`` and with secrets masked. The
buffer also keeps the last lines for the failure summary.

>>> from anylaunch.specs.secrets import Redactor
>>> buf = LineBuffer(redact=Redactor(["s3cr3t"]), tail_size=2)
>>> buf("trainer", 0, "epoch 1 token=s3cr3t\\n"); buf("trainer", 1, "epoch 1")
>>> buf.take()
['trainer/0 epoch 1 token=***', 'trainer/1 epoch 1']
>>> buf.take(), buf.tail
([], ['trainer/0 epoch 1 token=***', 'trainer/1 epoch 1'])
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

__all__ = ["LineBuffer", "format_line"]

#: Lines kept for the failure summary.
TAIL_LINES = 20
#: Lines held for the logging thread at most; beyond that the oldest are dropped (and counted)
#: so that a stalled logger cannot make a chatty app exhaust memory.
MAX_PENDING_LINES = 100_000


def format_line(role: str, replica: int, line: str) -> str:
    """One app line as an engine log record: ``role/replica text``, without its newline.

    >>> format_line("worker", 2, "loss=0.1\\r\\n")
    'worker/2 loss=0.1'
    """
    return f"{role}/{replica} {line.rstrip(chr(10)).rstrip(chr(13))}"


class LineBuffer:
    """Thread-safe hand-over of app log lines to the thread that logs them.

    Call it as a :data:`anylaunch.runner.logs.LineSink` (``(role, replica, line)``) from any
    thread, or :meth:`add` an already formatted line; :meth:`take` returns what arrived, one
    masked string per line. After :meth:`close`, new lines are ignored.

    Args:
        redact: masks secrets in every line
        tail_size: how many of the latest lines :attr:`tail` keeps
        max_pending: lines held at most before the oldest are dropped
    """

    def __init__(
        self,
        redact: Callable[[str], str] | None = None,
        tail_size: int = TAIL_LINES,
        max_pending: int = MAX_PENDING_LINES,
    ) -> None:
        self._redact = redact
        self._pending: deque[str] = deque()
        self._tail: deque[str] = deque(maxlen=tail_size)
        self._max_pending = max_pending
        self._lock = threading.Lock()
        self._closed = False
        #: lines dropped because the logging thread fell behind by more than ``max_pending``
        self.dropped = 0

    def __call__(self, role: str, replica: int, line: str) -> None:
        self.add(format_line(role, replica, line))

    def add(self, text: str) -> None:
        """Queues one formatted line (``role/replica text``)."""
        if self._redact is not None:
            text = self._redact(text)
        with self._lock:
            if self._closed:
                return
            if len(self._pending) >= self._max_pending:
                self._pending.popleft()
                self.dropped += 1
            self._pending.append(text)
            self._tail.append(text)

    def take(self) -> list[str]:
        """Every line queued since the last call, oldest first."""
        with self._lock:
            lines = list(self._pending)
            self._pending.clear()
        return lines

    @property
    def tail(self) -> list[str]:
        """The latest lines seen (masked), oldest first."""
        with self._lock:
            return list(self._tail)

    def close(self) -> None:
        """Stops accepting lines (readers of an app that runs on are no longer listened to)."""
        with self._lock:
            self._closed = True
