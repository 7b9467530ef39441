"""The built-in ``fsspec`` tracker: runs recorded as small JSON files under one fsspec root.

Configure it with the root every job and reader can reach (a shared filesystem, ``s3://``,
``gs://``...) as its config::

    [anylaunch:tracker]
    fs = fsspec

    [tracker:fs]
    config = s3://my-bucket/tracking

Each run has a folder under the root, named by its id (percent-encoded; a long id by its
SHA-256, with the id in ``run_id.txt``) holding

- ``metadata/<time>-<writer>.json``: one file per :meth:`~FsspecTracker.add_metadata` call,
  merged in time order when read, so replicas writing at once lose nothing;
- ``artifacts/<digest>.json``: one file per artifact name (a new write replaces it);
- ``sources/<digest>.json``: one file per (source id, relation).

A file is written under a temporary name and renamed, so a reader never sees half of one.

>>> import tempfile
>>> tracker = FsspecTracker(tempfile.mkdtemp())
>>> tracker.add_metadata("local_cwd://s/train-1", lr=0.1)
>>> tracker.add_metadata("local_cwd://s/train-1", epochs=3)
>>> dict(tracker.metadata("local_cwd://s/train-1"))
{'lr': 0.1, 'epochs': 3}
>>> list(tracker.run_ids())
['local_cwd://s/train-1']
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote

from anylaunch.specs.errors import InvalidSpecError, did_you_mean
from anylaunch.tracker.api import TrackerArtifact, TrackerBase, TrackerSource
from anylaunch.tracker.checks import check_metadata, check_name, check_path, check_run_id
from anylaunch.tracker.errors import TrackerError

__all__ = ["FsspecTracker", "check_root", "create", "generate_filename"]

_ID_FILE = "run_id.txt"
_MAX_KEY_CHARS = 200  # well under the 255 bytes a file name may have
_FILTERS = ("parent_run_id",)


def generate_filename() -> str:
    """A new file name that sorts after every one made before it (TorchX's
    ``generate_filename``): the time in nanoseconds, zero-padded, then this process's id and a
    random part, so replicas writing at once never pick the same name.

    >>> first, second = generate_filename(), generate_filename()
    >>> first < second, first.split("-")[0].isdigit()
    (True, True)
    """
    return f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def check_root(field: str, value: object) -> str:
    """Returns ``value`` if it can be the tracker's root for jobs and readers: an absolute
    path or a URL of a filesystem other processes reach (``memory://`` is one process's).

    >>> check_root("config", "s3://bucket/tracking")
    's3://bucket/tracking'
    >>> check_root("config", "tracking")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: config='tracking' is invalid: a relative path means another directory in each job. Fix: use an absolute path or a URL, e.g. /shared/tracking or s3://bucket/tracking
    """
    fix = "use an absolute path or a URL, e.g. /shared/tracking or s3://bucket/tracking"
    if value is None or (isinstance(value, str) and not value.strip()):
        raise InvalidSpecError(field, value, "the fsspec tracker needs a root", fix)
    root = check_path(field, value)
    if root.startswith("memory:"):
        raise InvalidSpecError(
            field, root, "memory:// lives in one process; jobs and readers would not share it", fix
        )
    if "://" not in root and not os.path.isabs(root):
        raise InvalidSpecError(
            field, root, "a relative path means another directory in each job", fix
        )
    return root


def create(config: str | None) -> FsspecTracker:
    """The factory of the built-in ``fsspec`` tracker: ``config`` is the root (see
    :func:`check_root`)."""
    return FsspecTracker(check_root("fsspec tracker config", config))


def _digest(*parts: str | None) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


class FsspecTracker(TrackerBase):
    """Records runs under ``root_dir``, any fsspec URL or local path.

    Args:
        root_dir: the root (created on the first write)
    """

    def __init__(self, root_dir: str) -> None:
        import fsspec

        self.root_dir = check_path("FsspecTracker.root_dir", root_dir).rstrip("/") or "/"
        self._fs, self._root = fsspec.core.url_to_fs(self.root_dir)

    def __repr__(self) -> str:
        return f"FsspecTracker({self.root_dir!r})"

    # --- layout ---------------------------------------------------------------------------

    @staticmethod
    def _key(run_id: str) -> str:
        quoted = quote(run_id, safe="")
        if len(quoted) <= _MAX_KEY_CHARS and not quoted.startswith("."):
            return quoted
        return "=" + hashlib.sha256(run_id.encode()).hexdigest()  # '=' is never left unquoted

    def _run_dir(self, run_id: str) -> str:
        return f"{self._root}/{self._key(check_run_id('run_id', run_id))}"

    def _write(self, path: str, data: object) -> None:
        folder, _, name = path.rpartition("/")
        self._fs.makedirs(folder, exist_ok=True)
        # every writer (process, thread) its own hidden temporary: readers skip dot files
        tmp = f"{folder}/.{name}.{os.getpid()}-{threading.get_ident()}.tmp"
        with self._fs.open(tmp, "wb") as f:
            f.write(json.dumps(data).encode())
        self._fs.mv(tmp, path)

    def _start_run(self, run_id: str) -> str:
        folder = self._run_dir(run_id)
        id_file = f"{folder}/{_ID_FILE}"
        if self._key(run_id).startswith("=") and not self._fs.exists(id_file):
            self._write(id_file, run_id)
        return folder

    def _entries(self, folder: str) -> list[Any]:
        try:
            self._fs.invalidate_cache(folder)
            names = sorted(p.rstrip("/").rpartition("/")[2] for p in self._fs.ls(folder, False))
        except FileNotFoundError:
            return []
        found: list[Any] = []
        for name in names:
            if name.startswith(".") or not name.endswith(".json"):
                continue
            with self._fs.open(f"{folder}/{name}", "rb") as f:
                body = f.read()
            try:
                found.append(json.loads(body))
            except ValueError:
                raise TrackerError(
                    f"the tracker record {folder}/{name} is not JSON. Fix: remove the broken file"
                ) from None
        return found

    # --- TrackerBase ----------------------------------------------------------------------

    def add_artifact(
        self, run_id: str, name: str, path: str, metadata: Mapping[str, object] | None = None
    ) -> None:
        name = check_name("add_artifact.name", name)
        path = check_path("add_artifact.path", path)
        meta = None if metadata is None else check_metadata("add_artifact.metadata", metadata)
        folder = self._start_run(run_id)
        record = {"name": name, "path": path, "metadata": meta}
        self._write(f"{folder}/artifacts/{_digest(name)}.json", record)

    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        records = self._entries(f"{self._run_dir(run_id)}/artifacts")
        found = [TrackerArtifact(r["name"], r["path"], r.get("metadata")) for r in records]
        return {a.name: a for a in sorted(found, key=lambda a: a.name)}

    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        values = check_metadata("add_metadata", kwargs)
        if not values:
            return
        folder = self._start_run(run_id)
        # time first: entries sort in write order across writers (ties: any order)
        self._write(f"{folder}/metadata/{generate_filename()}.json", values)

    def metadata(self, run_id: str) -> Mapping[str, object]:
        merged: dict[str, object] = {}
        for values in self._entries(f"{self._run_dir(run_id)}/metadata"):
            merged.update(values)
        return merged

    def add_source(self, run_id: str, source_id: str, artifact_name: str | None = None) -> None:
        source_id = check_run_id("add_source.source_id", source_id)
        if artifact_name is not None:
            artifact_name = check_name("add_source.artifact_name", artifact_name)
        folder = self._start_run(run_id)
        record = {"source_run_id": source_id, "artifact_name": artifact_name}
        self._write(f"{folder}/sources/{_digest(source_id, artifact_name)}.json", record)

    def sources(self, run_id: str, artifact_name: str | None = None) -> Iterable[TrackerSource]:
        records = self._entries(f"{self._run_dir(run_id)}/sources")
        found = [TrackerSource(r["source_run_id"], r.get("artifact_name")) for r in records]
        if artifact_name is not None:
            found = [s for s in found if s.artifact_name == artifact_name]
        return sorted(found, key=lambda s: (s.source_run_id, s.artifact_name or ""))

    def run_ids(self, **kwargs: str) -> Iterable[str]:
        for key in kwargs:
            if key not in _FILTERS:
                raise InvalidSpecError(
                    f"run_ids.{key}",
                    kwargs[key],
                    f"is no filter of the fsspec tracker.{did_you_mean(key, _FILTERS)}",
                    f"use one of: {', '.join(_FILTERS)}",
                )
        parent = kwargs.get("parent_run_id")
        if parent is not None:
            parent = check_run_id("parent_run_id", parent)
        ids = sorted(self._all_run_ids())
        if parent is None:
            return ids
        return [r for r in ids if any(s.source_run_id == parent for s in self.sources(r))]

    def _all_run_ids(self) -> list[str]:
        try:
            self._fs.invalidate_cache(self._root)
            entries = self._fs.ls(self._root, detail=True)
        except FileNotFoundError:
            return []  # nothing recorded yet
        ids: list[str] = []
        for entry in entries:
            key = str(entry["name"]).rstrip("/").rpartition("/")[2]
            if entry.get("type") != "directory" or key.startswith("."):
                continue
            if not key.startswith("="):
                ids.append(unquote(key))
                continue
            try:
                with self._fs.open(f"{self._root}/{key}/{_ID_FILE}", "rb") as f:
                    ids.append(str(json.loads(f.read())))
            except (FileNotFoundError, ValueError):
                continue  # a long id whose first write is under way
        return ids

    def has_run(self, run_id: str) -> bool:
        return bool(self._fs.exists(self._run_dir(run_id)))
