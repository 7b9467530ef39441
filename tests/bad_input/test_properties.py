"""Properties of issue 31 ("every bad input caught where it enters"): for any value of a kind
that cannot work, the entry point raises the project's error naming the field (and the fix),
never an internal exception, and never accepts it; values that can work still pass."""

from __future__ import annotations

import builtins
import inspect
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anylaunch.runner.components import materialize
from anylaunch.runner.watch import WatchPolicy, poll_intervals
from anylaunch.specs import AppDef
from anylaunch.specs import named_resources_aws as aws
from anylaunch.specs.builders import ComponentRaisedError, materialize_appdef
from anylaunch.specs.errors import InvalidRunConfigException
from anylaunch.specs.file_linter import parse_fn_docstring, validate
from anylaunch.specs.named_resources_aws_catalog import INSTANCE_TYPES
from anylaunch.specs.runopts import runopts
from tests.bad_input.conftest import SECRET, assert_rejected

# the suite's autouse fixture (its own state dir) is function-scoped; nothing here launches
PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

NOT_STR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.binary(),
    st.lists(st.text(max_size=3), max_size=3),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
    st.builds(object),
)
OPTION_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)


@st.composite
def non_finite_text(draw: st.DrawFn) -> str:
    """``nan``, ``inf``, ``-Infinity``, ... in any case, as ``float()`` reads them."""
    word = draw(st.sampled_from(["nan", "inf", "infinity"]))
    cased = "".join(c.upper() if draw(st.booleans()) else c for c in word)
    return draw(st.sampled_from(["", "+", "-"])) + cased


def _float_opts(name: str) -> runopts:
    opts = runopts()
    opts.add(name, type_=float, default=1.0, help="a float option")
    return opts


# --- 1. cfg_from_str ------------------------------------------------------------------------


@PROPERTY
@given(NOT_STR)
def test_cfg_from_str_refuses_what_is_not_a_str(value: Any) -> None:
    assert_rejected(lambda: _float_opts("x").cfg_from_str(value), "cfg")


@PROPERTY
@given(OPTION_NAMES, non_finite_text())
def test_cfg_from_str_refuses_non_finite_floats_naming_the_option(name: str, text: str) -> None:
    with pytest.raises(InvalidRunConfigException) as caught:
        _float_opts(name).cfg_from_str(f"{name}={text}")
    assert caught.value.field == name
    assert "finite" in str(caught.value)


@PROPERTY
@given(OPTION_NAMES, st.floats(allow_nan=False, allow_infinity=False))
def test_cfg_from_str_keeps_finite_floats(name: str, x: float) -> None:
    assert _float_opts(name).cfg_from_str(f"{name}={x!r}") == {name: x}


# --- 2. file_linter -------------------------------------------------------------------------


@PROPERTY
@given(NOT_STR)
def test_validate_refuses_a_path_that_is_not_one(path: Any) -> None:
    assert_rejected(lambda: validate(path, "fn"), "path")


@PROPERTY
@given(st.text(max_size=8), st.text(max_size=8))
def test_validate_refuses_a_path_with_a_nul(before: str, after: str) -> None:
    assert_rejected(lambda: validate(f"{before}\x00{after}", "fn"), "path")


@PROPERTY
@given(NOT_STR)
def test_parse_fn_docstring_refuses_what_is_not_a_str(value: Any) -> None:
    assert_rejected(lambda: parse_fn_docstring(value), "docstring")


# --- 3. components ----------------------------------------------------------------------------

RAISED = st.sampled_from(
    [KeyError, ValueError, TypeError, ZeroDivisionError, RuntimeError, AttributeError, IndexError]
)


def raising(kind: str = "ValueError", why: str = "", token: str = "") -> AppDef:
    """A component whose body raises.

    Args:
        kind: the exception type to raise
        why: its message
        token: a secret the message quotes
    """
    raise getattr(builtins, kind)(f"{why} {token}")


def _raise_line() -> int:
    lines, first = inspect.getsourcelines(raising)
    return first + next(i for i, line in enumerate(lines) if line.strip().startswith("raise "))


RAISING_LINE = _raise_line()


