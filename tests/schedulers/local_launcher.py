"""Test helper: schedules a local_cwd app, prints its id, then waits to be killed.

usage: local_launcher.py TICKS  (the app prints "tick 0".."tick TICKS-1", one per 0.1 s)
The state dir comes from $ANYLAUNCH_LOCAL_STATE_DIR.
"""

import sys
import time


def main() -> None:
    from anylaunch.schedulers.local_scheduler import create_scheduler
    from anylaunch.specs import AppDef, Role

    ticks = int(sys.argv[1])
    code = "import sys, time\nfor i in range(int(sys.argv[1])):\n    print('tick', i)\n    time.sleep(0.1)\n"
    app = AppDef(
        "launched",
        roles=[Role("w", image=".", entrypoint=sys.executable, args=["-c", code, str(ticks)])],
    )
    scheduler = create_scheduler("launcher")
    app_id = scheduler.submit(app, {})
    print(app_id, flush=True)
    time.sleep(600)  # the test kills this process with SIGKILL


if __name__ == "__main__":
    main()
