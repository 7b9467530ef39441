"""The archive: an app's outcome kept past the backend's memory of it.

Backends forget ended apps (a Job's TTL, ``docker rm``, Slurm's ``MinJobAge``, expired log
streams, a cleaned state dir). With an archive URL configured, the first process that sees an
app end writes its record once, under ``{archive_url}/{scheduler}/{session}/{app_id}/``:

- ``app.json``: the AppDef as the scheduler describes it, secret env values masked;
- ``request.txt``: the scheduler request, when the writer submitted it (masked);
- ``summary.txt``: the failure summary of an app that did not succeed;
- ``logs/{role}/{replica}/{stdout,stderr}.log`` (or ``combined.log`` where the backend does not
  split the streams): every line, secrets masked;
- ``status.json``: the final status (with an array's per-index states and a placed attempt's
  history), written **last**: a record without it is incomplete and never read.

Writers claim the record first (``claim.json``, created exclusively), so of several
processes that see the end at once one writes; a claim left by a writer that died is taken
over after :data:`STALE_CLAIM_S`. Every file is written to a temporary name and renamed.

Readers (``Runner.status``, ``describe``, ``log_lines`` and so the CLI and every engine) fall
back to the record when the backend no longer knows the app.

The URL comes from ``$ANYLAUNCH_ARCHIVE_URL``, else ``archive_url`` of the ``[anylaunch]``
section of ``.anylaunchconfig``. Any fsspec URL a later process can read works (a path,
``file://``, ``s3://``, ``gs://``...); ``memory://`` is refused: it dies with its process.

>>> import tempfile
>>> from anylaunch.specs.api import AppState, AppStatus
>>> archive = Archive(tempfile.mkdtemp())
>>> archive.has("local_cwd://s/echo-1")
False
>>> archive.put_status("local_cwd://s/echo-1", AppStatus(AppState.SUCCEEDED, msg="done"))
>>> archive.status("local_cwd://s/echo-1").msg
'done'
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from anylaunch.schedulers.api import ARCHIVE_URL_ENV
from anylaunch.specs.api import AppDef, AppHandle, AppStatus, Role, parse_app_handle
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.runopts import CfgVal
from anylaunch.specs.secrets import Redactor

if TYPE_CHECKING:
    from anylaunch.runner.api import Runner
    from anylaunch.schedulers.api import Stream

__all__ = [
    "ARCHIVE_URL_ENV",
    "STALE_CLAIM_S",
    "Archive",
    "ArchiveKeeper",
    "archive_location",
    "configured_archive",
]

logger = logging.getLogger(__name__)

#: A claim older than this whose record has no status is a dead writer's: take it over.
STALE_CLAIM_S = 600.0
_NOT_DURABLE = ("memory://", "memory:")


def configured_archive() -> Archive | None:
    """The archive the environment or ``.anylaunchconfig`` names (None: no archive).

    Raises:
        InvalidSpecError: the URL is not durable (``memory://``) or not a URL
    """
    url = os.environ.get(ARCHIVE_URL_ENV)
    where = ARCHIVE_URL_ENV
    if not url:
        from anylaunch.runner.config import get_global

        url = get_global("archive_url")
        where = "[anylaunch] archive_url"
    return Archive(url, field=where) if url else None


def archive_location(app_handle: AppHandle) -> str | None:
    """The URL of the app's record in the configured archive (for an engine's log link), or
    None without an archive; a misconfigured one is logged, never raised (the runner that
    launched or watched the app has said what is wrong with it).

    >>> import os
    >>> os.environ[ARCHIVE_URL_ENV] = "/shared/archive"
    >>> archive_location("local_cwd://s/echo-1")
    '/shared/archive/local_cwd/s/echo-1'
    >>> del os.environ[ARCHIVE_URL_ENV]
    """
    try:
        archive = configured_archive()
    except InvalidSpecError as e:
        logger.warning("no archive link for %s: %s", app_handle, e)
        return None
    return archive.location(app_handle) if archive is not None else None


class Archive:
    """The records of ended apps under one fsspec URL."""

    def __init__(self, url: str, *, field: str = "archive_url") -> None:
        """The archive at ``url`` (``field`` names where the URL came from, for errors).

        Raises:
            InvalidSpecError: ``url`` is not durable (``memory://``), names no place, has a
                protocol fsspec does not know or whose package is not installed
        """
        import fsspec

        if not isinstance(url, str) or not url.strip() or "\0" in url:
            raise InvalidSpecError(field, url, "must be an fsspec URL", "e.g. s3://bucket/archive")
        if url.startswith(_NOT_DURABLE):
            raise InvalidSpecError(
                field,
                url,
                "is not durable (memory:// dies with its process)",
                "use a store later processes can read: a path, file://, s3://, gs://",
            )
        self.url = url.rstrip("/")
        if not self.url or self.url.endswith(":"):  # "s3://", "/": no place of its own
            raise InvalidSpecError(
                field, url, "names no bucket or directory", "e.g. s3://bucket/archive"
            )
        try:
            self._fs, self._root = fsspec.core.url_to_fs(self.url)
        except ImportError as e:  # e.g. gs:// without gcsfs: fsspec's message names it
            raise InvalidSpecError(
                field, url, f"cannot be opened here ({e})", "install the package it names"
            ) from None
        except (ValueError, OSError) as e:  # an unknown protocol, a chain that cannot open
            raise InvalidSpecError(
                field, url, f"is not a URL fsspec can open ({e})", "e.g. s3://bucket/archive"
            ) from None

    def __repr__(self) -> str:
        return f"Archive({self.url!r})"

    # --- where -------------------------------------------------------------------------

    def _dir(self, app_handle: AppHandle) -> str:
        scheduler, session, app_id = parse_app_handle(app_handle)
        return f"{self._root}/{scheduler}/{session or '_'}/{app_id}"

    def location(self, app_handle: AppHandle) -> str:
        """The URL of the app's record (for an engine's log link)."""
        scheduler, session, app_id = parse_app_handle(app_handle)
        return f"{self.url}/{scheduler}/{session or '_'}/{app_id}"

    def has(self, app_handle: AppHandle) -> bool:
        """Whether the app's record is complete."""
        return bool(self._fs.exists(f"{self._dir(app_handle)}/status.json"))

    # --- writing -----------------------------------------------------------------------

    def _put(self, path: str, body: bytes) -> None:
        tmp = f"{path}.{os.getpid()}-{threading.get_ident()}.tmp"
        parent = path.rsplit("/", 1)[0]
        self._fs.makedirs(parent, exist_ok=True)
        with self._fs.open(tmp, "wb") as f:
            f.write(body)
        self._fs.mv(tmp, path)

    def _claim(self, app_handle: AppHandle) -> bool:
        folder = self._dir(app_handle)
        self._fs.makedirs(folder, exist_ok=True)
        path = f"{folder}/claim.json"
        body = json.dumps({"pid": os.getpid(), "at": time.time()}).encode()
        try:
            with self._fs.open(path, "xb") as f:
                f.write(body)
            return True
        except FileExistsError:
            pass
        try:
            with self._fs.open(path, "rb") as f:
                at = float(json.loads(f.read())["at"])
        except (OSError, ValueError, KeyError, TypeError):
            # created but not written yet (another writer is between the two), or garbled:
            # as old as its file
            at = self._modified(path)
        if time.time() - at < STALE_CLAIM_S:
            return False  # another writer is at it
        self._put(path, body)  # a dead writer's claim
        return True

    def _modified(self, path: str) -> float:
        try:
            return float(self._fs.modified(path).timestamp())
        except Exception:  # the store cannot say (NotImplementedError, OSError): take it as new
            return time.time()

    def put_status(self, app_handle: AppHandle, status: AppStatus) -> None:
        """Writes the final status: the record is complete from now on."""
        data = {"archived_at": time.time(), "status": status.to_dict()}
        self._put(f"{self._dir(app_handle)}/status.json", json.dumps(data, indent=1).encode())

    def write(
        self,
        runner: Runner,
        app_handle: AppHandle,
        status: AppStatus,
        secrets: Redactor | None = None,
        request: str | None = None,
    ) -> bool:
        """Writes the ended app's record (see the module doc) unless it exists or another
        writer is at it; True if this call wrote it. Everything written is masked: the
        secret env values of the app (built-in secret names) and ``secrets`` (what the
        caller knows, e.g. an engine's declared secrets)."""
        if self.has(app_handle) or not self._claim(app_handle):
            return False
        from anylaunch.runner.outcome import failure_summary, masked_status
        from anylaunch.specs.secrets import app_redactor
        from anylaunch.specs.serialize import appdef_to_dict

        folder = self._dir(app_handle)
        app = runner.describe(app_handle)
        redact = app_redactor(app) | (secrets or Redactor())
        if app is not None:
            plain = json.dumps(appdef_to_dict(app, mask_secrets=True), indent=1)
            self._put(f"{folder}/app.json", redact(plain).encode())
        if request:
            self._put(f"{folder}/request.txt", redact(request).encode())
        if status.state.name != "SUCCEEDED":
            summary = failure_summary(app_handle, status, redact=redact)
            self._put(f"{folder}/summary.txt", summary.encode())
        for role, k in _replicas(app, status):
            self._write_logs(runner, app_handle, folder, role, k, redact)
        self.put_status(app_handle, masked_status(status, redact))
        logger.info("archived %s at %s", app_handle, self.location(app_handle))
        return True

    def _write_logs(
        self,
        runner: Runner,
        app_handle: AppHandle,
        folder: str,
        role: str,
        k: int,
        redact: Callable[[str], str],
    ) -> None:
        from anylaunch.schedulers.api import Stream

        base = f"{folder}/logs/{role}/{k}"
        try:
            split = {
                stream: "".join(runner.log_lines(app_handle, role, k, streams=stream))
                for stream in (Stream.STDOUT, Stream.STDERR)
            }
        except Exception:  # the backend does not split its streams: keep them as one
            split = {}
        if split:
            for stream, text in split.items():
                self._put(f"{base}/{stream.value}.log", redact(text).encode())
            return
        try:
            text = "".join(runner.log_lines(app_handle, role, k))
        except Exception as e:  # no log at all is said, not fatal
            logger.warning("cannot archive the logs of %s %s/%d: %s", app_handle, role, k, e)
            return
        self._put(f"{base}/combined.log", redact(text).encode())

    # --- reading -------------------------------------------------------------------------

    def _read(self, path: str) -> bytes | None:
        try:
            with self._fs.open(path, "rb") as f:
                body: bytes = f.read()
                return body
        except FileNotFoundError:
            return None

    def status(self, app_handle: AppHandle) -> AppStatus | None:
        """The archived final status (None: no complete record)."""
        body = self._read(f"{self._dir(app_handle)}/status.json")
        if body is None:
            return None
        data: dict[str, Any] = json.loads(body)
        return AppStatus.from_dict(data["status"])

    def app(self, app_handle: AppHandle) -> AppDef | None:
        """The archived (masked) AppDef of a complete record."""
        if not self.has(app_handle):
            return None
        body = self._read(f"{self._dir(app_handle)}/app.json")
        if body is None:
            return None
        from anylaunch.specs.serialize import appdef_from_dict

        return appdef_from_dict(json.loads(body))

    def log_lines(self, app_handle: AppHandle, role: str, k: int, stream: str | None) -> list[str]:
        """The archived lines of one replica (each with its newline): ``stream`` stdout or
        stderr, or None for both (stdout's, then stderr's, as the record keeps them apart).

        Raises:
            FileNotFoundError: the record holds no log of that replica
        """
        base = f"{self._dir(app_handle)}/logs/{role}/{k}"
        combined = self._read(f"{base}/combined.log")
        names = [stream] if stream else ["stdout", "stderr"]
        bodies = [self._read(f"{base}/{name}.log") for name in names]
        if all(b is None for b in bodies):
            if combined is None:
                raise FileNotFoundError(f"{base}: no archived log of {role}/{k}")
            bodies = [combined]
        text = "".join(b.decode(errors="replace") for b in bodies if b is not None)
        return text.splitlines(keepends=True)


