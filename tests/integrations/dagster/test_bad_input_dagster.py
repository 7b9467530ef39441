"""Bad input to the Dagster resource, op config and builders (part of the bad-input suite,
``tests/bad_input``): rejected with Dagster's config error carrying ours, naming the field."""

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anylaunch.specs import AppDef, Role
from tests.bad_input.conftest import SECRET, Case, assert_rejected

APP = AppDef("a", [Role("w", ".", entrypoint="true")])


# also run in each engine version's own environment (scripts/engine_envs.sh)
pytestmark = pytest.mark.engine_matrix


def _resource(**kwargs: Any) -> Any:
    from dagster_anylaunch import AnylaunchResource

    return AnylaunchResource(**kwargs)


def _op(**kwargs: Any) -> Any:
    from dagster_anylaunch import build_anylaunch_op

    kwargs.setdefault("name", "op")
    return build_anylaunch_op(**kwargs)


def _asset(**kwargs: Any) -> Any:
    from dagster_anylaunch import build_anylaunch_asset

    kwargs.setdefault("name", "asset")
    return build_anylaunch_asset(**kwargs)


def _reaper(schedulers: Any) -> Any:
    from dagster_anylaunch.reap import build_anylaunch_reaper_sensor

    return build_anylaunch_reaper_sensor(schedulers)


def _config(**kwargs: Any) -> Any:
    from dagster_anylaunch.ops import AnylaunchOpConfig

    return AnylaunchOpConfig(**kwargs)


CASES: list[Case] = [
    Case("resource-scheduler-unknown", lambda: _resource(scheduler="local_cwdd"), "scheduler"),
    Case("resource-poll-negative", lambda: _resource(poll_interval_s=-1), "poll_interval_s"),
    Case("resource-poll-nan", lambda: _resource(poll_interval_s=math.nan), "poll_interval_s"),
    Case("resource-poll-inf", lambda: _resource(poll_interval_s=math.inf), "poll_interval_s"),
    Case(
        "resource-startup-nan", lambda: _resource(startup_timeout_s=math.nan), "startup_timeout_s"
    ),
    Case("resource-run-negative", lambda: _resource(run_timeout_s=-3), "run_timeout_s"),
    Case("resource-cancel-inf", lambda: _resource(cancel_timeout_s=math.inf), "cancel_timeout_s"),
    Case("resource-tail-negative", lambda: _resource(log_tail_lines=-5), "log_tail_lines"),
    Case("resource-tail-str", lambda: _resource(log_tail_lines="many"), "log_tail_lines"),
    Case("resource-env-int", lambda: _resource(env={"A": 1}), "env"),
    Case("resource-secret_env-int", lambda: _resource(secret_env={"A": 1}), "secret_env"),
    Case("resource-stream_logs-str", lambda: _resource(stream_logs="sometimes"), "stream_logs"),
    Case("resource-session-empty", lambda: _resource(session_name=""), "session_name"),
    Case("resource-misspelt", lambda: _resource(shceduler=SECRET), "shceduler"),
    Case("op-name-bad", lambda: _op(name="has space", app=APP), "name"),
    Case("op-resource_key-dashes", lambda: _op(app=APP, resource_key="any-launch"), "resource_key"),
    Case("op-app-and-component", lambda: _op(app=APP, component="utils.echo"), "component"),
    Case("op-app-str", lambda: _op(app="utils.echo"), "app"),
    Case(
        "op-component_args-str",
        lambda: _op(component="utils.echo", component_args="--msg hi"),
        "component_args",
    ),
    Case("op-scheduler-unknown", lambda: _op(app=APP, scheduler="nope"), "scheduler"),
    Case("op-cfg-list", lambda: _op(app=APP, cfg=["a"]), "cfg"),
    Case("op-retry_policy-int", lambda: _op(app=APP, retry_policy=3), "retry_policy"),
    # issue 31: typos in names, rejected where the resource, op, asset or config is defined
    Case("resource-env-name-space", lambda: _resource(env={"MY VAR": "1"}), "env"),
    Case("resource-secret_env-name", lambda: _resource(secret_env={"A=B": SECRET}), "secret_env"),
    Case("op-component-unknown", lambda: _op(component="utils.ecoh"), "component"),
    Case("op-component-empty", lambda: _op(component=""), "component"),
    Case("asset-component-unknown", lambda: _asset(component="dist.dpp"), "component"),
    Case("asset-scheduler-unknown", lambda: _asset(app=APP, scheduler="slurmm"), "scheduler"),
    Case("reaper-scheduler-unknown", lambda: _reaper(["local_cwd", "slurmm"]), "schedulers[1]"),
    Case("reaper-schedulers-str", lambda: _reaper("local_cwd"), "schedulers"),
    Case("config-component-unknown", lambda: _config(component="utils.ecoh"), "component"),
    Case("config-scheduler-unknown", lambda: _config(scheduler="kubernetez"), "scheduler"),
    Case("config-scheduler-empty", lambda: _config(scheduler=" "), "scheduler"),
]


