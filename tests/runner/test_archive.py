"""The archive's own rules, on local_cwd apps (fast): one writer per record however many
runners see the end, a dead writer's claim taken over, an incomplete record never read, URLs
refused with the project's error, and a failed write that never fails a status."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import anylaunch.runner.archive as archive_module
import anylaunch.specs as specs
from anylaunch.runner import Runner, get_runner
from anylaunch.runner.archive import ARCHIVE_URL_ENV, Archive, configured_archive
from anylaunch.specs import AppState, InvalidSpecError, UnknownAppException

WAIT_S = 60.0  # a safety net against a hung app, not a measurement


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This test's own state dir, home and cwd (no config file anywhere); the archive URL
    (a ``file://`` URL under tmp_path) is returned, not set."""
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ANYLAUNCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ANYLAUNCHCONFIG", raising=False)
    monkeypatch.delenv(ARCHIVE_URL_ENV, raising=False)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    yield tmp_path / "archive"


def _ended(runner: Runner, tmp_path: Path, script: str = "echo hi; echo oops >&2") -> str:
    role = specs.Role("w", str(tmp_path), entrypoint="sh", args=["-c", script])
    handle = runner.run(specs.AppDef("a", [role]), "local_cwd")
    status = runner.wait(handle, wait_interval=0.1, timeout=WAIT_S)
    assert status is not None and status.state.is_terminal(), status
    return handle


def _forget(tmp_path: Path) -> None:
    """Cleans the local state dir: local_cwd no longer knows any app."""
    import shutil

    shutil.rmtree(tmp_path / "state")


# --- one writer -----------------------------------------------------------------------------


