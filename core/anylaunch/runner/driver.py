"""The synchronous driver of :class:`anylaunch.runner.watch.WatchPolicy`: polls an app through a
Runner, sleeping as the policy says, until the policy decides (or the app has started).

``Runner.wait`` and the CLI use it; engines with their own event loops or loggers drive the
policy themselves in the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from anylaunch.runner.wake import change_feed_of, wait_on_feed
from anylaunch.runner.watch import Decision, Done, Poll, PollError, WatchPolicy
from anylaunch.specs.errors import AnylaunchError

if TYPE_CHECKING:
    from anylaunch.runner.api import Runner
    from anylaunch.specs.api import AppStatus

__all__ = ["AppBeingCancelledError", "cancel_and_wait", "drive", "status_for_reattach"]


def drive(
    runner: Runner,
    app_handle: str,
    policy: WatchPolicy,
    *,
    until_started: bool = False,
    on_poll: Callable[[AppStatus | None], None] | None = None,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> Decision:
    """Polls ``app_handle`` until ``policy`` makes a final decision and returns it; with
    ``until_started``, returns the :class:`Poll` decision as soon as the app has started.

    A failed status call is handed to the policy (it decides whether to retry); ``on_poll``
    sees every status observed. Nothing is cancelled here: acting on the decision (cancel,
    raise) is the caller's. Between polls it waits on the scheduler's change feed
    (:func:`~anylaunch.runner.wake.wait_on_feed`: the next poll comes as soon as the app
    changes, or at the policy's resync: ``Poll.wait``) unless a ``sleep`` is given, which is
    then called instead.

    >>> import tempfile
    >>> from anylaunch.runner import get_runner
    >>> from anylaunch.specs import AppDef, Role
    >>> app = AppDef("hello", [Role("greeter", image=".", entrypoint="true")])
    >>> with (
    ...     tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as state,
    ...     get_runner(state_dir=state) as runner,
    ... ):
    ...     handle = runner.run(app, "local_cwd")
    ...     drive(runner, handle, WatchPolicy(0.2, handle=handle)).kind
    'done'
    """
    while True:
        try:
            observation: AppStatus | PollError | None = runner.status(app_handle)
        except Exception as e:  # the policy decides whether it is worth retrying
            observation = PollError(e)
        if on_poll is not None and not isinstance(observation, PollError):
            on_poll(observation)
        decision = policy.observe(observation, clock())
        if not isinstance(decision, Poll):
            return decision
        if until_started and policy.started:
            return decision
        if sleep is None:
            feed, app_id = change_feed_of(runner, app_handle)
            wait_on_feed(feed, app_id, decision.wait(feed=feed is not None))
        else:
            sleep(decision.after)


def cancel_and_wait(
    runner: Runner,
    app_handle: str,
    timeout_s: float,
    *,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> AppStatus | None:
    """Cancels the app unless it already ended, then waits up to ``timeout_s`` for its end;
    returns its last known status (None: the scheduler does not know it, or never answered).

    The one cancel rule of every engine: a failing status call never stops the cancel from
    going out (the status API may be what broke), and waiting afterwards tolerates errors.
    ``sleep`` lets a caller do work (e.g. forward log lines) while it waits.

    Raises:
        Exception: only what the cancel call itself raised (the app may still run)
    """
    try:
        status = runner.status(app_handle)
    except Exception:  # cancel anyway: the control path may still work
        status = None
    else:
        if status is None or status.is_terminal():
            return status
    runner.cancel(app_handle)
    if timeout_s <= 0:
        return status
    ended, last = _wait_for_end(runner, app_handle, timeout_s, sleep, clock)
    return ended if ended is not None else last


def _wait_for_end(
    runner: Runner,
    app_handle: str,
    timeout_s: float,
    sleep: Callable[[float], None] | None,
    clock: Callable[[], float],
) -> tuple[AppStatus | None, AppStatus | None]:
    """Polls until the app ends or ``timeout_s`` passes, tolerating failed status calls:
    (its terminal status or None, the last status seen)."""
    policy = WatchPolicy(
        min(1.0, max(timeout_s, 0.1)),
        run_deadline=clock() + timeout_s,
        cancel_on_timeout=False,
        cancel_on_failure=False,
        max_poll_errors=10_000,  # keep trying until the deadline
        handle=app_handle,
    )
    decision = drive(runner, app_handle, policy, sleep=sleep, clock=clock)
    return (decision.status if isinstance(decision, Done) else None), policy.last_status


class AppBeingCancelledError(AnylaunchError):
    """A retry found the app of an earlier try being cancelled, and it did not stop in time:
    the retry adopts neither it nor launches a second copy next to it."""


def status_for_reattach(
    runner: Runner,
    app_handle: str,
    timeout_s: float = 300.0,
    *,
    ended_by_user: bool = False,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> AppStatus | None:
    """The status a retry decides on when it finds the app of an earlier try: the one reattach
    rule of every engine. An app whose cancel was requested (a durable mark on its backend) is
    never adopted, even while it still runs: this waits up to ``timeout_s`` for its end and
    returns that terminal status, so the retry launches a fresh app.

    ``ended_by_user`` is the engine's word that the try owning the app did not crash but was
    ended by its user (Airflow: the task instance was cleared, or marked failed then cleared,
    since the app was launched). That app is never adopted either: if it still runs, it is
    cancelled here (the same durable cancel request a kill makes) and waited for the same way,
    so the caller launches a fresh app. A cancel the earlier try's own cleanup sends later
    (e.g. a trigger's ``on_kill`` that comes after this try looked) then hits only the old app.
    A cancel request alone cannot decide this: it may come after the retry looked. The caller
    reuses nothing of such an app, not even a success (a rerun the user asked for runs again).

    Raises:
        AppBeingCancelledError: the app is still stopping after ``timeout_s``
        Exception: what the cancel call raised (``ended_by_user`` only)
    """
    from anylaunch.specs.checks import check_type

    check_type("ended_by_user", ended_by_user, bool, "must be True or False", "pass a bool")
    status = runner.status(app_handle)
    if status is None or status.is_terminal():
        return status
    if ended_by_user:
        runner.cancel(app_handle)  # recorded on the app: every other process sees it too
    elif not runner.cancel_requested(app_handle):
        return status
    ended, _ = _wait_for_end(runner, app_handle, timeout_s, sleep, clock)
    if ended is not None:
        return ended
    raise AppBeingCancelledError(
        f"app {app_handle} of an earlier try is being cancelled and has not stopped within "
        f"{timeout_s:g}s; not reattaching to it (nor launching a second copy next to it). "
        "Fix: check why it does not stop (its cancel grace period), then retry"
    )
