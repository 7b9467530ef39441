"""Tests for anylaunch.specs.overlays: operators, accumulation, resolution, files, validation."""

from __future__ import annotations

import copy
import json
import logging
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from anylaunch.specs import AppDef, Role
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.overlays import (
    DEL,
    FORMAT_KEY,
    JOIN,
    PUT,
    InvalidOverlayError,
    _parse_key,
    apply_overlay,
    get_overlay,
    set_overlay,
    validate_overlay,
)


def _role() -> Role:
    return Role(name="trainer", image="img", entrypoint="train.py")


# --- operator keys ---------------------------------------------------------------------------


def test_operator_keys_are_plain_strings_that_round_trip() -> None:
    keys = [PUT("containers"), JOIN("containers", on="name"), DEL("hostNetwork")]
    assert keys == ["__put__:containers", "__join__:containers:name", "__del__:hostNetwork"]
    assert json.loads(json.dumps(dict.fromkeys(keys))) == dict.fromkeys(keys)
    assert [tuple(_parse_key(k)) for k in keys] == [
        ("put", "containers", None),
        ("join", "containers", "name"),
        ("del", "hostNetwork", None),
    ]
    assert tuple(_parse_key("containers")) == (None, "containers", None)
    # the earlier spelling still parses, even hand-written with a space after the comma
    assert tuple(_parse_key("$join(containers, on=name)")) == ("join", "containers", "name")
    assert tuple(_parse_key("$put(containers)")) == ("put", "containers", None)


@pytest.mark.parametrize(
    "make",
    [
        lambda: PUT(""),
        lambda: PUT(" x"),
        lambda: DEL(""),
        lambda: JOIN("a:b", on="name"),
        lambda: JOIN("containers", on=""),
        lambda: JOIN("containers", on=" name"),
        lambda: PUT(3),  # type: ignore[arg-type]
    ],
)
def test_malformed_operator_field_raises_value_error(make: Any) -> None:
    with pytest.raises(ValueError):
        make()


@pytest.mark.parametrize("key", ["$PUT(x)", "$join(containers)", "$put()", "$del(a,b)"])
def test_key_that_looks_like_an_operator_but_does_not_parse_is_rejected(key: str) -> None:
    with pytest.raises(InvalidOverlayError, match="operator"):
        apply_overlay({}, {key: 1})


def test_other_dollar_keys_are_plain() -> None:
    base: dict[str, Any] = {}
    apply_overlay(base, {"$ref": "x", "$delta": 1})
    assert base == {"$ref": "x", "$delta": 1}


# --- apply_overlay ---------------------------------------------------------------------------


def test_none_vs_del_vs_missing() -> None:
    base = {"a": 1, "b": 2, "c": 3}
    apply_overlay(base, {"a": None, DEL("b"): None})
    assert base == {"a": None, "c": 3}
    assert "a" in base and "b" not in base


def test_del_of_missing_key_is_fine() -> None:
    base = {"a": 1}
    apply_overlay(base, {DEL("nope"): None})
    assert base == {"a": 1}


def test_put_replaces_dict_instead_of_merging() -> None:
    base = {"spec": {"cpu": "1", "mem": "2"}}
    apply_overlay(base, {PUT("spec"): {"gpu": 1}})
    assert base == {"spec": {"gpu": 1}}


def test_join_merges_matched_appends_unmatched_and_creates_missing() -> None:
    base: dict[str, Any] = {"containers": [{"name": "main", "env": [{"name": "A"}]}]}
    apply_overlay(
        base,
        {
            JOIN("containers", on="name"): [
                {"name": "main", JOIN("env", on="name"): [{"name": "A", "value": "1"}]},
                {"name": "side"},
            ],
            JOIN("volumes", on="name"): [{"name": "v"}],
        },
    )
    assert base == {
        "containers": [{"name": "main", "env": [{"name": "A", "value": "1"}]}, {"name": "side"}],
        "volumes": [{"name": "v"}],
    }


def test_join_item_without_key_field_is_appended() -> None:
    base = {"tolerations": [{"key": "gpu", "operator": "Exists"}]}
    apply_overlay(base, {JOIN("tolerations", on="key"): [{"operator": "Exists"}]})
    assert base["tolerations"] == [{"key": "gpu", "operator": "Exists"}, {"operator": "Exists"}]


