"""Copies one file between two fsspec locations (the program of ``utils.copy``).

.. code:: shell-session

    $ python3 -m anylaunch.apps.utils.copy_main --src s3://bucket/in.txt --dst /tmp/out.txt

Missing parent directories of ``--dst`` are created. Directories are not copied.
"""

from __future__ import annotations

import argparse
import contextlib
import posixpath
import shutil
import sys


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parses the command line.

    >>> parse_args(["--src", "a.txt", "--dst", "b.txt"]).bufsize
    65536

    Args:
        argv: the arguments (without the program name)

    Returns:
        the parsed arguments
    """
    parser = argparse.ArgumentParser(description="copies a file between fsspec locations")
    parser.add_argument("--src", required=True, help="fsspec location of the file to read from")
    parser.add_argument("--dst", required=True, help="fsspec location to copy the file to")
    parser.add_argument(
        "--bufsize", type=int, default=64 * 1024, help="buffer size in bytes (across filesystems)"
    )
    return parser.parse_args(argv)


def copy(src: str, dst: str, bufsize: int = 64 * 1024) -> None:
    """Copies the file at ``src`` to ``dst`` (fsspec URLs or local paths).

    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = pathlib.Path(d, "a.txt").write_text("hi")
    ...     copy(f"{d}/a.txt", f"file://{d}/sub/b.txt")
    ...     pathlib.Path(d, "sub", "b.txt").read_text()
    'hi'

    Args:
        src: where to read the file from
        dst: where to write it (missing parent directories are created)
        bufsize: buffer size when the two locations are on different filesystems

    Raises:
        FileNotFoundError: ``src`` is not an existing file.
    """
    import fsspec  # imported here: the CLI help must not need it

    src_fs, src_path = fsspec.core.url_to_fs(src)
    dst_fs, dst_path = fsspec.core.url_to_fs(dst)
    if not src_fs.isfile(src_path):
        raise FileNotFoundError(f"--src {src!r} is not an existing file")
    parent = posixpath.dirname(dst_path.rstrip("/"))
    if parent:
        # some filesystems (e.g. memory://) raise FileExistsError despite exist_ok
        with contextlib.suppress(FileExistsError):
            dst_fs.makedirs(parent, exist_ok=True)
    if src_fs == dst_fs:
        src_fs.copy(src_path, dst_path)
    else:
        with src_fs.open(src_path, "rb") as fin, dst_fs.open(dst_path, "wb") as fout:
            shutil.copyfileobj(fin, fout, bufsize)


def main(argv: list[str] | None = None) -> None:
    """Runs the program: copies ``--src`` to ``--dst``; exits 1 with a message on failure.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``)
    """
    args = parse_args(sys.argv[1:] if argv is None else argv)
    print(f"copying from {args.src} to {args.dst}", flush=True)
    try:
        copy(args.src, args.dst, args.bufsize)
    except (OSError, ValueError) as e:
        raise SystemExit(f"copy failed: {type(e).__name__}: {e}") from e
    print("done", flush=True)


if __name__ == "__main__":
    main()
