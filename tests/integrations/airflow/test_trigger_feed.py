"""AnylaunchAppTrigger with a scheduler change feed, and ending a task from the triggerer."""

import asyncio
import sys
import threading
from types import SimpleNamespace
from typing import Any, Dict, Optional

from anylaunch.runner import get_runner
from anylaunch.runner.wake import AsyncChangeWaiter
from anylaunch.schedulers.common.changes import ManualChangeFeed
from anylaunch.specs import AppDef, Role
from anylaunch.specs.api import parse_app_handle


def launch(script: str, env: Optional[Dict[str, str]] = None) -> str:
    app = AppDef(
        name="feed",
        roles=[
            Role(
                name="job",
                image=".",
                entrypoint=sys.executable,
                args=["-c", script],
                env=dict(env or {}),
            )
        ],
    )
    with get_runner() as runner:
        return runner.run(app, "local_cwd")


def run_fed_by_hand(trigger: Any, runner: Any) -> Dict[str, Any]:
    """Runs ``trigger`` in an event loop whose poller (using ``runner``) is woken by a
    :class:`ManualChangeFeed` that a thread notifies once the app has ended; returns the
    trigger's event payload."""
    from airflow_anylaunch import triggers
    from airflow_anylaunch.triggers import _StatusPoller

    handle = trigger.app_handle
    backend, session, app_id = parse_app_handle(handle)
    feed = ManualChangeFeed()

    def notify_when_over() -> None:
        with get_runner() as watcher:
            while True:
                status = watcher.status(handle)
                if status is None or status.is_terminal():
                    feed.notify(app_id)
                    return
                feed.wait([app_id], 0.2)

    async def main() -> Any:
        loop = asyncio.get_running_loop()
        poller = _StatusPoller(runner, feed)
        made: asyncio.Future[Any] = loop.create_future()
        made.set_result(poller)
        triggers._POLLERS.setdefault(loop, {})[(backend, session)] = made  # type: ignore[assignment]
        threading.Thread(target=notify_when_over, daemon=True).start()
        try:
            # a safety net only: the trigger ends once the feed wakes it
            return await asyncio.wait_for(trigger.run().__anext__(), 600)
        finally:
            assert poller.waiter is not None
            poller.waiter.close()

    return dict(asyncio.run(main()).payload)


def test_waiter_wakes_only_the_app_that_changed_and_keeps_early_changes() -> None:
    feed = ManualChangeFeed()
    waiter = AsyncChangeWaiter(feed, tick=0.01)

    async def main() -> tuple[bool, bool, bool]:
        a = asyncio.ensure_future(waiter.wait("ns:a", 120.0))
        b = asyncio.ensure_future(waiter.wait("ns:b", 0.5))
        await asyncio.sleep(0.05)
        feed.notify("ns:a")  # from this thread: the waiter's thread carries it over
        woke_a, woke_b = await asyncio.gather(a, b)
        # a change made while nobody waited is not lost: the next wait returns at once
        feed.notify("ns:c")
        woke_c = await waiter.wait("ns:c", 120.0)
        return woke_a, woke_b, woke_c

    try:
        assert asyncio.run(main()) == (True, False, True)
    finally:
        waiter.close()


def test_trigger_with_a_feed_ends_once_notified_and_keeps_lines_exactly_once(
    state_dir: Any,
) -> None:
    """A long poll interval: the trigger only ends early because the feed woke it; its log
    lines (read at the final drain here) come out once each, in order."""
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    handle = launch(
        "import time\nfor i in range(5):\n    print('line', i, flush=True)\ntime.sleep(2)"
    )
    # without the feed the trigger would sleep up to an hour
    with get_runner() as runner:
        event = run_fed_by_hand(AnylaunchAppTrigger(handle, poll_interval=3600.0), runner)
    assert event["status"] == "success"
    assert event["log_positions"] == {"job/0": 5}
    assert event["log_tail"] == [f"job/0 line {i}" for i in range(5)]


def test_a_succeeded_app_ends_its_task_in_the_triggerer_with_its_status_xcom(
    state_dir: Any,
) -> None:
    from airflow.triggers.base import TaskSuccessEvent, TriggerEvent

    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    ok = launch("print('done')")
    trigger = AnylaunchAppTrigger(ok, poll_interval=0.2)
    # in a triggerer, a trigger has its task instance (here without one to store XComs on)
    trigger.task_instance = SimpleNamespace(task_id="app", dag_id="d", run_id="r", map_index=-1)
    event = asyncio.run(asyncio.wait_for(trigger.run().__anext__(), 120))
    assert isinstance(event, TaskSuccessEvent)
    assert event.xcoms is not None
    value = event.xcoms["return_value"]
    assert isinstance(value, dict)
    assert value["state"] == "SUCCEEDED" and value["app_handle"] == ok

    # failures go back to the operator (one error path); so does everything when disabled
    failed = launch("import sys; sys.exit(3)")
    trigger = AnylaunchAppTrigger(failed, poll_interval=0.2)
    trigger.task_instance = SimpleNamespace(task_id="app", dag_id="d", run_id="r", map_index=-1)
    event = asyncio.run(asyncio.wait_for(trigger.run().__anext__(), 120))
    assert not isinstance(event, TaskSuccessEvent) and isinstance(event, TriggerEvent)
    assert event.payload["status"] == "failed"

    trigger = AnylaunchAppTrigger(ok, poll_interval=0.2, end_from_trigger=False)
    trigger.task_instance = SimpleNamespace(task_id="app", dag_id="d", run_id="r", map_index=-1)
    event = asyncio.run(asyncio.wait_for(trigger.run().__anext__(), 120))
    assert not isinstance(event, TaskSuccessEvent) and event.payload["status"] == "success"


def test_a_trigger_woken_by_its_feed_polls_a_running_app_only_to_resync(
    state_dir: Any,
) -> None:
    """With a feed, the trigger does not poll every poll interval (0.2 s here, over a 3 s
    run: ~15 polls) but only to resync (core's FEED_RESYNC_S), and still ends as soon as the
    feed says the app changed."""
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    handle = launch("import time\ntime.sleep(3)")
    polls = []
    with get_runner() as runner:
        status_many = runner.status_many

        def counting(handles: Any) -> Any:
            polls.append(len(handles))
            return status_many(handles)

        runner.status_many = counting  # type: ignore[method-assign]
        trigger = AnylaunchAppTrigger(handle, poll_interval=0.2, stream_logs=False)
        event = run_fed_by_hand(trigger, runner)
    assert event["status"] == "success"
    # the first polls (until the app runs, backing off from 0.1 s), then the one the feed woke
    assert 2 <= len(polls) <= 5, polls
