"""Properties of issue 31 for the runner's TorchX HEAD surface: ``get_runner`` given any
keyword no scheduler takes, ``Runner.run(..., dryrun=...)`` given bad input, ``wait`` given a
non-finite or non-positive ``wait_interval`` (reported under that name, never an internal
one), and ``runner.config.DEFAULT_CONFIG_DIRS`` patched to a non-list. Each is rejected with
the project's error naming the field; nothing is launched (the suite's fixture checks)."""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anylaunch.runner import config, get_runner
from anylaunch.runner.scheduler_params import TORCHX_SCHEDULER_PARAMS, scheduler_params_of
from anylaunch.schedulers import get_scheduler_factories
from anylaunch.specs import AppDef, Resource, Role
from tests.bad_input.conftest import SECRET, assert_rejected

PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _accepted_keywords() -> frozenset[str]:
    keys: set[str] = set(TORCHX_SCHEDULER_PARAMS)
    for factory in get_scheduler_factories().values():
        keys |= scheduler_params_of(factory) or set()
    return frozenset(keys)


ACCEPTED = _accepted_keywords()
KEYWORDS = st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True).filter(
    lambda k: k not in ACCEPTED and k not in ("name", "component_defaults")
)
NOT_BOOL = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=4),
    st.lists(st.booleans(), max_size=2),
    st.builds(object),
)


def _app() -> AppDef:
    return AppDef(
        "never-runs",
        roles=[
            Role(
                "worker",
                image=os.getcwd(),
                entrypoint="/bin/false",
                resource=Resource(cpu=1, gpu=0, memMB=64),
            )
        ],
    )


# --- get_runner ------------------------------------------------------------------------------


@PROPERTY
@given(KEYWORDS)
def test_get_runner_rejects_any_keyword_no_scheduler_takes(key: str) -> None:
    assert_rejected(lambda: get_runner(**{key: SECRET}), f"get_runner({key})")


@PROPERTY
@given(st.sets(st.sampled_from(sorted(ACCEPTED)), max_size=4))
def test_get_runner_accepts_every_combination_of_known_keywords(keys: set[str]) -> None:
    # never created here, so any value is fine: the check is on the keyword only
    with get_runner(**dict.fromkeys(keys)) as runner:
        assert runner.scheduler_backends()


@PROPERTY
@given(st.sampled_from(sorted(ACCEPTED)), KEYWORDS)
def test_one_unknown_keyword_among_known_ones_is_still_named(known: str, unknown: str) -> None:
    assert_rejected(lambda: get_runner(**{known: None, unknown: SECRET}), f"get_runner({unknown})")


# --- Runner.run(..., dryrun=...) -------------------------------------------------------------


@PROPERTY
@given(NOT_BOOL)
def test_run_rejects_a_dryrun_that_is_no_bool(value: Any) -> None:
    def run() -> Any:
        with get_runner() as runner:
            return runner.run(_app(), "local_cwd", dryrun=value)

    assert_rejected(run, "dryrun")


@PROPERTY
@given(st.one_of(st.none(), st.integers(), st.text(max_size=5), st.builds(object)))
def test_run_dryrun_rejects_an_app_that_is_no_appdef(value: Any) -> None:
    def run() -> Any:
        with get_runner() as runner:
            return runner.run(value, "local_cwd", dryrun=True)

    assert_rejected(run, "app")


@PROPERTY
@given(st.one_of(st.integers(), st.text(max_size=5), st.lists(st.text(max_size=3), max_size=2)))
def test_run_dryrun_rejects_a_cfg_that_is_no_mapping(value: Any) -> None:
    def run() -> Any:
        with get_runner() as runner:
            return runner.run(_app(), "local_cwd", value, dryrun=True)

    assert_rejected(run, "cfg")


@PROPERTY
@given(st.from_regex(r"[a-z][a-z_]{2,12}", fullmatch=True))
def test_run_dryrun_names_an_unknown_run_option(key: str) -> None:
    with get_runner() as runner:
        if key in runner.scheduler_run_opts("local_cwd"):
            return

        def run() -> Any:
            return runner.run(_app(), "local_cwd", {key: SECRET}, dryrun=True)

        assert_rejected(run, key)


# --- wait_interval ---------------------------------------------------------------------------

BAD_INTERVALS = st.one_of(
    st.sampled_from([math.inf, -math.inf, math.nan]),
    st.floats(max_value=0, allow_nan=False),
    st.integers(max_value=0),
)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(BAD_INTERVALS)
def test_wait_reports_a_bad_interval_under_the_users_name(value: float) -> None:
    with get_runner() as runner:
        try:
            runner.wait("local_cwd://anylaunch/a-12345678", wait_interval=value)
        except Exception as e:
            text = str(e)
            assert text.startswith("wait_interval="), text
            assert "cap" not in text and "interval_s" not in text, text
        else:
            pytest.fail(f"wait_interval={value!r} was accepted")


# --- runner.config.DEFAULT_CONFIG_DIRS -------------------------------------------------------


@PROPERTY
@given(st.one_of(st.text(min_size=1, max_size=8), st.integers(), st.none(), st.booleans()))
def test_default_config_dirs_patched_to_a_non_list_is_named(value: Any) -> None:
    saved = config.DEFAULT_CONFIG_DIRS
    env = os.environ.pop(config.ENV_ANYLAUNCHCONFIG, None)
    config.DEFAULT_CONFIG_DIRS = value
    try:
        assert_rejected(config.find_configs, "DEFAULT_CONFIG_DIRS")
    finally:
        config.DEFAULT_CONFIG_DIRS = saved
        if env is not None:
            os.environ[config.ENV_ANYLAUNCHCONFIG] = env
