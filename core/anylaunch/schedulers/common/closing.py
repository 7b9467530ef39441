"""A base for objects that hold something to release: ``with obj:`` gives ``obj`` and calls
its ``close`` on leaving the block.

>>> class Held(Closing):
...     def close(self) -> None:
...         print("closed")
>>> with Held() as held:
...     print(type(held).__name__)
Held
closed
"""

from __future__ import annotations

import abc
from types import TracebackType
from typing import TypeVar

__all__ = ["Closing"]

_ClosingT = TypeVar("_ClosingT", bound="Closing")


class Closing(abc.ABC):
    """A context manager that closes the object on leaving the ``with`` block."""

    @abc.abstractmethod
    def close(self) -> None:
        """Releases what the object holds. Safe to call more than once."""

    def __enter__(self: _ClosingT) -> _ClosingT:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