@pytest.mark.parametrize(("call", "field"), [c.param() for c in CASES])
def test_rejected(call: Any, field: str) -> None:
    assert_rejected(call, field)


def test_typos_get_a_did_you_mean_where_they_are_defined() -> None:
    import dagster as dg
    from pydantic import ValidationError

    from anylaunch.specs.errors import UnknownSchedulerException
    from dagster_anylaunch import AnylaunchResource, build_anylaunch_op
    from dagster_anylaunch.ops import AnylaunchConfigError, AnylaunchOpConfig

    with pytest.raises(ValidationError, match=r"scheduler='kubernetez'.*'kubernetes'"):
        AnylaunchResource(scheduler="kubernetez")
    with pytest.raises(UnknownSchedulerException):  # the old error type still catches it
        _op(app=APP, scheduler="kubernetez")
    with pytest.raises(Exception, match=r"component='utils\.ecoh'.*Did you mean 'utils\.echo'"):
        _op(component="utils.ecoh")
    # a RunConfig built in the definitions module fails as the module loads
    with pytest.raises(AnylaunchConfigError, match=r"Did you mean 'local_cwd'") as err:
        dg.RunConfig(ops={"anylaunch_op": AnylaunchOpConfig(scheduler="local_cdw")})
    assert err.value.field == "scheduler" and not err.value.allow_retries
    assert isinstance(err.value.__cause__, UnknownSchedulerException)

    @dg.job(resource_defs={"anylaunch": AnylaunchResource(scheduler="local_cwd")})
    def typo_job() -> None:
        build_anylaunch_op("anylaunch_op", retry_policy=dg.RetryPolicy(max_retries=2))()

    # run config given at launch: the step fails as its config is built, before any launch,
    # without using the op's retries
    config = {"ops": {"anylaunch_op": {"config": {"component": "utils.ecoh"}}}}
    result = typo_job.execute_in_process(run_config=config, raise_on_error=False)
    assert not result.success
    failure = result.failure_data_for_node("anylaunch_op")
    assert failure is not None and failure.user_failure_data is not None
    assert "Did you mean 'utils.echo'" in (failure.user_failure_data.description or "")
    assert not [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]


def test_names_that_can_work_pass() -> None:
    import dagster as dg

    _op(component="utils.echo", scheduler="local_cwd")
    _op(component="path/to/components.py:train")  # a file is read at launch, where it runs
    _asset(component="dist.ddp")
    _config(component="utils.echo", scheduler="slurm")
    _resource(env={"JAVA.OPTS": "x"}, secret_env={"HF_TOKEN": dg.EnvVar("HF_TOKEN")})


PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
ENV_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,12}", fullmatch=True)


@PROPERTY
@given(ENV_NAME, st.sampled_from([" ", "=", "\t", "\x00"]), ENV_NAME)
def test_the_resource_refuses_an_env_name_no_process_can_have(
    before: str, bad: str, after: str
) -> None:
    assert_rejected(lambda: _resource(secret_env={before + bad + after: SECRET}), "secret_env")
    assert_rejected(lambda: _resource(env={before + bad + after: "1"}), "env")


@PROPERTY
@given(st.from_regex(r"[a-z_]{3,12}", fullmatch=True))
def test_the_config_refuses_any_scheduler_nobody_registered(name: str) -> None:
    from anylaunch.schedulers import get_scheduler_factories

    if name not in get_scheduler_factories():
        assert_rejected(lambda: _config(scheduler=name), "scheduler")
