"""Apps that fail on their first launch only (a marker file in ``$AL_TEST_MARKER`` remembers
the first launch), for the engines' retry tests."""

#: Python source; ``{first}`` is what the first launch does (e.g. ``sys.exit(3)``).
FAILS_ONCE = """
import os, signal, sys
marker = os.environ["AL_TEST_MARKER"]
first = not os.path.exists(marker)
open(marker, "a").close()
if first:
    {first}
print("second attempt works", flush=True)
"""

#: (how the first launch fails, its failure category, launches when only infrastructure
#: failures are retried)
FIRST_FAILURES = [
    ("sys.exit(3)", "application", 1),  # the app's own failure: no retry
    ("os.kill(os.getpid(), signal.SIGKILL)", "infrastructure", 2),  # killed: retried
]
FIRST_FAILURE_IDS = ["exit-code", "killed"]
