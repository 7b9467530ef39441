"""Suite-wide settings."""

import os

# Each test's local_cwd state dir gets its own warm fork-server; let idle ones exit soon after
# the suite instead of lingering for the default 60 s.
os.environ.setdefault("ANYLAUNCH_LOCAL_FORKSERVER_IDLE_S", "5")