class ArchiveKeeper:
    """A Runner's side of the archive: writes the record of each app it sees end (once),
    and answers for apps their scheduler forgot (saying so once).

    An app's archive is the one its run named (the ``archive_url`` run option), else the
    configured one (:func:`configured_archive`); the runner writes its URL into every role's
    env (:data:`ARCHIVE_URL_ENV`), so the job and every process that describes the app find
    the same archive, configured or not."""

    def __init__(self, runner: Runner, archive: Archive | None) -> None:
        self.runner = runner
        #: the configured archive (None: none configured)
        self.archive = archive
        #: the requests this runner submitted (archived with the app), by handle
        self.requests: dict[AppHandle, str] = {}
        #: secrets callers declared for an app (``Runner.note_secrets``)
        self.secrets: dict[AppHandle, Redactor] = {}
        self._seen: set[AppHandle] = set()
        self._by_handle: dict[AppHandle, Archive] = {}

    def for_run(self, app: AppDef, url: CfgVal) -> None:
        """Names the archive of an app about to be dry-run: ``url`` (its ``archive_url`` run
        option), else the configured archive, goes into every role's env.

        Raises:
            InvalidSpecError: ``url`` is not a durable fsspec URL (field ``cfg.archive_url``)
        """
        archive = self.archive if url is None else Archive(str(url), field="cfg.archive_url")
        if archive is not None:
            for role in app.roles:
                role.env[ARCHIVE_URL_ENV] = archive.url

    def _of(self, app_handle: AppHandle, roles: Sequence[Role] = ()) -> Archive | None:
        """The app's archive: the one its roles' env names (as the runner wrote it), else the
        configured one."""
        known = self._by_handle.get(app_handle)
        if known is not None:
            return known
        url = next((r.env[ARCHIVE_URL_ENV] for r in roles if r.env.get(ARCHIVE_URL_ENV)), None)
        if url is None or (self.archive is not None and url.rstrip("/") == self.archive.url):
            return self.archive
        try:
            archive = Archive(url, field=f"{ARCHIVE_URL_ENV} of {app_handle}")
        except InvalidSpecError as e:  # written by someone else's runner: say it, keep going
            logger.warning("%s names no usable archive: %s", app_handle, e)
            return self.archive
        self._by_handle[app_handle] = archive
        return archive

    def submitted(self, app_handle: AppHandle, app: AppDef, request: str) -> None:
        """The runner submitted the app: its request goes into the record, and its secret env
        values are masked there (backends describe them masked, so the app's own output could
        not be masked from a description)."""
        from anylaunch.specs.secrets import app_redactor

        if self._of(app_handle, app.roles) is None:
            return
        self.requests[app_handle] = request
        self.note_secrets(app_handle, app_redactor(app))

    def note_secrets(self, app_handle: AppHandle, secrets: Redactor) -> None:
        """Masks ``secrets`` in the app's record too (added to those known already)."""
        known = self.secrets.get(app_handle)
        self.secrets[app_handle] = secrets if known is None else known | secrets

    def ended(self, app_handle: AppHandle, status: AppStatus, roles: Sequence[Role] = ()) -> None:
        """The runner saw the app end (``roles``: as its scheduler describes them): write its
        record unless it did already; once the record is complete, the scheduler may let go
        of what it kept for it (:meth:`~anylaunch.schedulers.api.Scheduler.archived`)."""
        if app_handle in self._seen:
            return
        self._seen.add(app_handle)
        archive = self._of(app_handle, roles)
        if archive is None:
            return
        from anylaunch.runner.events import record_action

        started = time.time()
        secrets = self.secrets.pop(app_handle, None)
        try:
            wrote = archive.write(
                self.runner, app_handle, status, secrets, self.requests.pop(app_handle, None)
            )
            complete = wrote or archive.has(app_handle)
        except Exception as e:  # the archive is a record, never a reason to fail a status
            logger.warning("could not archive %s at %s: %s", app_handle, archive, e)
            record_action(
                "archive",
                app_handle=app_handle,
                state=status.state,
                error=e,
                started_at=started,
                secrets=secrets,
            )
            return
        if wrote:
            record_action(
                "archive",
                app_handle=app_handle,
                state=status.state,
                detail=archive.location(app_handle),
                started_at=started,
                secrets=secrets,
            )
        if complete:
            self._release(app_handle)

    def _release(self, app_handle: AppHandle) -> None:
        try:
            sched, app_id = self.runner._scheduler_app_id(app_handle)
            sched.archived(app_id)
        except Exception as e:  # the record is safe; the backend keeps the app a while longer
            logger.warning("%s is archived, but its scheduler kept its hold: %s", app_handle, e)

    def status(self, app_handle: AppHandle) -> AppStatus | None:
        """The archived end of an app its scheduler forgot (None: no record)."""
        archive = self._of(app_handle)
        status = archive.status(app_handle) if archive is not None else None
        if archive is None or status is None:
            return None
        where = archive.location(app_handle)
        if app_handle not in self._seen:
            self._seen.add(app_handle)
            logger.info("%s is gone from its scheduler: from the archive at %s", app_handle, where)
        status.msg = f"{status.msg} (from the archive at {where})".strip()
        status.ui_url = f"{where}/logs"  # the backend's own link is dead now
        return status

    def app(self, app_handle: AppHandle) -> AppDef | None:
        """The archived (masked) definition of an app its scheduler forgot."""
        archive = self._of(app_handle)
        return archive.app(app_handle) if archive is not None else None

    def log_lines(
        self,
        app_handle: AppHandle,
        role: str,
        k: int,
        regex: str | None,
        streams: Stream | None,
        roles: Sequence[Role] = (),
    ) -> list[str] | None:
        """The archived lines of a replica of an ended app (None: no record)."""
        from anylaunch.schedulers.api import Stream, filter_regex

        archive = self._of(app_handle, roles)
        if archive is None or not archive.has(app_handle):
            return None
        stream = None if streams in (None, Stream.COMBINED) else str(streams)
        lines = archive.log_lines(app_handle, role, k, stream)
        return list(filter_regex(regex, lines)) if regex else lines


def _replicas(app: AppDef | None, status: AppStatus) -> list[tuple[str, int]]:
    """Every replica whose logs to keep: from the status's replicas, else the app's roles."""
    found = [(role.role, r.id) for role in status.roles for r in role.replicas]
    if found:
        return found
    if app is None:
        return []
    return [(role.name, k) for role in app.roles for k in range(role.num_replicas)]
