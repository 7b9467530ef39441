"""Save scheduler settings (with a secret) and a job as Prefect blocks, then run the job by
its block name. The app receives the secret as an environment variable; the Prefect UI, the
run log and the dryrun artifact show it masked.

Run: uv run python examples/prefect/saved_blocks.py
"""

from prefect_anylaunch import AnylaunchJob, AnylaunchSchedulerSettings, run_app

# An AppDef as YAML, the form `anylaunch describe` prints.
APP = """
name: token-check
roles:
  - name: worker
    image: .
    entrypoint: python3
    args: ["-c", "import os; print('the token is', os.environ['API_TOKEN'])"]
"""


def main() -> int:
    # Usually saved once (or in the UI) and shared by many jobs.
    AnylaunchSchedulerSettings(
        scheduler="local_cwd",
        cfg={"cancel_grace_s": 2},
        secret_env={"API_TOKEN": "example-token-not-a-real-secret"},
    ).save("anylaunch-local", overwrite=True)
    settings = AnylaunchSchedulerSettings.load("anylaunch-local")
    AnylaunchJob(app=APP, settings=settings, poll_interval_s=1, run_timeout_s=300).save(
        "token-check", overwrite=True
    )

    result = run_app("token-check")  # loads the saved job by name
    print(f"{result['app_handle']} final state: {result['state']}")
    return 0 if result["state"] == "SUCCEEDED" else 1


if __name__ == "__main__":
    raise SystemExit(main())
