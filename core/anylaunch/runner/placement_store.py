"""The placement record: what every process of a deployment reads to follow a placed app.

Under a root fsspec URL (the ``checkpoint_root``: a shared filesystem, S3, GCS...), each
placed app has a folder ``{root}/{session}/{app_id}/`` holding

- ``placement/placement.json``: the targets (scheduler names, run option names) and budget,
  written once;
- ``placement/attempt-{n}.json``: attempt ``n``'s target, backend handle and outcome. An
  attempt file is *created exclusively*, so of two processes that would start attempt ``n``
  at once, one does and the other follows it: a placed app never has two live copies;
- ``placement/cancelled.json``: written when someone cancels the placed app: nobody starts
  another attempt after it;
- ``checkpoint/``: the app's own (``ANYLAUNCH_CHECKPOINT_URL``), the same for every attempt.

A record is plain JSON and holds no run option values and no env: nothing secret.

>>> import tempfile
>>> store = PlacementStore(tempfile.mkdtemp())
>>> store.create("s", "train-1", {"targets": ["slurm"]})
>>> store.claim("s", "train-1", AttemptRecord(0, 0, "slurm"))
True
>>> store.claim("s", "train-1", AttemptRecord(0, 0, "slurm"))  # someone else was first
False
>>> [a.scheduler for a in store.read("s", "train-1").attempts]
['slurm']
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from anylaunch.specs.errors import InvalidSpecError

__all__ = [
    "CHECKPOINT_ROOT_ENV",
    "AttemptRecord",
    "PlacementRecord",
    "PlacementStore",
    "locate_store",
    "resolve_root",
]

#: The environment variable that sets the checkpoint root for every process that reads it.
CHECKPOINT_ROOT_ENV = "ANYLAUNCH_CHECKPOINT_ROOT"


@dataclass
class AttemptRecord:
    """One attempt: its target, and once submitted its backend handle.

    ``skipped`` lists the targets passed over before this one (scheduler, reason);
    ``relaunches`` counts the infrastructure relaunches that led to it.
    """

    attempt: int
    target: int
    scheduler: str
    handle: str | None = None
    submitted_at: float = 0.0
    started: bool = False
    outcome: str = "current"
    reason: str = ""
    relaunches: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    claimed_at: float = 0.0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AttemptRecord:
        data = dict(data)
        data["skipped"] = [(str(s), str(r)) for s, r in data.get("skipped", [])]
        return cls(**data)


@dataclass
class PlacementRecord:
    """A placed app's record as read: its spec, attempts in order, and whether it was
    cancelled."""

    spec: dict[str, Any]
    attempts: list[AttemptRecord]
    cancelled: bool

    @property
    def current(self) -> AttemptRecord | None:
        return self.attempts[-1] if self.attempts else None


def resolve_root(explicit: str | None = None) -> str:
    """The checkpoint root: ``explicit``, else ``$ANYLAUNCH_CHECKPOINT_ROOT``, else
    ``checkpoint_root`` of the ``[anylaunch]`` section of ``.anylaunchconfig``, else the local
    ``~/.anylaunch/placements`` (one host only)."""
    if explicit:
        return explicit
    from_env = os.environ.get(CHECKPOINT_ROOT_ENV)
    if from_env:
        return from_env
    from anylaunch.runner.config import get_global

    configured = get_global("checkpoint_root")
    if configured:
        return configured
    from anylaunch.specs.home import ANYLAUNCH_HOME

    return str(ANYLAUNCH_HOME("placements"))


def _pointer(session: str, app_id: str) -> str:
    from anylaunch.specs.home import ANYLAUNCH_HOME

    return os.path.join(ANYLAUNCH_HOME("placements", "roots", session), app_id)


def locate_store(session: str, app_id: str) -> PlacementStore | None:
    """The store that holds the record of ``{session}/{app_id}``, or None: the resolved root
    first, then the root this host last used for that app (a placement with an explicit
    ``checkpoint_root`` leaves a pointer in the local home)."""
    store = PlacementStore(resolve_root())
    if store.exists(session, app_id):
        return store
    try:
        with open(_pointer(session, app_id), encoding="utf-8") as f:
            root = f.read().strip()
    except OSError:
        return None
    store = PlacementStore(root)
    return store if store.exists(session, app_id) else None


class PlacementStore:
    """Reads and writes placement records under one fsspec root URL."""

    def __init__(self, root: str) -> None:
        import fsspec

        if not isinstance(root, str) or not root.strip() or "\0" in root:
            raise InvalidSpecError(
                "checkpoint_root", root, "must be a non-empty fsspec URL", "e.g. /shared/ckpt"
            )
        self.root = root.rstrip("/")
        self._fs, self._path = fsspec.core.url_to_fs(self.root)

    def _dir(self, session: str, app_id: str) -> str:
        return f"{self._path}/{session}/{app_id}/placement"

    def checkpoint_url(self, session: str, app_id: str) -> str:
        """The app's ``ANYLAUNCH_CHECKPOINT_URL`` (the same for every attempt)."""
        return f"{self.root}/{session}/{app_id}/checkpoint"

    def exists(self, session: str, app_id: str) -> bool:
        return bool(self._fs.exists(f"{self._dir(session, app_id)}/placement.json"))

    def create(self, session: str, app_id: str, spec: dict[str, Any]) -> None:
        """Writes the placement's spec (once) and, for a non-default root, this host's
        pointer to it."""
        folder = self._dir(session, app_id)
        self._fs.makedirs(folder, exist_ok=True)
        self._fs.makedirs(f"{self._path}/{session}/{app_id}/checkpoint", exist_ok=True)
        self._write(f"{folder}/placement.json", spec, exclusive=True)
        if self.root != resolve_root():
            with open(_pointer(session, app_id), "w", encoding="utf-8") as f:
                f.write(self.root)

    def claim(self, session: str, app_id: str, record: AttemptRecord) -> bool:
        """Creates attempt ``record.attempt``'s file; False if another process already did."""
        try:
            self._write(self._attempt_path(session, app_id, record.attempt), asdict(record), True)
        except FileExistsError:
            return False
        return True

    def update(self, session: str, app_id: str, record: AttemptRecord) -> None:
        """Rewrites an attempt this process claimed."""
        self._write(self._attempt_path(session, app_id, record.attempt), asdict(record), False)

    def mark_cancelled(self, session: str, app_id: str) -> None:
        path = f"{self._dir(session, app_id)}/cancelled.json"
        with contextlib.suppress(FileExistsError):
            self._write(path, {"cancelled_at": time.time()}, exclusive=True)

    def read(self, session: str, app_id: str) -> PlacementRecord | None:
        """The record, or None when there is none."""
        folder = self._dir(session, app_id)
        try:
            with self._fs.open(f"{folder}/placement.json", "rb") as f:
                spec = json.loads(f.read())
        except FileNotFoundError:
            return None
        attempts: list[AttemptRecord] = []
        while True:  # attempt files are numbered densely from 0
            found = self._read_attempt(self._attempt_path(session, app_id, len(attempts)))
            if found is None:
                break
            attempts.append(found)
        cancelled = bool(self._fs.exists(f"{folder}/cancelled.json"))
        return PlacementRecord(spec, attempts, cancelled)

    def _read_attempt(self, path: str) -> AttemptRecord | None:
        # an exclusively created file is empty for the moment between its creation and its
        # write: wait that moment out (bounded) rather than read half a record
        for _ in range(100):
            try:
                with self._fs.open(path, "rb") as f:
                    body = f.read()
            except FileNotFoundError:
                return None
            try:
                return AttemptRecord.from_json(json.loads(body))
            except ValueError:
                time.sleep(0.05)
        raise InvalidSpecError(
            "placement record", path, "is not a JSON attempt record", "remove the broken file"
        )

    def _attempt_path(self, session: str, app_id: str, attempt: int) -> str:
        return f"{self._dir(session, app_id)}/attempt-{attempt}.json"

    def _write(self, path: str, data: dict[str, Any], exclusive: bool) -> None:
        body = json.dumps(data, indent=1).encode()
        if exclusive:
            with self._fs.open(path, "xb") as f:
                f.write(body)
            return
        # readers never see half a file; every writer (process, thread) has its own tmp
        tmp = f"{path}.{os.getpid()}-{threading.get_ident()}.tmp"
        with self._fs.open(tmp, "wb") as f:
            f.write(body)
        self._fs.mv(tmp, path)
