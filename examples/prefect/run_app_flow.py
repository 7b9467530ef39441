"""Run a built-in anylaunch component from a Prefect flow on local_cwd: the run_app flow
launches it, streams its output into the Prefect run log and returns its final status.

Run: uv run python examples/prefect/run_app_flow.py
(with no PREFECT_API_URL set, Prefect starts a temporary local server for the run)
"""

from prefect import flow

from prefect_anylaunch import AnylaunchJob, cancel_launched_apps, run_app


# the hooks cancel the subflow's app if this flow run crashes or is cancelled, even when its
# process is killed with the subflow in it (the worker runs them for this, the parent, run)
@flow(log_prints=True, on_crashed=[cancel_launched_apps], on_cancellation=[cancel_launched_apps])
def hello() -> str:
    job = AnylaunchJob(
        component="utils.echo",
        component_args={"msg": "hello from anylaunch", "num_replicas": 2},
        scheduler="local_cwd",
        poll_interval_s=1,
    )
    result = run_app(job)  # a subflow: launch, wait (logs stream), cancel on failure
    print(f"{result['app_handle']} final state: {result['state']}")
    return str(result["state"])


if __name__ == "__main__":
    raise SystemExit(0 if hello() == "SUCCEEDED" else 1)