@pytest.mark.parametrize("current", [["a", "b"], {"name": "x"}, "str"])
def test_join_on_non_list_of_dicts_raises_type_error(current: Any) -> None:
    with pytest.raises(TypeError, match="containers"):
        apply_overlay({"containers": current}, {JOIN("containers", on="name"): [{"name": "x"}]})


def test_join_value_must_be_list_of_dicts() -> None:
    with pytest.raises(InvalidOverlayError, match="JOIN"):
        apply_overlay({}, {JOIN("containers", on="name"): {"name": "x"}})


def test_nested_operators_inside_copied_values_are_resolved() -> None:
    base: dict[str, Any] = {"tags": []}
    apply_overlay(base, {"spec": {PUT("a"): 1, DEL("b"): None}, "tags": [{PUT("x"): [1]}]})
    assert base == {"spec": {"a": 1}, "tags": [{"x": [1]}]}


def test_apply_deep_copies_values_from_the_overlay() -> None:
    overlay: dict[str, Any] = {"spec": {"list": [1]}, PUT("p"): {"q": [2]}}
    snapshot = copy.deepcopy(overlay)
    base: dict[str, Any] = {}
    apply_overlay(base, overlay)
    base["spec"]["list"].append(99)
    base["p"]["q"].append(99)
    assert overlay == snapshot


@pytest.mark.parametrize("overlay", [None, [1], "x"])
def test_apply_rejects_non_dict_overlay(overlay: Any) -> None:
    with pytest.raises(InvalidOverlayError, match="must be a dict"):
        apply_overlay({}, overlay)


def test_apply_rejects_non_str_keys_and_non_dict_base() -> None:
    with pytest.raises(InvalidOverlayError, match="must be str"):
        apply_overlay({}, {"spec": {1: "x"}})
    with pytest.raises(InvalidSpecError, match="base"):
        apply_overlay([], {})  # type: ignore[arg-type]


# --- set_overlay / get_overlay ---------------------------------------------------------------


def test_set_overlay_stores_under_namespace_and_kind_on_appdef_and_role() -> None:
    role = _role()
    app = AppDef(name="app", roles=[role])
    set_overlay(app, "kubernetes", "V1Job", {"spec": {"ttl": 5}})
    set_overlay(role, "kubernetes", "V1Pod", {"spec": {"hostIPC": True}})
    assert app.metadata == {"kubernetes": {FORMAT_KEY: True, "V1Job": {"spec": {"ttl": 5}}}}
    assert get_overlay(role, "kubernetes", "V1Pod") == {"spec": {"hostIPC": True}}


def test_set_overlay_last_put_or_del_on_a_field_wins() -> None:
    role = _role()
    set_overlay(role, "k", "Pod", {"spec": {"containers": [{"name": "a"}]}})
    set_overlay(role, "k", "Pod", {"spec": {DEL("containers"): None}})
    set_overlay(role, "k", "Pod", {"spec": {PUT("containers"): [{"name": "b"}]}})
    assert get_overlay(role, "k", "Pod") == {"spec": {PUT("containers"): [{"name": "b"}]}}
    set_overlay(role, "k", "Pod", {"spec": {DEL("containers"): None}})
    assert get_overlay(role, "k", "Pod") == {"spec": {DEL("containers"): None}}


def test_set_overlay_plain_key_merges_into_put_entry() -> None:
    role = _role()
    set_overlay(role, "k", "Pod", {PUT("labels"): {"a": "1"}})
    set_overlay(role, "k", "Pod", {"labels": {"b": "2"}})
    assert get_overlay(role, "k", "Pod") == {PUT("labels"): {"a": "1", "b": "2"}}
    base = {"labels": {"old": "x"}}
    apply_overlay(base, get_overlay(role, "k", "Pod"))
    assert base == {"labels": {"a": "1", "b": "2"}}


def test_set_overlay_plain_key_after_del_sets_exactly_that_value() -> None:
    role = _role()
    set_overlay(role, "k", "Pod", {DEL("labels"): None})
    set_overlay(role, "k", "Pod", {"labels": {"b": "2"}})
    assert DEL("labels") not in get_overlay(role, "k", "Pod")
    base = {"labels": {"old": "x"}}
    apply_overlay(base, get_overlay(role, "k", "Pod"))
    # one after the other, DEL then {"b": "2"} leaves only b
    assert base == {"labels": {"b": "2"}}


