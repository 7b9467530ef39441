"""Properties of issue 31 for overlays, as TorchX HEAD's ``specs/overlays.py`` documents them:
bad arguments raise the project's error naming the argument; a structural clash (a dict
meeting a list, a JOIN that is no list of dicts) is a TypeError naming the key and leaves the
base untouched; a stored namespace that is no dict holds no overlay (get: ``{}``, set:
replaced); a legacy flat namespace is read whole unless it looks nested."""

from __future__ import annotations

import copy
import logging
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anylaunch.specs import Role
from anylaunch.specs.overlays import (
    JOIN,
    InvalidOverlayError,
    OverlayTypeError,
    apply_overlay,
    get_overlay,
    set_overlay,
)
from tests.bad_input.conftest import assert_rejected

PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

FIELDS = st.from_regex(r"[a-z][a-zA-Z0-9]{0,8}", fullmatch=True)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=4))
NOT_A_NAMESPACE = st.one_of(
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.binary(max_size=4),
    st.lists(SCALARS, max_size=3),
    st.tuples(SCALARS),
)
NOT_STR = st.one_of(
    st.none(), st.integers(), st.binary(max_size=3), st.lists(st.text(), max_size=1)
)


def _role(metadata: dict[str, Any] | None = None) -> Role:
    role = Role(name="trainer", image="img", entrypoint="train.py")
    if metadata is not None:
        role.metadata = metadata
    return role


# --- arguments -------------------------------------------------------------------------------


@PROPERTY
@given(NOT_STR | st.just(""), st.sampled_from(["namespace", "kind"]))
def test_set_and_get_name_a_bad_namespace_or_kind(value: Any, arg: str) -> None:
    names = {"namespace": "kubernetes", "kind": "V1Pod", arg: value}
    assert_rejected(lambda: set_overlay(_role(), names["namespace"], names["kind"], {}), arg)
    assert_rejected(lambda: get_overlay(_role(), names["namespace"], names["kind"]), arg)


@PROPERTY
@given(NOT_A_NAMESPACE | st.text(max_size=3))
def test_an_overlay_that_is_no_dict_is_named(value: Any) -> None:
    assert_rejected(lambda: apply_overlay({}, value), "overlay")
    assert_rejected(lambda: set_overlay(_role(), "k8s", "V1Pod", value), "overlay")


# --- structural clashes ----------------------------------------------------------------------


@PROPERTY
@given(
    FIELDS,
    st.dictionaries(FIELDS, SCALARS, min_size=1, max_size=3),
    st.lists(SCALARS, min_size=1, max_size=3),
    st.booleans(),
)
def test_a_dict_meeting_a_list_is_a_type_error_naming_the_key(
    key: str, as_dict: dict[str, Any], as_list: list[Any], dict_in_base: bool
) -> None:
    base = {key: as_dict} if dict_in_base else {key: as_list}
    overlay = {key: as_list} if dict_in_base else {key: as_dict}
    before = copy.deepcopy(base)
    with pytest.raises(OverlayTypeError) as err:
        apply_overlay(base, overlay)
    assert isinstance(err.value, TypeError) and key in str(err.value)
    assert base == before


@PROPERTY
@given(FIELDS, st.one_of(SCALARS, st.lists(SCALARS, min_size=1, max_size=3)))
def test_a_join_value_that_is_no_list_of_dicts_is_a_type_error(key: str, value: Any) -> None:
    base: dict[str, Any] = {key: [{"name": "a"}]}
    with pytest.raises(OverlayTypeError):
        apply_overlay(base, {JOIN(key, on="name"): value})
    assert base == {key: [{"name": "a"}]}


@PROPERTY
@given(FIELDS, st.sampled_from(["__join__:", "__join__::", "__put__:", "__del__:"]))
def test_malformed_operator_keys_are_value_errors(key: str, prefix: str) -> None:
    bad = f"{prefix}" if prefix != "__join__:" else f"{prefix}{key}"
    with pytest.raises(ValueError) as err:
        apply_overlay({key: []}, {bad: []})
    assert isinstance(err.value, InvalidOverlayError)


# --- stored values that hold no overlay -------------------------------------------------------


@PROPERTY
@given(NOT_A_NAMESPACE)
def test_get_overlay_of_a_non_dict_namespace_is_empty(value: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # logged, never a Python warning
        assert get_overlay(_role({"k8s": value}), "k8s", "V1Pod") == {}


@PROPERTY
@given(NOT_A_NAMESPACE, st.dictionaries(FIELDS, SCALARS, min_size=1, max_size=3))
def test_set_overlay_replaces_a_non_dict_namespace(value: Any, overlay: dict[str, Any]) -> None:
    role = _role({"k8s": value})
    logging.getLogger("anylaunch.specs.overlays").setLevel(logging.ERROR)  # expected warning
    try:
        set_overlay(role, "k8s", "V1Pod", overlay)
    finally:
        logging.getLogger("anylaunch.specs.overlays").setLevel(logging.NOTSET)
    assert get_overlay(role, "k8s", "V1Pod") == overlay


# --- the legacy flat layout ------------------------------------------------------------------


@PROPERTY
@given(st.dictionaries(FIELDS, st.one_of(SCALARS, st.dictionaries(FIELDS, SCALARS)), max_size=4))
def test_a_flat_namespace_is_read_whole_unless_it_looks_nested(ns: dict[str, Any]) -> None:
    looks_nested = not ns or (len(ns) > 1 and all(isinstance(v, dict) for v in ns.values()))
    role = _role({"k8s": copy.deepcopy(ns)})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = get_overlay(role, "k8s", "V1Pod")
    if looks_nested:
        assert got == {} and not seen
    else:
        assert got == ns
        assert [w.category for w in seen] == [DeprecationWarning]
    assert role.metadata["k8s"] == ns  # reading never changes what is stored
