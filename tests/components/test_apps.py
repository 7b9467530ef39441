"""The programs the built-ins run (copy_main, booth_main, serve) really work as subprocesses.

Each test runs the exact args of the component's role with this interpreter, so what is
tested is what a scheduler would run (the entrypoint ``python3`` swapped for sys.executable,
which has anylaunch installed).
"""

import json
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anylaunch.components import serve, utils


def run_role(
    app_args: list[str], timeout: float = 60, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *app_args], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


# --- copy --------------------------------------------------------------------------------------


def test_copy_local_file_into_new_directories(tmp_path: Path) -> None:
    src = tmp_path / "in.bin"
    payload = bytes(range(256)) * 1000
    src.write_bytes(payload)
    dst = tmp_path / "a" / "b" / "out.bin"
    result = run_role(utils.copy(str(src), str(dst)).roles[0].args)
    assert result.returncode == 0, result.stderr
    assert dst.read_bytes() == payload


def test_copy_accepts_file_urls_and_bufsize(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("hello fsspec\n" * 100)
    dst = tmp_path / "out" / "copy.txt"
    args = [*utils.copy(f"file://{src}", f"file://{dst}").roles[0].args, "--bufsize", "7"]
    result = run_role(args)
    assert result.returncode == 0, result.stderr
    assert dst.read_text() == src.read_text()


def test_copy_paths_that_look_like_options(tmp_path: Path) -> None:
    (tmp_path / "-in.txt").write_text("dash")
    result = run_role(utils.copy("-in.txt", "-out.txt").roles[0].args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "-out.txt").read_text() == "dash"


def test_copy_from_a_missing_file_fails_clearly(tmp_path: Path) -> None:
    result = run_role(utils.copy(str(tmp_path / "nope"), str(tmp_path / "dst")).roles[0].args)
    assert result.returncode == 1
    assert "is not an existing file" in result.stderr
    assert not (tmp_path / "dst").exists()


def test_copy_between_different_filesystems_in_process(tmp_path: Path) -> None:
    # memory:// exists only inside one process: exercise the cross-filesystem branch here
    import fsspec

    from anylaunch.apps.utils.copy_main import copy

    src = tmp_path / "x.txt"
    src.write_text("cross")
    copy(str(src), "memory://bucket/dir/x.txt", bufsize=2)
    with fsspec.open("memory://bucket/dir/x.txt", "rb") as f:
        assert f.read() == b"cross"
    copy("memory://bucket/dir/x.txt", str(tmp_path / "back" / "x.txt"))
    assert (tmp_path / "back" / "x.txt").read_text() == "cross"


# --- booth -------------------------------------------------------------------------------------


def booth_value(x1: float, x2: float) -> float:
    return (x1 + 2 * x2 - 7) ** 2 + (2 * x1 + x2 - 5) ** 2


@settings(max_examples=5, deadline=None)
@given(
    x1=st.floats(min_value=-100, max_value=100, allow_nan=False),
    x2=st.floats(min_value=-100, max_value=100, allow_nan=False),
    trial_idx=st.integers(min_value=0, max_value=1000),
)
def test_booth_writes_the_function_value(
    tmp_path_factory: pytest.TempPathFactory, x1: float, x2: float, trial_idx: int
) -> None:
    base = tmp_path_factory.mktemp("booth") / "tracker"
    result = run_role(utils.booth(x1, x2, trial_idx, tracker_base=str(base)).roles[0].args)
    assert result.returncode == 0, result.stderr
    recorded = json.loads((base / str(trial_idx)).read_text())
    assert recorded == {"booth_eval": pytest.approx(booth_value(x1, x2))}


def test_booth_minimum_is_zero(tmp_path: Path) -> None:
    result = run_role(utils.booth(1, 3, tracker_base=str(tmp_path)).roles[0].args)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "0").read_text()) == {"booth_eval": 0.0}
    assert "booth(1.0, 3.0) = 0.0" in result.stdout


def test_booth_negative_values_in_scientific_notation(tmp_path: Path) -> None:
    # argparse reads "--x2 -4e-05" as two options; the component must not produce that
    result = run_role(utils.booth(-1e-05, -4.2e-136, 3, tracker_base=str(tmp_path)).roles[0].args)
    assert result.returncode == 0, result.stderr
    recorded = json.loads((tmp_path / "3").read_text())["booth_eval"]
    assert recorded == pytest.approx(booth_value(-1e-05, -4.2e-136))


def test_booth_rejects_bad_numbers(tmp_path: Path) -> None:
    result = run_role(["-m", "anylaunch.apps.utils.booth_main", "--x1", "one", "--x2", "3"])
    assert result.returncode == 2
    assert "--x1" in result.stderr


# --- serve -------------------------------------------------------------------------------------


class FakeTorchserve:
    """A management API that, like torchserve, downloads the model from the given url."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                parsed = urllib.parse.urlparse(self.path)
                params = dict(urllib.parse.parse_qsl(parsed.query))
                with urllib.request.urlopen(params["url"], timeout=10) as r:
                    model = r.read()
                fake.requests.append((parsed.path, params, model))
                body = json.dumps({"status": "registered" if fake.status == 200 else "boom"})
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeTorchserve":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def model(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "model.mar"
    path.write_bytes(b"PK\x03\x04 not really a model archive" * 50)
    yield path


def serve_args(model: Path, api: str, **kwargs: object) -> list[str]:
    args = serve.torchserve(str(model), api, **kwargs).roles[0].args  # type: ignore[arg-type]
    # the role's fixed port could be taken on a test machine: let the OS pick one
    return ["--port=0" if a.startswith("--port=") else a for a in args]


def test_serve_uploads_the_model_to_torchserve(model: Path) -> None:
    with FakeTorchserve() as ts:
        args = serve_args(model, ts.url, params={"model_name": "resnet", "initial_workers": "2"})
        result = run_role(args)
    assert result.returncode == 0, result.stderr
    ((path, params, downloaded),) = ts.requests
    assert path == "/models"
    assert downloaded == model.read_bytes()
    assert params["model_name"] == "resnet"
    assert params["initial_workers"] == "2"
    assert params["url"].startswith("http://127.0.0.1:")
    assert "registered" in result.stdout


def test_serve_fails_when_torchserve_refuses(model: Path) -> None:
    with FakeTorchserve(status=500) as ts:
        result = run_role(serve_args(model, ts.url))
    assert result.returncode == 1
    assert "HTTP 500" in result.stderr
    assert len(ts.requests) == 1


def test_serve_fails_when_the_model_is_missing(tmp_path: Path) -> None:
    with FakeTorchserve() as ts:
        result = run_role(serve_args(tmp_path / "missing.mar", ts.url))
    assert result.returncode == 1
    assert "cannot download the model" in result.stderr
    assert ts.requests == []


def test_serve_dryrun_does_nothing(model: Path) -> None:
    with FakeTorchserve() as ts:
        result = run_role(serve_args(model, ts.url, dryrun=True))
    assert result.returncode == 0, result.stderr
    assert "dryrun" in result.stdout
    assert ts.requests == []