def test_set_overlay_type_change_is_a_type_error_and_changes_nothing() -> None:
    # One after the other, {"y": 2} would meet the list [1]: TorchX raises TypeError there.
    role = _role()
    set_overlay(role, "k", "Pod", {"a": [1]})
    with pytest.raises(TypeError, match="PUT"):
        set_overlay(role, "k", "Pod", {"a": {"y": 2}})
    assert get_overlay(role, "k", "Pod") == {"a": [1]}
    set_overlay(role, "k", "Pod", {PUT("a"): {"y": 2}})  # the fix the error names
    base = {"a": {"x": 1}}
    apply_overlay(base, get_overlay(role, "k", "Pod"))
    assert base == {"a": {"y": 2}}


def test_get_overlay_returns_a_copy() -> None:
    role = _role()
    set_overlay(role, "k", "Pod", {"spec": {"a": [1]}})
    got = get_overlay(role, "k", "Pod")
    got["spec"]["a"].append(2)
    assert get_overlay(role, "k", "Pod") == {"spec": {"a": [1]}}


def test_get_overlay_missing_is_empty() -> None:
    role = _role()
    assert get_overlay(role, "k", "Pod") == {}
    role.metadata["k"] = {}
    assert get_overlay(role, "k", "Pod") == {}


def test_get_overlay_flat_namespace_is_deprecated_fallback() -> None:
    role = _role()
    role.metadata["k"] = {"spec": {"hostIPC": True}}
    with pytest.warns(DeprecationWarning, match="Pod"):
        assert get_overlay(role, "k", "Pod") == {"spec": {"hostIPC": True}}


