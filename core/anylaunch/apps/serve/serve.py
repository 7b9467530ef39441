"""Uploads a model archive to a torchserve instance (the program of ``serve.torchserve``).

torchserve registers a model from a URL, so this program downloads the archive (any fsspec
URL), serves it over HTTP on ``--port`` and asks torchserve's management API to register it
(``POST {management_api}/models?url=...``). It exits once torchserve has answered: 0 if the
model was registered, 1 otherwise. Only the standard library is needed besides fsspec.

.. code:: shell-session

    $ python3 -m anylaunch.apps.serve.serve --model_path s3://bucket/model.mar \\
        --management_api http://torchserve:8081 --model_name resnet --initial_workers 1
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

#: Parameters of torchserve's register-model call that may be passed through
#: (https://pytorch.org/serve/management_api.html#register-a-model).
TORCHSERVE_PARAMS: tuple[str, ...] = (
    "model_name",
    "handler",
    "runtime",
    "batch_size",
    "max_batch_delay",
    "initial_workers",
    "synchronous",
    "response_timeout",
)

#: Default port of the HTTP server torchserve downloads the model from (torchserve itself
#: listens on 8080-8082, so this must differ when both run on one host).
DEFAULT_PORT = 8222


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parses the command line.

    >>> args = parse_args(["--model_path", "m.mar", "--management_api", "http://ts:8081"])
    >>> (args.port, args.timeout, args.model_name, args.dryrun)
    (8222, 60, None, False)

    Args:
        argv: the arguments (without the program name)

    Returns:
        the parsed arguments
    """
    parser = argparse.ArgumentParser(description="uploads the provided model to torchserve")
    parser.add_argument("--model_path", required=True, help="fsspec URL of the model archive")
    parser.add_argument(
        "--management_api",
        required=True,
        help="root URL of torchserve's management API, e.g. http://localhost:8081",
    )
    parser.add_argument(
        "--timeout", type=int, default=60, help="timeout (s) of the request to torchserve"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help="port the model is served on while torchserve loads it (0: any free port); "
        "torchserve must be able to reach it",
    )
    parser.add_argument(
        "--dryrun", action="store_true", help="print what would be done, do nothing"
    )
    for param in TORCHSERVE_PARAMS:
        parser.add_argument(f"--{param}", help=f"torchserve register-model parameter {param}")
    args = parser.parse_args(argv)
    if urllib.parse.urlparse(args.management_api).scheme not in ("http", "https"):
        parser.error(f"--management_api {args.management_api!r} is not an http(s) URL")
    return args


def routable_ip_to(url: str) -> str:
    """The local IP address that packets to ``url``'s host leave from (no packet is sent).

    >>> routable_ip_to("http://127.0.0.1:8081")
    '127.0.0.1'

    Args:
        url: an http(s) URL

    Returns:
        the local address as a string
    """
    parsed = urllib.parse.urlparse(url)
    host = parsed.hostname or "localhost"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        # connecting a UDP socket only picks a route; nothing goes on the wire
        s.connect((host, parsed.port or 80))
        return str(s.getsockname()[0])


def _register_params(args: argparse.Namespace, model_url: str) -> dict[str, str]:
    params = {"url": model_url}
    for param in TORCHSERVE_PARAMS:
        value = getattr(args, param)
        if value is not None:
            params[param] = value
    return params


def register(management_api: str, params: dict[str, str], timeout: float) -> str:
    """POSTs ``{management_api}/models?{params}``; returns the response body.

    Args:
        management_api: root URL of the management API
        params: the query parameters (``url`` and the torchserve parameters)
        timeout: request timeout in seconds

    Returns:
        the response body

    Raises:
        urllib.error.HTTPError: torchserve answered with an error status.
        urllib.error.URLError: torchserve cannot be reached.
    """
    url = f"{management_api.rstrip('/')}/models?{urllib.parse.urlencode(params)}"
    request = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return str(response.read().decode("utf-8", errors="replace"))


def main(argv: list[str] | None = None) -> None:
    """Runs the program: download, serve, register, shut down.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``)
    """
    args = parse_args(sys.argv[1:] if argv is None else argv)
    model_file = f"{args.model_name or 'model'}_{os.urandom(8).hex()}.mar"
    if args.dryrun:
        params = _register_params(args, f"http://<this-host>:{args.port}/{model_file}")
        print(f"dryrun: would download {args.model_path}, serve it on port {args.port} and")
        print(f"dryrun: POST {args.management_api.rstrip('/')}/models {json.dumps(params)}")
        return

    import fsspec  # imported here: --help and --dryrun must not need it

    with tempfile.TemporaryDirectory() as tmpdir:
        local_path = os.path.join(tmpdir, model_file)
        print(f"downloading model from {args.model_path} to {local_path}...", flush=True)
        try:
            fs, path = fsspec.core.url_to_fs(args.model_path)
            fs.get(path, local_path)
        except (OSError, ValueError) as e:
            raise SystemExit(f"cannot download the model: {type(e).__name__}: {e}") from e

        handler = partial(SimpleHTTPRequestHandler, directory=tmpdir)
        server = ThreadingHTTPServer(("", args.port), handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            ip = routable_ip_to(args.management_api)
            host = f"[{ip}]" if ":" in ip else ip
            model_url = f"http://{host}:{server.server_port}/{model_file}"
            print(f"serving the model at {model_url}", flush=True)
            params = _register_params(args, model_url)
            print(f"POST {args.management_api.rstrip('/')}/models {json.dumps(params)}", flush=True)
            try:
                print(register(args.management_api, params, args.timeout), flush=True)
            except urllib.error.HTTPError as e:
                body = e.read().decode("utf-8", errors="replace")
                raise SystemExit(f"torchserve refused the model: HTTP {e.code}: {body}") from e
            except (urllib.error.URLError, OSError) as e:
                raise SystemExit(f"cannot reach torchserve at {args.management_api}: {e}") from e
        finally:
            print("shutting down...", flush=True)
            server.shutdown()
            server.server_close()
            thread.join()


if __name__ == "__main__":
    main()
