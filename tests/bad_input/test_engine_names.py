"""Properties of the name checks every engine object runs where it is defined (issue 31,
:mod:`anylaunch.runner.engine_names`): a scheduler or component name nobody registered, or an
env name no process can have, is refused naming the field, with a did-you-mean for a near
miss and never a secret; the names that can work pass."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from anylaunch.components import ComponentNotFoundException, get_components
from anylaunch.runner.engine_names import (
    UnknownComponentNameError,
    UnknownSchedulerNameError,
    check_component_name,
    check_env_names,
    check_scheduler_name,
)
from anylaunch.schedulers import get_scheduler_factories
from anylaunch.specs.errors import InvalidSpecError, UnknownSchedulerException
from tests.bad_input.conftest import SECRET, assert_rejected
from tests.bad_input.test_properties import NOT_STR

PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
SCHEDULERS = sorted(get_scheduler_factories())
COMPONENTS = sorted(get_components(include_invalid=True))
ENV_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,15}", fullmatch=True)
BAD_CHAR = st.sampled_from([" ", "=", "\t", "\n", "\r", "\x00", "\x1b", "\x7f"])


@st.composite
def typo(draw: st.DrawFn, names: list[str]) -> tuple[str, str]:
    """A known name with one character dropped, doubled or swapped with its neighbour."""
    name = draw(st.sampled_from(names))
    i = draw(st.integers(0, len(name) - 2))
    kind = draw(st.sampled_from(["drop", "double", "swap"]))
    if kind == "drop":
        wrong = name[:i] + name[i + 1 :]
    elif kind == "double":
        wrong = name[: i + 1] + name[i:]
    else:
        wrong = name[:i] + name[i + 1] + name[i] + name[i + 2 :]
    return name, wrong


@PROPERTY
@given(NOT_STR)
def test_a_scheduler_name_must_be_a_str(value: Any) -> None:
    assert_rejected(lambda: check_scheduler_name("Owner.scheduler", value), "Owner.scheduler")


@PROPERTY
@given(typo(SCHEDULERS))
def test_a_misspelt_scheduler_is_refused_with_a_suggestion(case: tuple[str, str]) -> None:
    _, wrong = case
    assume(wrong not in SCHEDULERS)
    with pytest.raises(UnknownSchedulerNameError) as caught:
        check_scheduler_name("Owner.scheduler", wrong)
    err = caught.value
    assert err.field == "Owner.scheduler" and err.value == wrong
    # one of the known names is suggested (a drop may be nearer another one)
    assert "Did you mean '" in str(err) and "Fix: use one of" in str(err)
    assert isinstance(err, InvalidSpecError) and isinstance(err, UnknownSchedulerException)


@PROPERTY
@given(st.sampled_from(SCHEDULERS))
def test_a_registered_scheduler_passes(name: str) -> None:
    assert check_scheduler_name("scheduler", name) == name


@PROPERTY
@given(NOT_STR)
def test_a_component_name_must_be_a_str(value: Any) -> None:
    assert_rejected(lambda: check_component_name("Owner.component", value), "Owner.component")


@PROPERTY
@given(typo(COMPONENTS))
def test_a_misspelt_component_is_refused_with_a_suggestion(case: tuple[str, str]) -> None:
    _, wrong = case
    assume(wrong not in COMPONENTS and ":" not in wrong and wrong.strip())
    with pytest.raises(UnknownComponentNameError) as caught:
        check_component_name("Owner.component", wrong)
    err = caught.value
    assert err.field == "Owner.component" and "Did you mean '" in str(err)
    assert isinstance(err, ComponentNotFoundException)


@PROPERTY
@given(st.sampled_from(COMPONENTS))
def test_a_registered_component_passes(name: str) -> None:
    assert check_component_name("component", name) == name


@PROPERTY
@given(
    st.from_regex(r"[a-z0-9_/]{1,12}\.py", fullmatch=True),
    st.one_of(st.just(""), st.from_regex(r"[0-9][a-z]{0,4}|[a-z]+[ -][a-z]+", fullmatch=True)),
)
def test_a_component_file_must_name_a_function(path: str, fn: str) -> None:
    assert_rejected(lambda: check_component_name("component", f"{path}:{fn}"), "component")
    assert check_component_name("component", f"{path}:train") == f"{path}:train"


@PROPERTY
@given(ENV_NAME, BAD_CHAR, ENV_NAME)
def test_an_env_name_no_process_can_have_is_refused(before: str, bad: str, after: str) -> None:
    assert_rejected(lambda: check_env_names("env", {before + bad + after: "1"}), "env")


@PROPERTY
@given(ENV_NAME, st.sampled_from(["=", " ", "\n"]))
def test_a_secret_pasted_into_an_env_name_is_not_shown(name: str, sep: str) -> None:
    with pytest.raises(InvalidSpecError) as caught:
        check_env_names("secret_env", {f"{name}{sep}{SECRET}": "x"}, secret=True)
    assert SECRET not in str(caught.value)
    assert caught.value.value == f"{name[:40]}***"


@PROPERTY
@given(ENV_NAME, NOT_STR.filter(lambda v: not isinstance(v, str)))
def test_a_secret_env_value_of_the_wrong_type_is_named_only_by_type(name: str, value: Any) -> None:
    with pytest.raises(InvalidSpecError) as caught:
        check_env_names("secret_env", {name: value}, secret=True)
    assert caught.value.field == f"secret_env[{name!r}]"
    assert caught.value.value == f"<{type(value).__name__}>"


@PROPERTY
@given(st.dictionaries(ENV_NAME, st.text(max_size=8), max_size=4))
def test_env_names_that_can_work_pass(env: dict[str, str]) -> None:
    check_env_names("env", env)
    check_env_names("secret_env", env, secret=True)


@pytest.mark.parametrize("value", [["A=1"], "A=1", 3, None])
def test_env_must_be_a_mapping(value: Any) -> None:
    assert_rejected(lambda: check_env_names("env", value), "env")