def _write_at_once(
    archive: Archive, runners: list[Runner], handle: str, status: specs.AppStatus
) -> list[bool]:
    """What ``archive.write`` returns to each runner, all released at the same moment."""
    barrier = threading.Barrier(len(runners))
    wrote: list[bool] = []

    def write(runner: Runner) -> None:
        barrier.wait()
        wrote.append(archive.write(runner, handle, status))

    threads = [threading.Thread(target=write, args=(r,)) for r in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    return wrote


def test_two_runners_that_see_the_same_end_write_one_record(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with get_runner("one") as first, get_runner("two") as second:
        handle = _ended(first, tmp_path)
        status = first.status(handle)  # no archive configured yet: nothing written
        assert status is not None
        # both write at once, many times over (each round in an archive of its own)
        for i in range(10):
            archive = Archive((env / str(i)).as_uri())
            wrote = _write_at_once(archive, [first, second], handle, status)
            assert sorted(wrote) == [False, True], (i, wrote)
            assert archive.has(handle)
            assert archive.log_lines(handle, "w", 0, None) == ["hi\n", "oops\n"]

    # through Runner.status: the first runner that sees the end writes, the other does not
    monkeypatch.setenv(ARCHIVE_URL_ENV, env.as_uri())
    with get_runner("three") as third, get_runner("four") as fourth:
        handle = _ended(third, tmp_path)
        folder = Path(Archive(env.as_uri())._dir(handle))
        written = (folder / "status.json").read_text()
        assert fourth.status(handle) is not None
        assert (folder / "status.json").read_text() == written  # not written again
        assert sorted(p.name for p in folder.iterdir()) == [
            "app.json",
            "claim.json",
            "logs",
            "request.txt",
            "status.json",
        ]


def test_a_claim_left_by_a_dead_writer_is_taken_over_once_it_is_stale(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = Archive(env.as_uri())
    with get_runner("claims") as runner:
        handle = _ended(runner, tmp_path)
        status = runner.status(handle)
        assert status is not None
        folder = Path(archive._dir(handle))
        folder.mkdir(parents=True)
        # a writer that claimed the record 5 s ago and died before its status
        (folder / "claim.json").write_text(json.dumps({"pid": 2**22 + 1, "at": time.time() - 5}))

        assert archive.write(runner, handle, status) is False  # it may still be writing
        assert not archive.has(handle)

        monkeypatch.setattr(archive_module, "STALE_CLAIM_S", 1.0)
        assert archive.write(runner, handle, status) is True
        assert archive.has(handle) and archive.status(handle) is not None
        claim = json.loads((folder / "claim.json").read_text())
        assert claim["pid"] == os.getpid()
        assert archive.write(runner, handle, status) is False  # complete: never rewritten


def test_a_claim_not_written_yet_is_as_old_as_its_file(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = Archive(env.as_uri())
    with get_runner("empty-claim") as runner:
        handle = _ended(runner, tmp_path)
        status = runner.status(handle)
        assert status is not None
        folder = Path(archive._dir(handle))
        folder.mkdir(parents=True)
        claim = folder / "claim.json"
        claim.write_text("")  # created by a writer that has not written it yet
        monkeypatch.setattr(archive_module, "STALE_CLAIM_S", 60.0)
        assert archive.write(runner, handle, status) is False
        old = time.time() - 120
        os.utime(claim, (old, old))  # ... or that died right after creating it
        assert archive.write(runner, handle, status) is True
        assert archive.has(handle)


# --- an incomplete record -------------------------------------------------------------------


def test_a_record_without_its_status_is_not_read(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ARCHIVE_URL_ENV, env.as_uri())
    with get_runner("partial") as runner:
        handle = _ended(runner, tmp_path)
    archive = Archive(env.as_uri())
    folder = Path(archive._dir(handle))
    assert archive.has(handle)
    (folder / "status.json").unlink()  # what a writer that died before its last file leaves
    assert (folder / "app.json").exists() and (folder / "logs").is_dir()
    _forget(tmp_path)

    assert not archive.has(handle)
    assert archive.status(handle) is None and archive.app(handle) is None
    with get_runner("reader") as reader:
        assert reader.status(handle) is None
        assert reader.describe(handle) is None
        with pytest.raises(UnknownAppException):
            list(reader.log_lines(handle, "w", 0))


# --- configuration --------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["memory://archive", "memory:archive", "memory://"])
def test_memory_is_refused_as_not_durable(
    url: str, env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(InvalidSpecError, match="not durable") as error:
        Archive(url)
    assert error.value.field == "archive_url"
    monkeypatch.setenv(ARCHIVE_URL_ENV, url)
    with pytest.raises(InvalidSpecError, match="not durable") as error:
        configured_archive()
    assert error.value.field == ARCHIVE_URL_ENV


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("", "must be an fsspec URL"),
        ("   ", "must be an fsspec URL"),
        ("a\0b", "must be an fsspec URL"),
        (3, "must be an fsspec URL"),
        (None, "must be an fsspec URL"),
        ("s3://", "names no bucket or directory"),
        ("file:///", "names no bucket or directory"),
        ("/", "names no bucket or directory"),
        ("nosuch://bucket/x", "Protocol not known"),
        ("zip://a::file:///no/such.zip", "not a URL fsspec can open"),
    ],
)
def test_bad_urls_are_refused_with_the_projects_error(url: object, problem: str) -> None:
    with pytest.raises(InvalidSpecError, match=problem) as error:
        Archive(url)  # type: ignore[arg-type]
    assert error.value.field == "archive_url"


def test_a_protocol_whose_package_is_missing_is_refused_naming_it() -> None:
    import importlib.util

    if importlib.util.find_spec("gcsfs") is not None:
        pytest.skip("gcsfs is installed here")
    with pytest.raises(InvalidSpecError, match="gcsfs"):
        Archive("gs://bucket/archive")


def test_the_config_file_names_the_archive_and_a_bad_one_is_refused_naming_it(
    env: Path, tmp_path: Path
) -> None:
    config = tmp_path / "cwd" / ".anylaunchconfig"
    config.write_text(f"[anylaunch]\narchive_url = {env.as_uri()}\n")
    found = configured_archive()
    assert found is not None and found.url == env.as_uri()
    config.write_text("[anylaunch]\narchive_url = memory://x\n")
    with pytest.raises(InvalidSpecError) as error:
        configured_archive()
    assert error.value.field == "[anylaunch] archive_url"


def test_a_runner_with_a_bad_archive_url_says_so_with_the_projects_error(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ARCHIVE_URL_ENV, "memory://x")
    with get_runner("bad") as runner, pytest.raises(InvalidSpecError) as error:
        runner.status("local_cwd://bad/no-such-app")
    assert error.value.field == ARCHIVE_URL_ENV


# --- a write that fails ---------------------------------------------------------------------


def test_a_failed_archive_write_warns_and_never_fails_the_status(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # a path under a regular file cannot be created, whoever runs the test (root included)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    url = (blocker / "archive").as_uri()
    monkeypatch.setenv(ARCHIVE_URL_ENV, url)
    logs = caplog.at_level(logging.WARNING, logger="anylaunch.runner.archive")
    with logs, get_runner("unwritable") as runner:
        handle = _ended(runner, tmp_path, "exit 0")
        status = runner.status(handle)
    assert status is not None and status.state == AppState.SUCCEEDED, status
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"could not archive {handle}" in warnings[0], warnings
    assert blocker.read_text() == ""


def test_note_secrets_refuses_what_is_not_a_handle_and_a_redactor() -> None:
    from anylaunch.runner import get_runner
    from anylaunch.specs.errors import InvalidSpecError, MalformedAppHandleException
    from anylaunch.specs.secrets import Redactor

    with get_runner() as runner:
        with pytest.raises(MalformedAppHandleException):
            runner.note_secrets("not a handle", Redactor(["s3cr3t-value"]))
        with pytest.raises(InvalidSpecError, match="secrets"):
            runner.note_secrets("local_cwd://s/app-1", ["s3cr3t-value"])  # type: ignore[arg-type]


# --- the archive_url run option ---------------------------------------------------------------


@pytest.mark.parametrize("url", ["memory://x", "", "s3://"])
def test_a_bad_archive_url_option_is_refused_before_anything_is_submitted(
    env: Path, tmp_path: Path, url: str
) -> None:
    role = specs.Role("w", str(tmp_path), entrypoint="true")
    with get_runner("opt") as runner, pytest.raises(InvalidSpecError) as error:
        runner.run(specs.AppDef("a", [role]), "local_cwd", {"archive_url": url})
    assert error.value.field == "cfg.archive_url"
    assert not (tmp_path / "state").exists() or not list((tmp_path / "state").iterdir())


def test_the_option_wins_over_the_configured_archive_and_every_reader_finds_it(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configured, chosen = tmp_path / "configured", tmp_path / "chosen"
    monkeypatch.setenv(ARCHIVE_URL_ENV, configured.as_uri())
    role = specs.Role("w", str(tmp_path), entrypoint="sh", args=["-c", "echo hi"])
    with get_runner("opt") as runner:
        info = runner.dryrun(specs.AppDef("a", [role]), "local_cwd", {"archive_url": str(chosen)})
        # the job and every process that describes it know where its record goes
        assert info._app.roles[0].env[ARCHIVE_URL_ENV] == str(chosen)
        handle = runner.schedule(info)
    monkeypatch.delenv(ARCHIVE_URL_ENV)
    with get_runner("reader") as reader:  # no archive configured: the app's env names it
        status = reader.wait(handle, wait_interval=0.1, timeout=WAIT_S)
    assert status is not None and status.state == AppState.SUCCEEDED, status
    assert Archive(str(chosen)).has(handle)
    assert not configured.exists()


def test_the_option_is_the_runners_the_scheduler_never_sees_it(env: Path, tmp_path: Path) -> None:
    role = specs.Role("w", str(tmp_path), entrypoint="true")
    with get_runner("opt") as runner:
        assert "archive_url" in {name for name, _ in runner.scheduler_run_opts("local_cwd")}
        info = runner.dryrun(specs.AppDef("a", [role]), "local_cwd", {"archive_url": str(tmp_path)})
    assert info._cfg.get("archive_url") is None  # taken by the runner: env, not a backend option