def test_get_overlay_with_kind_present_does_not_warn() -> None:
    role = _role()
    set_overlay(role, "k", "Pod", {"a": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert get_overlay(role, "k", "Pod") == {"a": 1}


@pytest.mark.parametrize(
    ("target", "namespace", "kind", "overlay", "match"),
    [
        ({"metadata": {}}, "k", "Pod", {}, "AppDef or a Role"),
        (None, "k", "Pod", {}, "AppDef or a Role"),
        ("role", "", "Pod", {}, "namespace"),
        ("role", "k", " ", {}, "kind"),
        ("role", "k", "Pod", [("a", 1)], "must be a dict"),
        ("role", "k", "Pod", {JOIN("c", on="n"): "x"}, "JOIN"),
    ],
)
def test_set_overlay_rejects_bad_input(
    target: Any, namespace: str, kind: str, overlay: Any, match: str
) -> None:
    if target == "role":
        target = _role()
    with pytest.raises(InvalidSpecError, match=match):
        set_overlay(target, namespace, kind, overlay)


def test_set_overlay_replaces_non_dict_stored_namespace_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # as in TorchX: a namespace that is no dict holds no overlays, and set_overlay replaces it
    role = _role()
    role.metadata["k"] = 42
    with caplog.at_level(logging.WARNING, logger="anylaunch.specs.overlays"):
        set_overlay(role, "k", "Pod", {"a": 1})
    assert get_overlay(role, "k", "Pod") == {"a": 1}
    assert "metadata['k'] holds a int" in caplog.text


# --- file-backed overlays --------------------------------------------------------------------

_FILE_CONTENT = {"V1Pod": {"spec": {PUT("tolerations"): [{"key": "gpu"}]}}}


@pytest.mark.parametrize(
    ("filename", "dump"),
    [
        ("pod.json", json.dumps),
        ("pod.yaml", yaml.safe_dump),
        ("pod.yml", yaml.safe_dump),
        ("pod.txt", yaml.safe_dump),  # not JSON: falls back to YAML
    ],
)
@pytest.mark.parametrize("as_uri", [False, True])
def test_get_overlay_loads_file_backed_namespace(
    tmp_path: Path, filename: str, dump: Any, as_uri: bool
) -> None:
    path = tmp_path / filename
    path.write_text(dump(_FILE_CONTENT))
    role = _role()
    role.metadata["kubernetes"] = path.as_uri() if as_uri else str(path)
    assert role.metadata["kubernetes"].startswith("file://") == as_uri
    overlay = get_overlay(role, "kubernetes", "V1Pod")
    assert overlay == _FILE_CONTENT["V1Pod"]
    base = {"spec": {"tolerations": [{"key": "old"}]}}
    apply_overlay(base, overlay)
    assert base == {"spec": {"tolerations": [{"key": "gpu"}]}}


def test_missing_file_names_namespace_and_path(tmp_path: Path) -> None:
    role = _role()
    missing = str(tmp_path / "nope.yaml")
    role.metadata["kubernetes"] = missing
    with pytest.raises(InvalidOverlayError) as info:
        get_overlay(role, "kubernetes", "V1Pod")
    assert "'kubernetes'" in str(info.value) and missing in str(info.value)


@pytest.mark.parametrize("text", ["{bad: [", "[1, 2]"])
def test_unparsable_or_non_mapping_file_is_rejected(tmp_path: Path, text: str) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(text)
    role = _role()
    role.metadata["kubernetes"] = str(path)
    with pytest.raises(InvalidOverlayError, match="kubernetes"):
        get_overlay(role, "kubernetes", "V1Pod")


def test_set_overlay_on_file_backed_namespace_inlines_it(tmp_path: Path) -> None:
    path = tmp_path / "pod.json"
    path.write_text(json.dumps({"V1Pod": {"spec": {"a": 1}}}))
    role = _role()
    role.metadata["kubernetes"] = str(path)
    set_overlay(role, "kubernetes", "V1Pod", {"spec": {"b": 2}})
    assert get_overlay(role, "kubernetes", "V1Pod") == {"spec": {"a": 1, "b": 2}}
    assert json.loads(path.read_text()) == {"V1Pod": {"spec": {"a": 1}}}  # file untouched


# --- validate_overlay ------------------------------------------------------------------------


def test_blocklist_without_dot_matches_at_any_depth_including_lists() -> None:
    overlay = {"spec": {"containers": [{"name": "main", PUT("env"): []}]}}
    with pytest.raises(InvalidOverlayError) as info:
        validate_overlay(
            overlay, blocklist=["env"], overlay_name="V1Pod", suggestion="Use Role.env"
        )
    msg = str(info.value)
    assert "V1Pod" in msg and "spec.containers[0]" in msg and "env" in msg
    assert "Role/AppDef field instead" in msg and "Use Role.env" in msg
    assert isinstance(info.value, ValueError)


def test_blocklist_with_dot_matches_exact_path_only() -> None:
    validate_overlay({"containers": [{"name": "x"}]}, blocklist=["spec.containers"])
    with pytest.raises(InvalidOverlayError, match=r"spec\.containers"):
        validate_overlay(
            {"spec": {JOIN("containers", on="name"): []}}, blocklist=["spec.containers"]
        )


def test_blocklist_resolves_del_keys() -> None:
    with pytest.raises(InvalidOverlayError, match="command"):
        validate_overlay({DEL("command"): None}, blocklist=["command"])


def test_forbidden_keys_are_top_level_only_and_carry_suggestion() -> None:
    validate_overlay({"spec": {"template": {}}}, forbidden_keys={"template"})
    with pytest.raises(InvalidOverlayError) as info:
        validate_overlay(
            {PUT("template"): {}},
            forbidden_keys={"template"},
            overlay_name="V1Pod",
            suggestion="Put it in the V1Job overlay.",
        )
    msg = str(info.value)
    assert "template" in msg and "V1Pod" in msg and "Put it in the V1Job overlay." in msg


def test_validate_overlay_accepts_clean_overlay() -> None:
    validate_overlay({"spec": {"nodeSelector": {"a": "b"}}}, blocklist=["env"])


@pytest.mark.parametrize(
    ("overlay", "kwargs"),
    [
        ([], {}),
        ({1: 2}, {}),
        ({"a": 1}, {"blocklist": "env"}),
        ({"a": 1}, {"blocklist": [None]}),
    ],
)
def test_validate_overlay_rejects_bad_input(overlay: Any, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidSpecError):
        validate_overlay(overlay, **kwargs)


# --- property tests --------------------------------------------------------------------------

_names = st.text(alphabet="abc", min_size=1, max_size=2)
_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=3)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_names, inner, max_size=3),
    max_leaves=12,
)
_plain = st.dictionaries(_names, _json, max_size=4)


