"""Bad input to the Dagster resource, op config and builders (part of the bad-input suite,
``tests/bad_input``): rejected with Dagster's config error carrying ours, naming the field."""

import math
from typing import Any

import pytest

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
]


@pytest.mark.parametrize(("call", "field"), [c.param() for c in CASES])
def test_rejected(call: Any, field: str) -> None:
    assert_rejected(call, field)
