"""Reading the logs of a ``local_docker`` replica from the engine: a window of lines, or a
follow that survives reconnects and restarts until the app is over."""

from __future__ import annotations

import codecs
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from anylaunch.schedulers.api import split_lines, split_lines_iterator
from anylaunch.schedulers.docker.request import _POLL_MAX_S, BACKEND, _parse_time
from anylaunch.sdk import require_sdk

__all__ = ["follow_container_log", "read_container_log"]

log: logging.Logger = logging.getLogger(__name__)


def read_container_log(
    client: Any,
    container_id: str,
    want: dict[str, bool],
    since: float | None,
    until: float | None,
) -> Iterable[str]:
    """A container's log lines (``want``: which of stdout/stderr) between two times."""
    docker = require_sdk("docker", extra="docker", scheduler=BACKEND)
    kwargs: dict[str, Any] = dict(want)
    if since is not None and since > 0:
        kwargs["since"] = float(since)
    if until is not None:
        if until <= 0:
            return []
        kwargs["until"] = float(until)
    try:
        raw = client.api.logs(container_id, **kwargs)
    except docker.errors.NotFound:
        return []
    return split_lines(raw.decode("utf-8", "replace"))


def follow_container_log(
    client: Any,
    container_id: str,
    want: dict[str, bool],
    since: float | None,
    until: float | None,
    app_over: Callable[[], bool],
) -> Iterator[str]:
    """Follows a replica's log across reconnects and restarts until the app is over.

    Lines come with the engine's timestamps, so a reconnect resumes after the last line
    seen without repeating it.
    """
    docker = require_sdk("docker", extra="docker", scheduler=BACKEND)
    import requests
    import urllib3

    transient = (OSError, requests.exceptions.RequestException, urllib3.exceptions.HTTPError)
    last: tuple[str, float] | None = None  # (timestamp text, seconds) of the last line
    delay = 0.05
    while True:
        start = since if last is None else last[1] - 1e-6
        kwargs: dict[str, Any] = dict(want, stream=True, follow=True, timestamps=True)
        if start is not None and start > 0:
            kwargs["since"] = start
        if until is not None and until > 0:
            kwargs["until"] = float(until)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        try:
            chunks = client.api.logs(container_id, **kwargs)
            for line in split_lines_iterator(decoder.decode(chunk) for chunk in chunks):
                stamp, _, text = line.partition(" ")
                seconds = _parse_time(stamp)
                if last is not None and (seconds, stamp) <= (last[1], last[0]):
                    continue  # already yielded before a reconnect
                if until is not None and seconds > until:
                    return
                last = (stamp, seconds)
                delay = 0.05
                yield text
        except docker.errors.NotFound:
            return  # the app was deleted
        except transient as e:
            log.debug("log stream of %s broke (%s); reconnecting", container_id, e)
        if until is not None and time.time() > until + 1.0:
            return
        try:
            attrs = client.api.inspect_container(container_id)
        except docker.errors.NotFound:
            return
        running = (attrs.get("State") or {}).get("Status") in ("running", "restarting")
        if not running and app_over():
            return  # the stream ended after the container stopped: all lines are in
        time.sleep(delay)
        delay = min(delay * 2, _POLL_MAX_S)
