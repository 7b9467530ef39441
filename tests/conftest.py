"""Suite-wide settings."""

import os
import signal
from collections.abc import Iterator

import pytest
from hypothesis import settings

# Each test's local_cwd state dir gets its own warm fork-server; let idle ones exit soon after
# the suite instead of lingering for the default 60 s.
os.environ.setdefault("ANYLAUNCH_LOCAL_FORKSERVER_IDLE_S", "5")

# A suite launched as a background job (a non-interactive shell, `nohup ... &`, some CI
# runners) starts with SIGINT ignored, and every process it spawns inherits that: a Python
# child then installs no KeyboardInterrupt handler, and the tests that send Ctrl-C to a child
# would see it ignored. Restore the default here: a caught signal is reset to SIG_DFL in
# children at exec, so they get what an interactive terminal gives them.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Property tests: in CI the examples are derived from each test (the same every run), so a
# landing is never decided by a random draw; locally every run explores new examples.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _close_the_local_change_feeds_of_the_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Closes the local_cwd change feeds of state roots inside the test's own tmp_path once it
    ended. A process keeps one feed (one inotify instance) per state root for its lifetime:
    a service has one root, but this suite makes a root per test, and the kernel allows 128
    inotify instances per user."""
    yield
    tmp_path = request.node.funcargs.get("tmp_path") if hasattr(request.node, "funcargs") else None
    if tmp_path is None:
        return
    from anylaunch.schedulers.local import changes

    inside = str(tmp_path) + os.sep
    for root, feed in list(changes._feeds.items()):
        if root.startswith(inside):
            feed.close()
