"""Bad input to the Prefect blocks and tasks (part of the bad-input suite, ``tests/bad_input``):
rejected when the block is built, naming the field, never quoting a secret."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.bad_input.conftest import SECRET, Case, assert_rejected

# also run in each engine version's own environment (scripts/engine_envs.sh)
pytestmark = pytest.mark.engine_matrix


def _job(**kwargs: Any) -> Any:
    from prefect_anylaunch import AnylaunchJob

    return AnylaunchJob(**kwargs)


def _settings(**kwargs: Any) -> Any:
    from prefect_anylaunch import AnylaunchSchedulerSettings

    kwargs.setdefault("scheduler", "local_cwd")
    return AnylaunchSchedulerSettings(**kwargs)


def _run_app(**kwargs: Any) -> Any:
    from prefect_anylaunch import AnylaunchJob, run_app

    return run_app.fn(AnylaunchJob(component="utils.echo"), **kwargs)


CASES: list[Case] = [
    Case("job-misspelt-field", lambda: _job(sheduler=SECRET), "sheduler"),
    Case("job-misspelt-timeout", lambda: _job(startup_timout_s=5), "startup_timout_s"),
    Case("job-component-empty", lambda: _job(component=""), "component"),
    Case("job-component-and-app", lambda: _job(component="utils.echo", app={"name": "a"}), "app"),
    Case(
        "job-component_args-int",
        lambda: _job(component="utils.echo", component_args=5),
        "component_args",
    ),
    Case("job-poll_interval-negative", lambda: _job(poll_interval_s=-1), "poll_interval_s"),
    Case("job-poll_interval-nan", lambda: _job(poll_interval_s=math.nan), "poll_interval_s"),
    Case("job-poll_interval-inf", lambda: _job(poll_interval_s=math.inf), "poll_interval_s"),
    Case("job-startup_timeout-nan", lambda: _job(startup_timeout_s=math.nan), "startup_timeout_s"),
    Case("job-run_timeout-zero", lambda: _job(run_timeout_s=0), "run_timeout_s"),
    Case("job-log_stream", lambda: _job(log_stream="both"), "log_stream"),
    Case("job-log_roles-str", lambda: _job(log_roles="trainer"), "log_roles"),
    Case("job-stream_logs-str", lambda: _job(stream_logs="sometimes"), "stream_logs"),
    Case("job-cfg-list", lambda: _job(cfg=["a=b"]), "cfg"),
    Case("job-app-not-an-appdef", lambda: _job(app={"roles": 5}), "app"),
    Case("job-scheduler-empty", lambda: _job(scheduler=""), "scheduler"),
    Case("job-scheduler-unknown", lambda: _job(scheduler="local_cwdd"), "Did you mean 'local_cwd'"),
    Case("settings-scheduler-unknown", lambda: _settings(scheduler="slurmm"), "slurmm"),
    Case(
        "job-scheduler-differs-from-settings",
        lambda: _job(scheduler="slurm", settings=_settings()),
        "scheduler",
    ),
    Case("settings-scheduler-empty", lambda: _settings(scheduler=" "), "scheduler"),
    Case("settings-misspelt", lambda: _settings(secret_evn={"A": SECRET}), "secret_evn"),
    Case("settings-cfg-list", lambda: _settings(cfg=[1]), "cfg"),
    Case("settings-secret_env-int", lambda: _settings(secret_env={"A": 1}), "secret_env"),
    # issue 31: typos and impossible names, rejected where the block is defined
    Case("job-component-unknown", lambda: _job(component="utils.ecoh"), "AnylaunchJob.component"),
    Case("job-component-file-no-fn", lambda: _job(component="a.py:1x"), "AnylaunchJob.component"),
    Case("settings-secret_env-space", lambda: _settings(secret_env={"A B": SECRET}), "secret_env"),
    Case("settings-secret_env-empty", lambda: _settings(secret_env={"": SECRET}), "secret_env"),
    Case(
        "settings-secret_env-token-in-name",
        lambda: _settings(secret_env={f"TOKEN={SECRET}": "x"}),
        "secret_env",
    ),
    Case("settings-secret_env-nul", lambda: _settings(secret_env={"A\x00": SECRET}), "secret_env"),
    Case("run_app-wait_retries-negative", lambda: _run_app(wait_retries=-1), "wait_retries"),
    Case("run_app-wait_retries-bool", lambda: _run_app(wait_retries=True), "wait_retries"),
    Case("run_app-delay-nan", lambda: _run_app(wait_retry_delay_s=math.nan), "wait_retry_delay_s"),
    Case("run_app-cancel_wait-inf", lambda: _run_app(cancel_wait_s=math.inf), "cancel_wait_s"),
]


@pytest.mark.parametrize(("call", "field"), [c.param() for c in CASES])
def test_rejected(call: Any, field: str) -> None:
    assert_rejected(call, field)


PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
ENV_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,12}", fullmatch=True)


@PROPERTY
@given(ENV_NAME, st.sampled_from([" ", "=", "\t", "\n", "\x00", "\x7f"]), ENV_NAME)
def test_settings_refuse_a_secret_env_name_no_process_can_have(
    before: str, bad: str, after: str
) -> None:
    assert_rejected(lambda: _settings(secret_env={before + bad + after: SECRET}), "secret_env")


@PROPERTY
@given(st.dictionaries(ENV_NAME, st.text(max_size=8), max_size=3))
def test_settings_keep_env_names_that_can_work(env: dict[str, str]) -> None:
    assert _settings(secret_env=env).env() == env


@PROPERTY
@given(st.from_regex(r"[a-z]{2,8}\.[a-z]{2,8}", fullmatch=True))
def test_a_job_refuses_any_component_nobody_registered(name: str) -> None:
    from anylaunch.components import get_components

    if name not in get_components(include_invalid=True):
        assert_rejected(lambda: _job(component=name), "AnylaunchJob.component")
