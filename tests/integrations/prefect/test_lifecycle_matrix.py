"""The lifecycle scenario matrix (tests/integrations/lifecycle) through Prefect: each scenario
as the run_app flow on a real Prefect API server; the outcome kind is the flow's exception."""

from pathlib import Path

import pytest

from prefect_anylaunch import (
    AnylaunchAppFailedError,
    AnylaunchAppLostError,
    AnylaunchAppTimeoutError,
    AnylaunchJob,
    run_app,
)
from tests.integrations.lifecycle.matrix import (
    SCENARIOS,
    app_dict,
    check,
    prepare,
    scenario_run,
)
from tests.schedulers.slurm.cluster import slurm_cluster as slurm_cluster  # a fixture


def _kind(error: BaseException) -> str:
    # most specific first: the lost and timeout errors are failures too
    for cls, kind in (
        (AnylaunchAppLostError, "lost"),
        (AnylaunchAppTimeoutError, "timeout"),
        (AnylaunchAppFailedError, "failed"),
    ):
        if isinstance(error, cls):
            return kind
    raise AssertionError(f"not an anylaunch outcome: {error!r}")


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_prefect(
    name: str,
    pf: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    scenario = prepare(name, request, tmp_path, monkeypatch)
    job = AnylaunchJob(
        app=app_dict(scenario),
        scheduler=scenario.scheduler,
        cfg=dict(scenario.cfg),
        poll_interval_s=0.3,
        startup_timeout_s=scenario.startup_timeout,
        run_timeout_s=scenario.run_timeout,
    )
    with scenario_run(scenario) as run:
        state = run_app(job, return_state=True)
    kind = "success"
    if not state.is_completed():
        with pytest.raises((AnylaunchAppFailedError, AnylaunchAppTimeoutError)) as err:
            state.result()
        kind = _kind(err.value)
    check(run, kind)