@PROPERTY
@given(RAISED, st.text(alphabet=st.characters(codec="ascii", exclude_characters="\x00")))
def test_a_raising_component_names_itself_and_its_line(kind: type[Exception], why: str) -> None:
    with pytest.raises(ComponentRaisedError) as caught:
        materialize_appdef(raising, [f"--kind={kind.__name__}", f"--why={why}"])
    err = caught.value
    assert err.field == "component 'raising'"
    assert (err.filename, err.line) == (__file__, RAISING_LINE)
    assert f"{Path(__file__).name}:{RAISING_LINE}" in str(err)
    assert type(err.__cause__) is kind
    assert "\n" not in str(err)


@PROPERTY
@given(RAISED)
def test_a_raising_component_masks_its_secret_arguments(kind: type[Exception]) -> None:
    with pytest.raises(ComponentRaisedError) as caught:
        materialize_appdef(raising, [f"--kind={kind.__name__}", f"--token={SECRET}"])
    assert SECRET not in str(caught.value)


NO_CLI_FORM = st.one_of(
    st.builds(object),
    st.binary(),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.sets(st.integers(), max_size=2),
    st.lists(st.text(max_size=3), min_size=1, max_size=3),  # a list for a str parameter
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), min_size=1, max_size=2),
    st.lists(st.builds(object), min_size=1, max_size=2),
)


@PROPERTY
@given(NO_CLI_FORM)
def test_dict_component_args_refuse_values_without_a_cli_form(value: Any) -> None:
    assert_rejected(lambda: materialize("utils.echo", {"msg": value}, {}), "component_args['msg']")


@PROPERTY
@given(st.one_of(st.builds(object), st.binary(), st.just(math.nan), st.none()))
def test_dict_component_args_refuse_bad_items_of_a_list_parameter(item: Any) -> None:
    call = lambda: materialize("utils.sh", {"args": ["echo", item]}, {})  # noqa: E731
    assert_rejected(call, "component_args['args']")


@PROPERTY
@given(st.text(alphabet=st.characters(codec="ascii", exclude_characters="\x00"), min_size=1))
def test_dict_component_args_keep_text(msg: str) -> None:
    assert materialize("utils.echo", {"msg": msg}, {}).roles[0].args == [msg]


# --- 4. wait_interval and the watch policy's names ----------------------------------------------

BAD_SECONDS = st.one_of(
    st.sampled_from([math.inf, -math.inf, math.nan, 0, 0.0, True, False]),
    st.floats(max_value=0, exclude_max=False, allow_nan=False),
    st.integers(max_value=0),
    st.text(max_size=4),
    st.none(),
)


@PROPERTY
@given(BAD_SECONDS)
def test_watch_policy_names_the_callers_interval(value: Any) -> None:
    assert_rejected(lambda: WatchPolicy(value, interval_name="wait_interval"), "wait_interval")


@PROPERTY
@given(BAD_SECONDS.filter(lambda v: v is not None and v != 0), st.sampled_from([0, 1]))
def test_watch_policy_names_the_callers_timeouts(value: Any, which: int) -> None:
    names = ("startup_timeout_s", "run_timeout_s")
    kwargs = {("startup_timeout", "run_timeout")[which]: value}
    assert_rejected(lambda: WatchPolicy(1, option_names=names, **kwargs), names[which])


@PROPERTY
@given(BAD_SECONDS)
def test_poll_intervals_names_the_callers_interval(value: Any) -> None:
    assert_rejected(lambda: poll_intervals(value, interval_name="wait_interval"), "wait_interval")


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(BAD_SECONDS)
def test_runner_wait_names_wait_interval(value: Any) -> None:
    from anylaunch.runner import get_runner

    def wait() -> Any:
        with get_runner() as runner:
            return runner.wait("local_cwd://anylaunch/a-12345678", wait_interval=value)

    assert_rejected(wait, "wait_interval")


# --- 5. constants ---------------------------------------------------------------------------


@PROPERTY
@given(st.sampled_from(sorted(INSTANCE_TYPES)))
def test_aws_memory_is_torchx_arithmetic(itype: str) -> None:
    row = INSTANCE_TYPES[itype]
    # TorchX: memMB = <GiB asked for> * GiB with GiB = int(1024 * MEM_TAX) = 983
    assert aws.NAMED_RESOURCES[f"aws_{itype}"]().memMB == int(row.request_gib * 983)
    assert aws.GiB == int(1024 * aws.MEM_TAX) == 983
