"""The result trackers: :class:`ResultTracker` and its fsspec implementation.

>>> import tempfile
>>> tracker = FsspecResultTracker(tempfile.mkdtemp())
>>> tracker.put(7, loss=0.25, epochs=3)
>>> tracker[7], tracker["missing"]
({'loss': 0.25, 'epochs': 3}, {})
"""

from __future__ import annotations

import abc
import json
from typing import Union

__all__ = ["MAX_STR_BYTES", "FsspecResultTracker", "KeyType", "ResultTracker", "ResultType"]

#: A key under which results are stored (made a str with ``str(key)``).
KeyType = Union[int, str]  # noqa: UP007 (a runtime alias, on Python 3.10)
#: A result: a number, or a short str.
ResultType = Union[int, float, str]  # noqa: UP007 (a runtime alias, on Python 3.10)
#: The most bytes (UTF-8) of a str result.
MAX_STR_BYTES = 1024


def _check(key: object, results: dict[str, object]) -> None:
    if isinstance(key, bool) or not isinstance(key, (int, str)) or key == "":
        raise TypeError(f"result key {key!r} must be an int or a non-empty str")
    for name, value in results.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise TypeError(
                f"result {name}={value!r} must be an int, a float or a str, not "
                f"{type(value).__name__}"
            )
        if isinstance(value, str) and len(value.encode("utf-8")) > MAX_STR_BYTES:
            raise ValueError(
                f"result {name} is {len(value.encode('utf-8'))} bytes long; a str result "
                f"holds at most {MAX_STR_BYTES} bytes (store large data elsewhere, and its "
                "path here)"
            )


class ResultTracker(abc.ABC):
    """Stores results under keys in a backing store; subclass it for each store.

    ``tracker.put(key, a=1)`` is ``tracker[key] = {"a": 1}``, and ``tracker.get(key)`` is
    ``tracker[key]``. A result is an int, a float, or a str of at most
    :data:`MAX_STR_BYTES`; a key is an int or a str (``/`` in a name is a convention for
    statistics: ``{"loss/mean": 0.2, "loss/sem": 0.01}``).

    The store decides consistency: a ``get`` right after a ``put`` of the same key may not see
    it yet, and two ``put`` calls of one key leave either. Use a unique key per writer (the
    job id, or the job id and the replica's rank).
    """

    def __getitem__(self, key: KeyType) -> dict[str, ResultType]:
        return self.get(key)

    def __setitem__(self, key: KeyType, results: dict[str, ResultType]) -> None:
        self.put(key, **results)

    @abc.abstractmethod
    def put(self, key: KeyType, **results: ResultType) -> None:
        """Stores ``results`` under ``str(key)``, replacing what it held.

        Args:
            key: where to store them
            results: name -> result

        Raises:
            TypeError: a key or result of a type that cannot be stored.
            ValueError: a str result longer than :data:`MAX_STR_BYTES`.
        """

    @abc.abstractmethod
    def get(self, key: KeyType) -> dict[str, ResultType]:
        """Returns the results stored under ``str(key)``, or ``{}`` (never waits for them).

        Args:
            key: where they were stored

        Returns:
            name -> result
        """


class FsspecResultTracker(ResultTracker):
    """Stores each key's results as a JSON file under ``tracker_base``, a directory or any
    fsspec URL (``s3://bucket/trainer/123``, ``memory://results``); a key with ``/`` is a
    path below it.

    >>> tracker = FsspecResultTracker("memory://results-doc")
    >>> tracker["attempt_1/out"] = {"accuracy": 0.233}
    >>> FsspecResultTracker("memory://results-doc")["attempt_1/out"]
    {'accuracy': 0.233}

    Args:
        tracker_base: where the results are stored
    """

    def __init__(self, tracker_base: str) -> None:
        self.tracker_base = tracker_base

    def put(self, key: KeyType, **results: ResultType) -> None:
        """Writes ``results`` to ``{tracker_base}/{key}`` as JSON (see
        :meth:`ResultTracker.put`)."""
        import fsspec

        _check(key, dict(results))
        mapper = fsspec.get_mapper(self.tracker_base, create=True)
        mapper[str(key)] = json.dumps(results, indent=2).encode("utf-8")

    def get(self, key: KeyType) -> dict[str, ResultType]:
        """Reads ``{tracker_base}/{key}`` (see :meth:`ResultTracker.get`)."""
        import fsspec

        _check(key, {})
        mapper = fsspec.get_mapper(self.tracker_base)
        try:
            data = mapper[str(key)]
        except KeyError:
            return {}
        results: dict[str, ResultType] = json.loads(data.decode("utf-8"))
        return results
