"""The local_docker change feed against a real Docker engine: a container's end wakes its
app's waiters (and only them), the feed is shared per engine, survives a broken stream,
stops on close without spinning, and ``Runner.wait`` wakes on it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from typing import Any

import pytest

from anylaunch.runner.wake import scheduler_change_feed
from anylaunch.schedulers.docker import events as docker_events
from anylaunch.schedulers.docker.events import DockerEventFeed
from anylaunch.schedulers.docker.request import DockerEngineUnavailableError
from anylaunch.schedulers.docker_scheduler import DockerScheduler
from anylaunch.specs import AppDef, AppState, Role
from tests.runner.test_wake import thread_cpu_seconds
from tests.schedulers.docker.docker_engine import connect, docker_host

WAIT_S = 60.0  # a safety net against a hung app, not a measurement


def sh(script: str) -> AppDef:
    return AppDef(
        "events", [Role("main", image="busybox:latest", entrypoint="sh", args=["-c", script])]
    )


def dryrun(sched: DockerScheduler, script: str) -> Any:
    return sched.submit_dryrun(sh(script), {})


def state(sched: DockerScheduler, app_id: str) -> AppState:
    desc = sched.describe(app_id)
    assert desc is not None, f"app {app_id} vanished"
    return desc.state


def until_running(sched: DockerScheduler, app_id: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while state(sched, app_id) != AppState.RUNNING:
        assert time.monotonic() < deadline, f"app {app_id} never ran"
        time.sleep(0.05)


def drain(feed: DockerEventFeed, app_ids: list[str]) -> None:
    """Takes every pending change of ``app_ids`` until they stay quiet for a second."""
    deadline = time.monotonic() + WAIT_S
    while feed.wait(app_ids, 1.0):
        assert time.monotonic() < deadline, f"{app_ids} never went quiet"


def finished_at(client: Any, app_id: str) -> float:
    """When the app's (one) replica container exited, by the engine's clock."""
    (summary,) = [
        c
        for c in client.api.containers(all=True, filters={"label": f"anylaunch.app-id={app_id}"})
        if c["Labels"].get("anylaunch.kind") == "replica"
    ]
    raw = client.api.inspect_container(summary["Id"])["State"]["FinishedAt"]
    seconds, _, fraction = raw.rstrip("Z").partition(".")
    stamp = datetime.fromisoformat(seconds).replace(tzinfo=timezone.utc).timestamp()
    return stamp + float(f"0.{fraction or '0'}")


def connected(feed: DockerEventFeed, connections: int = 1) -> DockerEventFeed:
    """``feed`` once its stream has opened ``connections`` times (each opening wakes every
    waiter once: a test that counts wake-ups drains them after it)."""
    deadline = time.monotonic() + WAIT_S
    while feed.connections < connections:
        assert time.monotonic() < deadline, "the event stream never opened"
        time.sleep(0.05)
    return feed


def own_feed() -> DockerEventFeed:
    """A feed of the test engine that no scheduler shares (the test may break it)."""
    client = connect()
    assert client is not None
    return connected(DockerEventFeed(client))


def test_a_container_that_exits_wakes_its_waiter_at_once(
    scheduler: DockerScheduler, docker_client: Any, busybox_image: str
) -> None:
    feed = scheduler.change_feed()
    app_id = scheduler.schedule(dryrun(scheduler, "sleep 1"))
    woken_at = 0.0
    while not state(scheduler, app_id).is_terminal():
        # every wait ends by a change, never by running out its minute
        assert feed.wait([app_id], WAIT_S) is True
        woken_at = time.time()
    assert state(scheduler, app_id) == AppState.SUCCEEDED
    latency = woken_at - finished_at(docker_client, app_id)
    print(f"woken {latency:.3f} s after the container exited")


def test_events_of_another_app_do_not_wake_a_waiter(
    scheduler: DockerScheduler, busybox_image: str
) -> None:
    feed = connected(scheduler.change_feed())
    quiet = scheduler.schedule(dryrun(scheduler, "sleep 300"))
    until_running(scheduler, quiet)
    other = dryrun(scheduler, "exit 3")
    other_id = other.request.app_id
    drain(feed, [quiet, other_id])
    streams = feed.connections
    scheduler.schedule(other)
    while not state(scheduler, other_id).is_terminal():
        assert feed.wait([other_id], WAIT_S) is True
    assert state(scheduler, other_id) == AppState.FAILED
    drain(feed, [other_id])  # every event of the other app has arrived by now
    assert feed.connections == streams, "the stream broke: every waiter was woken"
    assert feed.peek([quiet]) is False
    assert state(scheduler, quiet) == AppState.RUNNING


def test_schedulers_of_one_engine_share_one_feed_until_the_last_closes(
    docker_client: Any,
) -> None:
    first = DockerScheduler("one", docker_host=docker_host())
    second = DockerScheduler("two", docker_host=docker_host())
    feed = first.change_feed()
    assert second.change_feed() is feed
    assert first.change_feed() is feed  # asking again takes no second share
    # other tests' schedulers of this engine may still hold it: count shares, not absolutes
    users = docker_events._SHARED.users(feed)
    assert users >= 2
    first.close()
    assert docker_events._SHARED.users(feed) == users - 1
    assert feed.usable and feed.thread.is_alive()
    second.close()
    if users == 2:  # these two were its only users: the last one closed it
        feed.thread.join(10.0)
        assert not feed.usable and not feed.thread.is_alive()
        renewed = second.change_feed()  # a closed scheduler starts a new feed when asked
        assert renewed is not feed and renewed.usable
        second.close()
    else:
        assert docker_events._SHARED.users(feed) == users - 2 and feed.usable


def test_a_feed_closed_under_a_scheduler_is_replaced(docker_client: Any) -> None:
    sched = DockerScheduler("replaced", docker_host=docker_host())
    feed = sched.change_feed()
    feed.close()
    feed.close()  # idempotent
    renewed = sched.change_feed()
    assert renewed is not feed and renewed.usable
    sched.close()
    assert not renewed.usable


def test_close_ends_the_thread_which_never_spins(docker_client: Any) -> None:
    feed = own_feed()
    try:
        before = thread_cpu_seconds(feed.thread)
        time.sleep(2.0)
        idle = thread_cpu_seconds(feed.thread) - before
        print(f"the event thread used {idle:.3f} CPU s in 2 s")
        assert idle < 0.5, f"the event thread used {idle:.2f} CPU s while idle"
    finally:
        feed.close()
    feed.thread.join(10.0)
    assert not feed.thread.is_alive()
    assert feed.wait(["any-app"], 0.0) is True  # closing woke every waiter, once


def test_a_broken_stream_wakes_waiters_and_reconnects_without_losing_events(
    scheduler: DockerScheduler, busybox_image: str
) -> None:
    feed = own_feed()
    try:
        app_id = scheduler.schedule(dryrun(scheduler, "sleep 300"))
        until_running(scheduler, app_id)
        drain(feed, [app_id])
        feed.interrupt()
        assert feed.wait([app_id], WAIT_S) is True  # the waiter re-polls at once
        drain(connected(feed, 2), [app_id])
        assert feed.peek([app_id]) is False
        scheduler.cancel(app_id)  # its containers stop: events on the new stream
        assert feed.wait([app_id], WAIT_S) is True
        assert feed.connections == 2  # delivered by the stream, not by another reconnection
        assert state(scheduler, app_id) == AppState.CANCELLED
    finally:
        feed.close()


def test_runner_wait_wakes_on_the_feed(runner: Any, docker_client: Any, busybox_image: str) -> None:
    handle = runner.run(sh("sleep 1"), "local_docker")
    results: list[Any] = []
    returned_at: list[float] = []

    def wait() -> None:
        results.append(runner.wait(handle, wait_interval=600))
        returned_at.append(time.time())

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    waiter.join(WAIT_S)
    assert not waiter.is_alive(), "Runner.wait did not return: nothing woke it"
    assert results[0] is not None and results[0].state == AppState.SUCCEEDED
    feed = runner._scheduler("local_docker")._feed  # made by the wait, not by this test
    assert isinstance(feed, DockerEventFeed) and feed.usable
    latency = returned_at[0] - finished_at(docker_client, handle.rsplit("/", 1)[1])
    print(f"Runner.wait returned {latency:.3f} s after the container exited")


def test_an_unreachable_engine_has_no_feed_and_drivers_poll() -> None:
    from anylaunch.runner import get_runner

    nowhere = "unix:///nonexistent/docker.sock"
    sched = DockerScheduler("offline", docker_host=nowhere)
    with pytest.raises(DockerEngineUnavailableError) as err:
        sched.change_feed()
    assert nowhere in str(err.value)
    with get_runner("offline", docker_host=nowhere) as runner:
        assert scheduler_change_feed(runner, "local_docker") is None


# --- the stream's life without an engine: a scripted stand-in for the docker SDK client --------


class ScriptedStream:
    """What ``APIClient.events`` returns: an iterator of events with a ``close``."""

    def __init__(self, events: list[Mapping[str, Any]]) -> None:
        self._events: Iterator[Mapping[str, Any]] = iter(events)
        self.closed = False

    def __iter__(self) -> ScriptedStream:
        return self

    def __next__(self) -> Mapping[str, Any]:
        if self.closed:
            raise StopIteration
        return next(self._events)

    def close(self) -> None:
        self.closed = True


class ScriptedEngine:
    """A client whose n-th events() call streams the n-th script, then ends (later calls
    stream nothing and end at once)."""

    def __init__(self, *scripts: list[Mapping[str, Any]]) -> None:
        self.api = self
        self.scripts = list(scripts)
        self.calls: list[dict[str, Any]] = []

    def events(self, **kwargs: Any) -> ScriptedStream:
        self.calls.append(kwargs)
        return ScriptedStream(self.scripts.pop(0) if self.scripts else [])

    def close(self) -> None:
        pass


def event(app_id: str, nanos: int) -> dict[str, Any]:
    return {
        "Type": "container",
        "Action": "die",
        "timeNano": nanos,
        "Actor": {"Attributes": {"anylaunch.app-id": app_id}},
    }


def test_a_reconnection_replays_from_the_last_event_seen() -> None:
    engine = ScriptedEngine([event("app-1", 1_700_000_000_000_000_042)])
    feed = DockerEventFeed(engine, min_backoff=0.05)
    try:
        assert feed.wait(["app-1"], WAIT_S) is True
        deadline = time.monotonic() + WAIT_S
        while len(engine.calls) < 2:
            assert time.monotonic() < deadline, "the feed never reconnected"
            time.sleep(0.01)
    finally:
        feed.close()
    first, second = engine.calls[:2]
    assert first["since"] is None
    assert second["since"] == "1700000000.000000042"
    assert first["filters"]["label"] == ["anylaunch.app-id"]
    assert first["filters"]["type"] == ["container"] and "die" in first["filters"]["event"]


def test_a_stream_that_keeps_ending_is_retried_with_backoff_not_in_a_loop() -> None:
    engine = ScriptedEngine()  # every stream ends at once
    feed = DockerEventFeed(engine)
    try:
        time.sleep(0.2)
        before = thread_cpu_seconds(feed.thread)
        time.sleep(2.0)
        used = thread_cpu_seconds(feed.thread) - before
        tries = len(engine.calls)
    finally:
        feed.close()
    assert used < 0.5, f"the event thread used {used:.2f} CPU s"
    # backoff 0.5 s doubling: a handful of tries, where a loop would make thousands
    assert 1 <= tries <= 10, tries
    assert not feed.thread.is_alive()
