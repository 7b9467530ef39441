"""anylaunch.runtime.tracking: small results stored under keys, read back by another process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from anylaunch.runtime.tracking import FsspecResultTracker, ResultTracker
from anylaunch.runtime.tracking.api import MAX_STR_BYTES


def test_put_and_get_through_both_apis(tmp_path: Path) -> None:
    tracker = FsspecResultTracker(str(tmp_path))
    tracker.put("a", l2norm=1.2, n=3, note="ok")
    tracker[1] = {"l2norm/mean": 1.2, "l2norm/sem": 3.4}
    assert tracker["a"] == tracker.get("a") == {"l2norm": 1.2, "n": 3, "note": "ok"}
    assert tracker.get(1)["l2norm/sem"] == 3.4
    assert tracker["none"] == {}
    # human-readable JSON, one file per key
    assert json.loads((tmp_path / "1").read_text()) == {"l2norm/mean": 1.2, "l2norm/sem": 3.4}


def test_a_key_with_slashes_is_a_path_and_bases_are_separate(tmp_path: Path) -> None:
    FsspecResultTracker(str(tmp_path / "foo"))["run/1"] = {"x": 1}
    FsspecResultTracker(str(tmp_path / "bar"))["run/1"] = {"x": 2}
    assert (tmp_path / "foo" / "run" / "1").is_file()
    assert FsspecResultTracker(str(tmp_path / "foo"))["run/1"] == {"x": 1}
    assert FsspecResultTracker(str(tmp_path / "bar"))["run/1"] == {"x": 2}


def test_put_replaces(tmp_path: Path) -> None:
    tracker = FsspecResultTracker(str(tmp_path))
    tracker["k"] = {"a": 1, "b": 2}
    tracker["k"] = {"a": 3}
    assert tracker["k"] == {"a": 3}


def test_another_process_reads_the_results(tmp_path: Path) -> None:
    code = (
        "import sys; from anylaunch.runtime.tracking import FsspecResultTracker as T; "
        "T(sys.argv[1])['app1_out'] = {'accuracy': 0.75}"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)
    assert FsspecResultTracker(str(tmp_path))["app1_out"] == {"accuracy": 0.75}


def test_an_fsspec_url() -> None:
    tracker = FsspecResultTracker("memory://anylaunch-test-results")
    tracker["k"] = {"v": "s3://bucket/model"}
    assert FsspecResultTracker("memory://anylaunch-test-results")["k"] == {"v": "s3://bucket/model"}


@pytest.mark.parametrize(
    ("key", "results", "error"),
    [
        (1.5, {"a": 1}, TypeError),
        ("", {"a": 1}, TypeError),
        (True, {"a": 1}, TypeError),
        ("k", {"a": [1]}, TypeError),
        ("k", {"a": None}, TypeError),
        ("k", {"a": True}, TypeError),
        ("k", {"a": "x" * (MAX_STR_BYTES + 1)}, ValueError),
    ],
)
def test_what_cannot_be_stored(
    tmp_path: Path, key: object, results: dict[str, object], error: type[Exception]
) -> None:
    tracker = FsspecResultTracker(str(tmp_path))
    with pytest.raises(error):
        tracker.put(key, **results)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_a_str_result_at_the_limit_is_kept(tmp_path: Path) -> None:
    tracker = FsspecResultTracker(str(tmp_path))
    tracker["k"] = {"a": "é" * (MAX_STR_BYTES // 2)}
    assert len(tracker["k"]["a"]) == MAX_STR_BYTES // 2  # type: ignore[arg-type]


def test_a_custom_tracker_gets_the_mapping_api() -> None:
    class InMemory(ResultTracker):
        def __init__(self) -> None:
            self.store: dict[str, dict[str, int | float | str]] = {}

        def put(self, key: int | str, **results: int | float | str) -> None:
            self.store[str(key)] = dict(results)

        def get(self, key: int | str) -> dict[str, int | float | str]:
            return self.store.get(str(key), {})

    tracker = InMemory()
    tracker[3] = {"a": 1}
    assert tracker["3"] == {"a": 1} and tracker.store == {"3": {"a": 1}}
    with pytest.raises(TypeError):
        ResultTracker()  # type: ignore[abstract]
