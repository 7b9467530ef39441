"""Build an AppDef in Python, run it on local_cwd, wait for it and print its logs.

Run: uv run python examples/core/hello_local.py
"""

import sys

import anylaunch.specs as specs
from anylaunch.runner import get_runner


def main() -> int:
    app = specs.AppDef(
        name="hello",
        roles=[
            specs.Role(
                name="greeter",
                image=".",
                entrypoint=sys.executable,
                args=["-c", "import os; print('hello from replica', os.environ['REPLICA'])"],
                env={"REPLICA": specs.macros.replica_id},
                num_replicas=2,
            )
        ],
    )
    with get_runner() as runner:
        handle = runner.run(app, scheduler="local_cwd")
        print(f"launched {handle}")
        status = runner.wait(handle, wait_interval=1)
        for replica in range(2):
            for line in runner.log_lines(handle, "greeter", k=replica):
                print(f"greeter/{replica} {line}", end="")
        print(f"final state: {status.state if status else 'unknown'}")
        return 0 if status is not None and status.state == specs.AppState.SUCCEEDED else 1


if __name__ == "__main__":
    raise SystemExit(main())