def _with_operators(depth: int = 2) -> st.SearchStrategy[dict[str, Any]]:
    """Overlays with PUT/DEL/plain keys on names a-c and JOIN only on 'j' (never in a base, so
    a JOIN always meets a missing field or a list of dicts it made itself)."""
    value = _json if depth == 0 else (_json | _with_operators(depth - 1))
    item = st.builds(
        lambda name, rest: {**rest, "name": name},
        st.sampled_from(["x", "y"]),
        _plain if depth == 0 else _with_operators(depth - 1),
    )
    entry = st.one_of(
        st.tuples(_names, value),
        st.tuples(_names.map(PUT), value),
        st.tuples(_names.map(DEL), st.none()),
        st.tuples(st.just(JOIN("j", on="name")), st.lists(item, max_size=3)),
    )
    return st.lists(entry, max_size=4).map(dict)


def _operator_keys(value: Any) -> list[str]:
    if isinstance(value, dict):
        own = [k for k in value if _parse_key(k).op is not None]
        return own + [k for v in value.values() for k in _operator_keys(v)]
    if isinstance(value, list):
        return [k for v in value for k in _operator_keys(v)]
    return []


@given(_plain)
def test_law_empty_overlay_is_identity(base: dict[str, Any]) -> None:
    before = copy.deepcopy(base)
    apply_overlay(base, {})
    assert base == before


@given(_plain, _plain)
def test_law_new_keys_leave_existing_keys_untouched(base: dict[str, Any], extra: Any) -> None:
    overlay = {f"new_{k}": v for k, v in extra.items()}
    before = copy.deepcopy(base)
    apply_overlay(base, overlay)
    assert {k: base[k] for k in before} == before
    assert {k: base[k] for k in overlay} == overlay


@given(_plain, _names, _json)
def test_law_put_sets_exactly(base: dict[str, Any], key: str, value: Any) -> None:
    apply_overlay(base, {PUT(key): value})
    assert base[key] == value


@given(_plain, _names)
def test_law_del_removes(base: dict[str, Any], key: str) -> None:
    apply_overlay(base, {DEL(key): None})
    assert key not in base


@given(_plain, _plain, _plain)
def test_law_accumulate_then_resolve_equals_sequential(
    base: dict[str, Any], first: dict[str, Any], second: dict[str, Any]
) -> None:
    # A structural type mismatch is a TypeError: when the overlays one after the other apply
    # cleanly, so does their accumulation, with the same result; and set_overlay only refuses
    # overlays that could never apply one after the other.
    sequential: Any = copy.deepcopy(base)
    try:
        apply_overlay(sequential, first)
        apply_overlay(sequential, second)
    except TypeError:
        sequential = TypeError
    role = _role()
    set_overlay(role, "k", "Pod", first)
    try:
        set_overlay(role, "k", "Pod", second)
    except TypeError:
        for start in (base, {}):
            one_after_the_other = copy.deepcopy(start)
            with pytest.raises(TypeError):
                apply_overlay(one_after_the_other, first)
                apply_overlay(one_after_the_other, second)
        return
    accumulated: Any = copy.deepcopy(base)
    try:
        apply_overlay(accumulated, get_overlay(role, "k", "Pod"))
    except TypeError:
        accumulated = TypeError
    if sequential is not TypeError:
        assert accumulated == sequential


@given(_plain, _with_operators(), _with_operators())
def test_law_no_operator_key_survives_resolution(
    base: dict[str, Any], first: dict[str, Any], second: dict[str, Any]
) -> None:
    # random overlays often mismatch in type (a TypeError): the law is about those that apply
    try:
        apply_overlay(base, first)
    except TypeError:
        pass
    else:
        assert _operator_keys(base) == []
    role = _role()
    try:
        set_overlay(role, "k", "Pod", first)
        set_overlay(role, "k", "Pod", second)
    except TypeError:
        return
    resolved: dict[str, Any] = {}
    apply_overlay(resolved, get_overlay(role, "k", "Pod"))
    assert _operator_keys(resolved) == []


def test_fallback_is_not_used_when_namespace_holds_other_kinds() -> None:
    import warnings

    from anylaunch.specs import Role
    from anylaunch.specs.overlays import get_overlay

    role = Role(name="trainer", image="img", entrypoint="train.py")
    role.metadata["kubernetes"] = {"V1Pod": {"spec": {"hostIPC": True}}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert get_overlay(role, "kubernetes", "V1Job") == {}
