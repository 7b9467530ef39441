"""Bad input to the Airflow operator, sensor and trigger (part of the bad-input suite,
``tests/bad_input``): rejected when the DAG is parsed, naming the argument."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from anylaunch.components import ComponentNotFoundException
from anylaunch.specs import AppDef, Role
from anylaunch.specs.errors import InvalidSpecError, UnknownSchedulerException
from tests.bad_input.conftest import SECRET, Case, assert_rejected

PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

APP = AppDef("a", [Role("w", ".", entrypoint="true")])


def _op(**kwargs: Any) -> Any:
    from airflow_anylaunch.operators import AnylaunchOperator

    kwargs.setdefault("task_id", "t")
    if "component" not in kwargs:
        kwargs.setdefault("app", APP)
    return AnylaunchOperator(**kwargs)


def _sensor(**kwargs: Any) -> Any:
    from airflow_anylaunch.sensors import AnylaunchAppSensor

    kwargs.setdefault("task_id", "s")
    kwargs.setdefault("app_handle", "local_cwd://s/a-1")
    return AnylaunchAppSensor(**kwargs)


def _trigger(**kwargs: Any) -> Any:
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    kwargs.setdefault("app_handle", "local_cwd://s/a-1")
    return AnylaunchAppTrigger(**kwargs)


def _reap(**kwargs: Any) -> Any:
    from airflow_anylaunch.reap import AnylaunchReapOperator

    return AnylaunchReapOperator(task_id="reap", **kwargs)


def _extra(extra: Any) -> Any:
    from airflow_anylaunch.hooks import AnylaunchSettings

    return AnylaunchSettings.from_extra(extra, conn_id="prod")


CASES: list[Case] = [
    Case("op-no-app-no-component", lambda: _op(app=None), "app/component"),
    Case("op-app-and-component", lambda: _op(app=APP, component="utils.echo"), "app/component"),
    Case("op-app-str", lambda: _op(app="utils.echo"), "app"),
    Case("op-component-empty", lambda: _op(app=None, component=" "), "component"),
    Case("op-component-int", lambda: _op(app=None, component=3), "component"),
    Case(
        "op-component_args-int",
        lambda: _op(app=None, component="utils.echo", component_args=5),
        "component_args",
    ),
    Case(
        "op-component_args-int-items",
        lambda: _op(app=None, component="utils.echo", component_args=[1]),
        "component_args",
    ),
    Case(
        "op-component_args-without-component",
        lambda: _op(component_args={"a": "b"}),
        "component_args",
    ),
    Case("op-scheduler-unknown", lambda: _op(scheduler="local_cwdd"), "local_cwdd"),
    Case("op-scheduler-empty", lambda: _op(scheduler=""), "scheduler"),
    Case("op-session-int", lambda: _op(session=3), "session"),
    Case("op-image-empty", lambda: _op(image=" "), "image"),
    Case("op-app_name-empty", lambda: _op(app_name=""), "app_name"),
    Case("op-cfg-list", lambda: _op(cfg=["a=b"]), "cfg"),
    Case("op-env-list", lambda: _op(env=["A=1"]), "env"),
    Case("op-env-int-value", lambda: _op(env={"A": 1}), "env"),
    Case("op-on_kill_action", lambda: _op(on_kill_action="ignore"), "on_kill_action"),
    Case("op-deferrable-str", lambda: _op(deferrable="no"), "deferrable"),
    Case("op-stream_logs-str", lambda: _op(stream_logs="false"), "stream_logs"),
    Case("op-durable-str", lambda: _op(durable="no"), "durable"),
    Case("op-wait_for_completion-int", lambda: _op(wait_for_completion=1), "wait_for_completion"),
    Case(
        "op-retry-infra-str",
        lambda: _op(retry_only_infrastructure_failures="yes"),
        "retry_only_infrastructure_failures",
    ),
    Case("op-poll_interval-zero", lambda: _op(poll_interval=0), "poll_interval"),
    Case("op-poll_interval-nan", lambda: _op(poll_interval=math.nan), "poll_interval"),
    Case("op-poll_interval-inf", lambda: _op(poll_interval=math.inf), "poll_interval"),
    Case("op-startup_timeout-negative", lambda: _op(startup_timeout=-1), "startup_timeout"),
    Case("op-startup_timeout-nan", lambda: _op(startup_timeout=math.nan), "startup_timeout"),
    Case("op-run_timeout-str", lambda: _op(run_timeout="1h"), "run_timeout"),
    Case(
        "op-run_timeout-negative-delta",
        lambda: _op(run_timeout=timedelta(seconds=-5)),
        "run_timeout",
    ),
    Case("op-log_roles-str", lambda: _op(log_roles="trainer"), "log_roles"),
    Case("op-log_replicas-negative", lambda: _op(log_replicas=[-3]), "log_replicas"),
    Case("op-log_replicas-str", lambda: _op(log_replicas=["x"]), "log_replicas"),
    Case("op-secret_env_names-str", lambda: _op(secret_env_names="DB_URL"), "secret_env_names"),
    Case("op-secret_env_names-empty-item", lambda: _op(secret_env_names=[""]), "secret_env_names"),
    Case("sensor-handle-bad", lambda: _sensor(app_handle="not a handle"), "app_handle"),
    Case("sensor-handle-int", lambda: _sensor(app_handle=5), "app_handle"),
    Case("sensor-deferrable-str", lambda: _sensor(deferrable="yes"), "deferrable"),
    Case("sensor-stream_logs-int", lambda: _sensor(stream_logs=0), "stream_logs"),
    Case("sensor-secret_env_names-str", lambda: _sensor(secret_env_names="A"), "secret_env_names"),
    Case("trigger-handle-bad", lambda: _trigger(app_handle="local_cwd:/x"), "app_handle"),
    Case("trigger-poll_interval-nan", lambda: _trigger(poll_interval=math.nan), "poll_interval"),
    Case("trigger-log_replicas-str", lambda: _trigger(log_replicas=["x"]), "log_replicas"),
    Case("trigger-log_replicas-negative", lambda: _trigger(log_replicas=[-3]), "log_replicas"),
    Case("trigger-cancel_on_kill-str", lambda: _trigger(cancel_on_kill="false"), "cancel_on_kill"),
    Case("trigger-max_poll_errors-zero", lambda: _trigger(max_poll_errors=0), "max_poll_errors"),
    Case("trigger-run_deadline-inf", lambda: _trigger(run_deadline=math.inf), "run_deadline"),
    Case("trigger-log_roles-int", lambda: _trigger(log_roles=[1]), "log_roles"),
    # issue 31: typos and malformed persisted kwargs, rejected where they are defined
    Case("op-component-unknown", lambda: _op(component="utils.ecoh"), "component"),
    Case("op-component-file-no-fn", lambda: _op(component="train.py:"), "component"),
    Case("op-env-name-space", lambda: _op(env={"MY VAR": "1"}), "env"),
    Case("op-env-name-equals", lambda: _op(env={"A=B": "1"}), "env"),
    Case("trigger-log_replicas-int", lambda: _trigger(log_replicas=5), "log_replicas"),
    Case("trigger-log_positions-list", lambda: _trigger(log_positions=[1]), "log_positions"),
    Case("trigger-log_positions-str", lambda: _trigger(log_positions="w/0"), "log_positions"),
    Case("trigger-log_positions-negative", lambda: _trigger(log_positions={"w/0": -1}), "w/0"),
    Case("trigger-log_positions-text", lambda: _trigger(log_positions={"w/0": "3"}), "w/0"),
    Case("trigger-log_positions-bool", lambda: _trigger(log_positions={"w/0": True}), "w/0"),
    Case("trigger-log_positions-float", lambda: _trigger(log_positions={"w/0": 1.5}), "w/0"),
    Case("trigger-log_positions-int-key", lambda: _trigger(log_positions={0: 1}), "log_positions"),
    Case("trigger-unknown-kwarg", lambda: _trigger(poll_intervall=3), "poll_intervall"),
    Case("reap-scheduler-unknown", lambda: _reap(schedulers=["kubernetez"]), "schedulers[0]"),
    Case("reap-scheduler-empty", lambda: _reap(schedulers=["slurm", ""]), "schedulers[1]"),
    Case("conn-unknown-key", lambda: _extra({"shceduler": "local_cwd"}), "shceduler"),
    Case("conn-unknown-scheduler", lambda: _extra({"scheduler": "kubernetez"}), "scheduler"),
    Case("conn-scheduler-int", lambda: _extra({"scheduler": 3}), "scheduler"),
    Case("conn-session-space", lambda: _extra({"session": "team a"}), "session"),
]


@pytest.mark.parametrize(("call", "field"), [c.param() for c in CASES])
def test_rejected(call: Any, field: str) -> None:
    assert_rejected(call, field)


def test_typos_get_a_did_you_mean() -> None:
    from airflow_anylaunch.hooks import AnylaunchSettings

    with pytest.raises(InvalidSpecError, match=r"Did you mean 'utils\.echo'\?"):
        _op(component="utils.ecoh")
    with pytest.raises(
        InvalidSpecError, match=r"^scheduler='local_cdw' .*Did you mean 'local_cwd'"
    ):
        _op(scheduler="local_cdw")
    with pytest.raises(InvalidSpecError, match=r"prod' extra\.sesion=.*Did you mean 'session'"):
        AnylaunchSettings.from_extra({"sesion": "a"}, conn_id="prod")
    with pytest.raises(InvalidSpecError, match=r"extra\.scheduler='slurmm'.*Did you mean 'slurm'"):
        AnylaunchSettings.from_extra({"scheduler": "slurmm"}, conn_id="prod")
    with pytest.raises(InvalidSpecError, match=r"AnylaunchAppTrigger\.stream_log=.*'stream_logs'"):
        _trigger(stream_log=False)
    # the old error types still catch them
    with pytest.raises(UnknownSchedulerException):
        _op(scheduler="local_cdw")
    with pytest.raises(ComponentNotFoundException):
        _op(component="utils.ecoh")


def test_names_that_can_work_pass() -> None:
    from airflow_anylaunch.hooks import AnylaunchSettings

    _op(component="utils.echo")
    _op(component="path/to/my_file.py:train")  # a file is read at launch, where it runs
    _op(component="{{ params.component }}")  # a template is checked once rendered
    _op(scheduler="{{ var.value.scheduler }}")
    _op(env={"JAVA.OPTS": "x", "HF_TOKEN": "{{ conn.hf.password }}"})
    _reap(schedulers=["local_cwd", "{{ var.value.scheduler }}"])
    extra = {"extra__anylaunch__scheduler": "local_cwd", "cfg": {}, "session": "team-a"}
    assert AnylaunchSettings.from_extra(extra).scheduler == "local_cwd"
    assert AnylaunchSettings.from_extra({"scheduler": "", "session": None}).scheduler is None


def test_a_secret_in_an_unknown_connection_key_is_not_shown() -> None:
    with pytest.raises(InvalidSpecError) as caught:
        _extra({"cfgs": {"password": SECRET}})
    assert SECRET not in str(caught.value) and "Did you mean 'cfg'" in str(caught.value)


POSITIONS = st.dictionaries(
    st.text(min_size=1, max_size=8), st.integers(min_value=0, max_value=2**40), max_size=4
)
BAD_COUNT = st.one_of(
    st.integers(max_value=-1),
    st.booleans(),
    st.floats(),
    st.text(max_size=4),
    st.none(),
    st.lists(st.integers(), max_size=2),
)


@PROPERTY
@given(POSITIONS)
def test_the_trigger_round_trips_a_log_cursor(positions: dict[str, int]) -> None:
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    classpath, kwargs = _trigger(log_positions=positions).serialize()
    assert classpath == "airflow_anylaunch.triggers.AnylaunchAppTrigger"
    assert AnylaunchAppTrigger(**kwargs).log_positions == positions


@PROPERTY
@given(POSITIONS, st.text(min_size=1, max_size=8), BAD_COUNT)
def test_the_trigger_refuses_a_malformed_log_cursor(
    positions: dict[str, int], key: str, count: Any
) -> None:
    with pytest.raises(InvalidSpecError) as caught:
        _trigger(log_positions={**positions, key: count})
    assert caught.value.field == f"log_positions[{key!r}]"


@PROPERTY
@given(st.one_of(st.integers(), st.text(max_size=4), st.lists(st.integers(), max_size=2)))
def test_the_trigger_refuses_a_log_cursor_that_is_not_a_mapping(value: Any) -> None:
    assume(value not in ("", None))
    assert_rejected(lambda: _trigger(log_positions=value), "log_positions")


@PROPERTY
@given(st.from_regex(r"[a-z_]{1,14}", fullmatch=True))
def test_the_connection_refuses_any_unknown_key(key: str) -> None:
    assume(key not in ("scheduler", "cfg", "session"))
    with pytest.raises(InvalidSpecError) as caught:
        _extra({key: SECRET})
    assert caught.value.field == f"connection 'prod' extra.{key}"
    assert SECRET not in str(caught.value)
