"""Overlays as TorchX main has them: the ``__put__:``/``__join__:``/``__del__:`` storage format
(and the earlier ``$put(...)`` one still read), OverlaySpec, the nested-format marker and
flat_fallback, accumulating JOINs, one entry per field, tuples, and the TypeErrors TorchX
raises for JOIN values and structural type mismatches."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anylaunch.schedulers.kubernetes_scheduler import create_scheduler
from anylaunch.specs import AppDef, Role
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.overlays import (
    DEL,
    FORMAT_KEY,
    JOIN,
    PUT,
    InvalidOverlayError,
    OverlaySpec,
    OverlayTypeError,
    apply_overlay,
    get_overlay,
    set_overlay,
)


def _role() -> Role:
    return Role(name="trainer", image="img", entrypoint="train.py")


# --- storage format --------------------------------------------------------------------------


def test_operator_keys_are_torchx_storage_format() -> None:
    assert PUT("containers") == "__put__:containers"
    assert JOIN("containers", on="name") == "__join__:containers:name"
    assert DEL("hostNetwork") == "__del__:hostNetwork"


def test_hand_written_torchx_keys_apply() -> None:
    base: dict[str, Any] = {
        "containers": [{"name": "main", "image": "v1"}],
        "tags": ["a"],
        "hostNetwork": True,
    }
    apply_overlay(
        base,
        {
            "__join__:containers:name": [{"name": "main", "image": "v2"}],
            "__put__:tags": ["b"],
            "__del__:hostNetwork": None,
        },
    )
    assert base == {"containers": [{"name": "main", "image": "v2"}], "tags": ["b"]}


def test_join_key_may_hold_colons_after_the_field() -> None:
    base: dict[str, Any] = {"items": [{"a:b": 1, "v": 0}]}
    apply_overlay(base, {JOIN("items", on="a:b"): [{"a:b": 1, "v": 2}]})
    assert base == {"items": [{"a:b": 1, "v": 2}]}


@pytest.mark.parametrize(
    "key", ["__join__:containers", "__join__::name", "__put__:", "__PUT__:x", "__del__: x"]
)
def test_malformed_torchx_operator_key_is_a_value_error(key: str) -> None:
    with pytest.raises(ValueError, match="operator"):
        apply_overlay({}, {key: [{"name": "x"}]})


def test_keys_that_merely_contain_underscores_are_plain() -> None:
    base: dict[str, Any] = {}
    apply_overlay(base, {"__meta__": 1, "_put_x": 2, "__putx": 3})
    assert base == {"__meta__": 1, "_put_x": 2, "__putx": 3}


def test_legacy_dollar_keys_stored_today_still_apply() -> None:
    role = _role()
    role.metadata["kubernetes"] = {
        "V1Pod": {
            "spec": {
                "$put(tolerations)": [{"key": "gpu"}],
                "$join(containers,on=name)": [{"name": "main", "image": "v2"}],
                "$del(hostNetwork)": None,
            }
        }
    }
    base: dict[str, Any] = {
        "spec": {
            "tolerations": [{"key": "old"}],
            "containers": [{"name": "main", "image": "v1"}],
            "hostNetwork": True,
        }
    }
    apply_overlay(base, get_overlay(role, "kubernetes", "V1Pod"))
    assert base == {
        "spec": {"tolerations": [{"key": "gpu"}], "containers": [{"name": "main", "image": "v2"}]}
    }


def test_set_overlay_rewrites_legacy_keys_it_stores_to_torchx_format() -> None:
    role = _role()
    role.metadata["k"] = {"Pod": {"spec": {"$put(a)": [1], "$join(c, on=n)": [{"n": 1}]}}}
    set_overlay(role, "k", "Pod", {"spec": {"b": 2, JOIN("c", on="n"): [{"n": 1, "x": 1}]}})
    assert get_overlay(role, "k", "Pod") == {
        "spec": {PUT("a"): [1], "b": 2, JOIN("c", on="n"): [{"n": 1, "x": 1}]}
    }


def test_stored_overlay_round_trips_through_json() -> None:
    role = _role()
    set_overlay(role, "k", "Pod", {"spec": {PUT("a"): {"x": 1}, DEL("b"): None}})
    copied = _role()
    copied.metadata = json.loads(json.dumps(role.metadata))
    assert get_overlay(copied, "k", "Pod") == get_overlay(role, "k", "Pod")


# --- accumulation ----------------------------------------------------------------------------


def test_repeated_joins_accumulate() -> None:
    role = _role()
    set_overlay(role, "k", "Pod", {JOIN("c", on="name"): [{"name": "a", "x": 1}]})
    set_overlay(role, "k", "Pod", {JOIN("c", on="name"): [{"name": "a", "y": 2}, {"name": "b"}]})
    assert get_overlay(role, "k", "Pod") == {
        JOIN("c", on="name"): [{"name": "a", "x": 1, "y": 2}, {"name": "b"}]
    }
    accumulated: dict[str, Any] = {"c": [{"name": "a", "x": 0, "z": 3}]}
    apply_overlay(accumulated, get_overlay(role, "k", "Pod"))
    sequential: dict[str, Any] = {"c": [{"name": "a", "x": 0, "z": 3}]}
    apply_overlay(sequential, {JOIN("c", on="name"): [{"name": "a", "x": 1}]})
    apply_overlay(sequential, {JOIN("c", on="name"): [{"name": "a", "y": 2}, {"name": "b"}]})
    assert (
        accumulated == sequential == {"c": [{"name": "a", "x": 1, "z": 3, "y": 2}, {"name": "b"}]}
    )


def test_join_merges_into_a_stored_plain_list() -> None:
    role = _role()
    set_overlay(role, "k", "Pod", {"c": [{"name": "a", "x": 1}]})
    set_overlay(role, "k", "Pod", {JOIN("c", on="name"): [{"name": "a", "y": 2}]})
    assert get_overlay(role, "k", "Pod") == {JOIN("c", on="name"): [{"name": "a", "x": 1, "y": 2}]}


def test_join_after_put_keeps_the_replacement() -> None:
    role = _role()
    set_overlay(role, "k", "Pod", {PUT("c"): [{"name": "a"}]})
    set_overlay(role, "k", "Pod", {JOIN("c", on="name"): [{"name": "a", "y": 2}, {"name": "b"}]})
    assert get_overlay(role, "k", "Pod") == {PUT("c"): [{"name": "a", "y": 2}, {"name": "b"}]}
    base: dict[str, Any] = {"c": [{"name": "old"}]}
    apply_overlay(base, get_overlay(role, "k", "Pod"))
    assert base == {"c": [{"name": "a", "y": 2}, {"name": "b"}]}


def test_join_after_del_sets_exactly_its_items() -> None:
    role = _role()
    set_overlay(role, "k", "Pod", {DEL("c"): None})
    set_overlay(role, "k", "Pod", {JOIN("c", on="name"): [{"name": "a"}]})
    base: dict[str, Any] = {"c": [{"name": "old"}]}
    apply_overlay(base, get_overlay(role, "k", "Pod"))
    assert base == {"c": [{"name": "a"}]}


def test_join_on_another_key_replaces_the_earlier_join() -> None:
    role = _role()
    set_overlay(role, "k", "Pod", {JOIN("c", on="name"): [{"name": "a"}]})
    set_overlay(role, "k", "Pod", {JOIN("c", on="key"): [{"key": "b"}]})
    assert get_overlay(role, "k", "Pod") == {JOIN("c", on="key"): [{"key": "b"}]}


def test_join_onto_a_stored_dict_is_a_type_error_and_changes_nothing() -> None:
    role = _role()
    set_overlay(role, "k", "Pod", {"c": {"name": "a"}})
    before = copy.deepcopy(role.metadata)
    with pytest.raises(TypeError, match="JOIN"):
        set_overlay(role, "k", "Pod", {JOIN("c", on="name"): [{"name": "a"}]})
    assert role.metadata == before


# --- apply_overlay: one entry per field, tuples ----------------------------------------------


def test_apply_keeps_one_entry_per_field_when_base_holds_operator_keys() -> None:
    base: dict[str, Any] = {"__put__:a": [0], "a": [1], "$del(b)": None, "c": 1}
    apply_overlay(base, {"a": [2], DEL("b"): None, PUT("c"): 3})
    assert base == {"a": [1, 2], "c": 3}
    stored = {"__join__:c:name": [{"name": "x"}]}
    apply_overlay(stored, {JOIN("c", on="name"): [{"name": "y"}]})
    assert stored == {"c": [{"name": "y"}]}


def test_tuples_replace_lists_and_become_lists() -> None:
    base: dict[str, Any] = {"args": ["a"], "spec": {}}
    apply_overlay(base, {"args": ("b", "c"), "spec": {"new": (1, (2,))}, PUT("p"): ({"q": ()},)})
    assert base == {"args": ["b", "c"], "spec": {"new": [1, [2]]}, "p": [{"q": []}]}


def test_set_overlay_stores_a_tuple_as_put_of_a_list() -> None:
    role = _role()
    set_overlay(role, "k", "Pod", {"args": ["a"]})
    set_overlay(role, "k", "Pod", {"args": ("b",)})
    assert get_overlay(role, "k", "Pod") == {PUT("args"): ["b"]}
    assert json.loads(json.dumps(role.metadata)) == role.metadata


def test_yaml_python_tuple_in_a_file_replaces_the_list(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text("V1Pod:\n  spec:\n    args: !!python/tuple [x, y]\n")
    role = _role()
    role.metadata["kubernetes"] = str(path)
    base: dict[str, Any] = {"spec": {"args": ["old"]}}
    apply_overlay(base, get_overlay(role, "kubernetes", "V1Pod"))
    assert base == {"spec": {"args": ["x", "y"]}}


# --- TypeErrors ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [{"name": "x"}, "x", None, [{"name": "x"}, "y"]])
def test_join_value_that_is_not_a_list_of_dicts_is_a_type_error(value: Any) -> None:
    with pytest.raises(TypeError, match="JOIN requires a list") as raised:
        apply_overlay({}, {JOIN("c", on="name"): value})
    assert isinstance(raised.value, InvalidOverlayError)
    with pytest.raises(TypeError, match="JOIN"):
        set_overlay(_role(), "k", "Pod", {"spec": {JOIN("c", on="name"): value}})


@pytest.mark.parametrize(
    ("current", "value"),
    [
        ([1], {"a": 1}),
        ({"a": 1}, [1]),
        ([1], "str"),
        ("str", [1]),
        ({"a": 1}, 5),
        (5, {"a": 1}),
        ({"a": 1}, ("t",)),
    ],
)
def test_structural_type_mismatch_is_a_type_error_naming_the_path(current: Any, value: Any) -> None:
    base = {"spec": {"field": current}}
    with pytest.raises(OverlayTypeError) as raised:
        apply_overlay(base, {"spec": {"field": value}})
    assert isinstance(raised.value, TypeError)
    assert "spec.field" in str(raised.value) and "PUT('field')" in str(raised.value)


def test_type_error_fix_names_a_field_with_dots_whole() -> None:
    base = {"metadata": {"labels": {"example.com/team": {"a": 1}}}}
    with pytest.raises(TypeError) as raised:
        apply_overlay(base, {"metadata": {"labels": {"example.com/team": "ml"}}})
    assert "PUT('example.com/team')" in str(raised.value)
    role = _role()
    set_overlay(role, "k", "Pod", {"labels": {"example.com/team": ["a"]}})
    with pytest.raises(TypeError) as raised:
        set_overlay(role, "k", "Pod", {"labels": {"example.com/team": "ml"}})
    assert "PUT('example.com/team')" in str(raised.value)


def test_set_overlay_on_a_malformed_stored_overlay_names_it() -> None:
    role = _role()
    role.metadata["k"] = {"Pod": {"spec": {1: "x"}}}
    with pytest.raises(InvalidOverlayError, match=r"metadata\['k'\]\['Pod'\]"):
        set_overlay(role, "k", "Pod", {"a": 1})


def test_stored_del_value_is_none() -> None:
    role = _role()
    set_overlay(role, "k", "Pod", {DEL("a"): {"ignored": [1]}})
    assert get_overlay(role, "k", "Pod") == {DEL("a"): None}


def test_type_error_messages_do_not_show_values() -> None:
    with pytest.raises(TypeError) as raised:
        apply_overlay({"token": {"a": 1}}, {"token": "s3cr3t-value"})
    assert "s3cr3t" not in str(raised.value)


@pytest.mark.parametrize(
    ("current", "value", "expected"),
    [
        ("1", 1, 1),  # primitives may change type (enums serialize as int or str)
        ({"a": 1}, None, None),  # "field": None sets null
        (None, {"a": 1}, {"a": 1}),  # a null field takes any value
        (None, [1], [1]),
    ],
)
def test_primitive_and_null_changes_are_not_mismatches(
    current: Any, value: Any, expected: Any
) -> None:
    base = {"f": current}
    apply_overlay(base, {"f": value})
    assert base == {"f": expected}


def test_join_into_a_base_list_of_non_dicts_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="non-dict"):
        apply_overlay({"c": ["a"]}, {JOIN("c", on="name"): [{"name": "x"}]})


# --- marker, flat_fallback -------------------------------------------------------------------


def test_set_overlay_stamps_the_format_marker_and_missing_kinds_are_empty() -> None:
    role = _role()
    set_overlay(role, "k", "pod", {"spec": {"a": 1}})  # a lowercase kind
    assert role.metadata["k"][FORMAT_KEY] is True
    assert get_overlay(role, "k", "job") == {}  # never the "pod" overlay as a flat one


def test_torchx_marker_is_recognised() -> None:
    role = _role()
    role.metadata["k"] = {"__torchx_overlays__": True, "pod": {"a": 1}}
    assert get_overlay(role, "k", "job") == {}
    assert get_overlay(role, "k", "pod") == {"a": 1}


def test_flat_fallback_false_never_reads_a_flat_namespace() -> None:
    role = _role()
    role.metadata["k"] = {"spec": {"hostIPC": True}}
    assert get_overlay(role, "k", "V1Pod", flat_fallback=False) == {}
    with pytest.warns(DeprecationWarning):
        assert get_overlay(role, "k", "V1Pod") == {"spec": {"hostIPC": True}}


@pytest.mark.parametrize("kind", [FORMAT_KEY, "__torchx_overlays__"])
def test_marker_is_a_reserved_kind(kind: str) -> None:
    with pytest.raises(ValueError, match="reserved"):
        set_overlay(_role(), "k", kind, {})
    with pytest.raises(ValueError, match="reserved"):
        get_overlay(_role(), "k", kind)


# --- OverlaySpec -----------------------------------------------------------------------------


def test_overlay_spec_sets_and_gets_with_accumulation() -> None:
    spec = OverlaySpec("kubernetes", "V1Pod", blocklist=("command",))
    role = _role()
    spec.set(role, {"spec": {"nodeSelector": {"a": "1"}}})
    spec.set(role, {"spec": {"nodeSelector": {"b": "2"}}})
    assert spec.get(role) == {"spec": {"nodeSelector": {"a": "1", "b": "2"}}}
    assert spec.get(role) == get_overlay(role, "kubernetes", "V1Pod")


def test_overlay_spec_refuses_blocklisted_keys_on_set_and_on_get() -> None:
    spec = OverlaySpec("kubernetes", "V1Pod", blocklist=("command", "env"))
    role = _role()
    with pytest.raises(ValueError, match="env"):
        spec.set(role, {PUT("env"): []})
    assert role.metadata == {}  # nothing stored
    set_overlay(role, "kubernetes", "V1Pod", {"command": ["x"]})  # around the spec
    with pytest.raises(ValueError, match="command"):
        spec.get(role)


def test_overlay_spec_get_does_not_read_flat_namespaces() -> None:
    role = _role()
    role.metadata["kubernetes"] = {"spec": {"hostIPC": True}}
    assert OverlaySpec("kubernetes", "V1Pod").get(role) == {}


def test_overlay_spec_is_frozen_hashable_and_keeps_a_tuple() -> None:
    spec = OverlaySpec("kubernetes", "V1Pod", blocklist=["env"])  # type: ignore[arg-type]
    assert spec.blocklist == ("env",)
    assert spec == OverlaySpec("kubernetes", "V1Pod", ("env",))
    assert len({spec, OverlaySpec("kubernetes", "V1Pod", ("env",))}) == 1
    with pytest.raises(AttributeError):
        spec.kind = "V1Job"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("", "V1Pod"), "namespace"),
        (("kubernetes", None), "kind"),
        (("kubernetes", FORMAT_KEY), "kind"),
        (("kubernetes", "V1Pod", "env"), "blocklist"),
        (("kubernetes", "V1Pod", ("env", "")), "blocklist"),
    ],
)
def test_overlay_spec_rejects_bad_fields(args: tuple[Any, ...], field: str) -> None:
    with pytest.raises(InvalidSpecError, match=field):
        OverlaySpec(*args)


# --- a scheduler using them ------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", [JOIN("containers", on="name"), "__join__:containers:name", "$join(containers,on=name)"]
)
def test_kubernetes_dryrun_applies_every_spelling(key: str) -> None:
    app = AppDef("a", [Role("w", "busybox", entrypoint="true")])
    app.roles[0].metadata["kubernetes"] = {
        "V1Pod": {"spec": {key: [{"name": "side", "image": "busybox"}]}}
    }
    request: Any = create_scheduler("offline").submit_dryrun(app, {}).request
    job = request.objects[-1]
    names = [c["name"] for c in job["spec"]["template"]["spec"]["containers"]]
    assert names == ["w", "side"]


def test_kubernetes_dryrun_reports_a_type_mismatch_as_type_error() -> None:
    app = AppDef("a", [Role("w", "busybox", entrypoint="true")])
    set_overlay(app.roles[0], "kubernetes", "V1Pod", {"spec": {"containers": {"name": "x"}}})
    with pytest.raises(TypeError, match=r"spec\.containers"):
        create_scheduler("offline").submit_dryrun(app, {})


# --- accumulation law with operators ---------------------------------------------------------

_names = st.sampled_from(["a", "b"])
_scalars = st.none() | st.integers(0, 3) | st.sampled_from(["x", "y"])
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(_names, inner, max_size=2),
    max_leaves=6,
)


def _overlays(depth: int = 1) -> st.SearchStrategy[dict[str, Any]]:
    """PUT/DEL/plain keys on a and b; JOIN on name only for j (so j always holds a JOIN)."""
    value = _values if depth == 0 else (_values | _overlays(depth - 1))
    item = st.builds(
        lambda name, rest: {**rest, "name": name},
        st.sampled_from(["p", "q"]),
        st.dictionaries(_names, _values, max_size=2) if depth == 0 else _overlays(depth - 1),
    )
    entry = st.one_of(
        st.tuples(_names, value),
        st.tuples(_names.map(PUT), value),
        st.tuples(_names.map(DEL), st.none()),
        st.tuples(st.just(JOIN("j", on="name")), st.lists(item, max_size=3)),
    )
    return st.lists(entry, max_size=3).map(dict)


@settings(deadline=None)  # no timing: the machine is shared
@given(st.dictionaries(_names, _values, max_size=2), _overlays(), _overlays(), _overlays())
def test_law_accumulating_operators_and_joins_equals_applying_one_after_the_other(
    base: dict[str, Any], first: Any, second: Any, third: Any
) -> None:
    sequential: Any = copy.deepcopy(base)
    try:
        for overlay in (first, second, third):
            apply_overlay(sequential, overlay)
    except TypeError:
        return  # the law is about overlays that apply
    role = _role()
    for overlay in (first, second, third):
        set_overlay(role, "k", "Pod", overlay)
    accumulated = copy.deepcopy(base)
    apply_overlay(accumulated, get_overlay(role, "k", "Pod"))
    assert accumulated == sequential
