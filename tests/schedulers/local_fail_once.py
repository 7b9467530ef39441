"""Test helper run as a replica: records each start, and fails once by writing a marker file.

usage: local_fail_once.py STARTS_DIR NAME MARKER MODE [EXPECTED_STARTS]

Every start creates a new file ``STARTS_DIR/NAME-<random>``. Then, while MARKER does not exist:

- MODE ``fail``: waits until STARTS_DIR holds EXPECTED_STARTS files (every replica runs),
  creates MARKER and exits 1;
- MODE ``wait``: waits for MARKER, then keeps running 0.5 s (so that a restart of its role or
  app finds it running) and exits 0.

Once MARKER exists, every run exits 0 at once.
"""

import os
import sys
import time
import uuid


def wait_for(predicate, timeout=20.0):  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while not predicate() and time.monotonic() < end:
        time.sleep(0.005)


def main() -> int:
    starts, name, marker, mode = sys.argv[1:5]
    open(os.path.join(starts, f"{name}-{uuid.uuid4().hex}"), "w").close()
    print(f"start {name}", flush=True)
    if os.path.exists(marker):
        return 0
    if mode == "fail":
        expected = int(sys.argv[5])
        wait_for(lambda: len(os.listdir(starts)) >= expected)
        open(marker, "w").close()
        print(f"{name} failing on purpose", file=sys.stderr, flush=True)
        return 1
    wait_for(lambda: os.path.exists(marker))
    time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
