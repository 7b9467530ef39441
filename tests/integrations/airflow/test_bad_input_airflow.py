"""Bad input to the Airflow operator, sensor and trigger (part of the bad-input suite,
``tests/bad_input``): rejected when the DAG is parsed, naming the argument."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest

from anylaunch.specs import AppDef, Role
from tests.bad_input.conftest import Case, assert_rejected

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
]


@pytest.mark.parametrize(("call", "field"), [c.param() for c in CASES])
def test_rejected(call: Any, field: str) -> None:
    assert_rejected(call, field)
