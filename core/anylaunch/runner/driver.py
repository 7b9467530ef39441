"""The synchronous driver of :class:`anylaunch.runner.watch.WatchPolicy`: polls an app through a
Runner, sleeping as the policy says, until the policy decides (or the app has started).

``Runner.wait`` and the CLI use it; engines with their own event loops or loggers drive the
policy themselves in the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from anylaunch.runner.watch import Decision, Poll, PollError, WatchPolicy

if TYPE_CHECKING:
    from anylaunch.runner.api import Runner
    from anylaunch.specs.api import AppStatus

__all__ = ["drive"]


def drive(
    runner: Runner,
    app_handle: str,
    policy: WatchPolicy,
    *,
    until_started: bool = False,
    on_poll: Callable[[AppStatus | None], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> Decision:
    """Polls ``app_handle`` until ``policy`` makes a final decision and returns it; with
    ``until_started``, returns the :class:`Poll` decision as soon as the app has started.

    A failed status call is handed to the policy (it decides whether to retry); ``on_poll``
    sees every status observed. Nothing is cancelled here: acting on the decision (cancel,
    raise) is the caller's.

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
        sleep(decision.after)
