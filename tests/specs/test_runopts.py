"""runopts: registration, resolution, string parsing (with property tests)."""

import json
from typing import Dict, List

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anylaunch.specs import InvalidRunConfigException, runopt, runopts


def opts() -> runopts:
    o = runopts()
    o.add("cluster_name", type_=str, help="cluster", required=True)
    o.add("priority", type_=float, default=0.5, help="priority")
    o.add("retries", type_=int, default=1, help="retries")
    o.add("preemptible", type_=bool, default=False, help="preemptible")
    o.add("tags", type_=list[str], default=["a"], help="tags")
    o.add("labels", type_=dict[str, str], default={}, help="labels")
    return o


def test_resolve_fills_defaults_and_accepts_camel_case() -> None:
    assert opts().resolve({"clusterName": "c1", "retries": 3}) == {
        "cluster_name": "c1",
        "retries": 3,
        "priority": 0.5,
        "preemptible": False,
        "tags": ["a"],
        "labels": {},
    }


def test_unknown_key_has_did_you_mean() -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        opts().resolve({"cluster_name": "c", "prioirty": 1.0})
    assert e.value.field == "prioirty"
    assert "Did you mean 'priority'?" in str(e.value)


def test_missing_required_names_how_to_pass_it() -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        opts().resolve({})
    assert e.value.field == "cluster_name"
    assert "-cfg cluster_name=VALUE" in str(e.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [("retries", "3"), ("retries", True), ("preemptible", "yes"), ("tags", "a,b"), ("tags", [1])],
)
def test_wrong_type_is_rejected(key: str, value: object) -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        opts().resolve({"cluster_name": "c", key: value})
    assert e.value.field == key
    assert e.value.value == value


def test_int_is_accepted_for_float() -> None:
    assert opts().resolve({"cluster_name": "c", "priority": 2})["priority"] == 2


def test_add_rejects_required_with_default_and_bad_default() -> None:
    o = runopts()
    with pytest.raises(ValueError, match="cannot have a default"):
        o.add("x", type_=str, help="", default="d", required=True)
    with pytest.raises(TypeError, match="not of type int"):
        o.add("y", type_=int, help="", default="1")


def test_old_style_typing_generics_are_supported() -> None:
    o = runopts()
    o.add("l", type_=List[str], help="", default=["x"])
    o.add("d", type_=Dict[str, str], help="", default={"k": "v"})
    assert o.cfg_from_str("l=a;b,d=k:1") == {"l": ["a", "b"], "d": {"k": "1"}}


def test_cfg_from_str_trailing_delimiter_rule() -> None:
    o = opts()
    assert o.cfg_from_str("tags=v1,v2,cluster_name=v3") == {
        "tags": ["v1", "v2"],
        "cluster_name": "v3",
    }
    assert o.cfg_from_str("tags=v1;v2,cluster_name=v3") == {
        "tags": ["v1", "v2"],
        "cluster_name": "v3",
    }
    assert o.cfg_from_str("tags=v1,v2,") == {"tags": ["v1", "v2"]}


def test_cfg_from_str_errors() -> None:
    with pytest.raises(InvalidRunConfigException, match="KEY=VALUE"):
        opts().cfg_from_str("no_equals_sign")
    with pytest.raises(InvalidRunConfigException) as e:
        opts().cfg_from_str("retries=many")
    assert e.value.field == "retries"


def test_cfg_from_json_repr() -> None:
    o = opts()
    assert o.cfg_from_json_repr(json.dumps({"tags": ["x", 2], "labels": {"a": 1}, "zzz": 1})) == {
        "tags": ["x", "2"],
        "labels": {"a": "1"},
    }
    with pytest.raises(InvalidRunConfigException, match="not valid JSON"):
        o.cfg_from_json_repr("{")


def test_repr_lists_required_first() -> None:
    text = repr(opts())
    assert text.index("cluster_name") < text.index("priority")
    assert "(required)" in text


# --- properties ----------------------------------------------------------------------------

# items that cannot contain the delimiters of their own syntax
_item = st.text(
    alphabet=st.characters(blacklist_characters=",;=:", blacklist_categories=("Cs",)), min_size=1
)


@given(st.integers())
def test_int_round_trip(n: int) -> None:
    assert runopt(None, int, False, "").cast_to_type(str(n)) == n


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_round_trip(x: float) -> None:
    assert runopt(None, float, False, "").cast_to_type(repr(x)) == x


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "Infinity", "NaN"])
def test_float_refuses_non_finite_text(text: str) -> None:
    with pytest.raises(ValueError, match="finite"):
        runopt(None, float, False, "").cast_to_type(text)


@given(st.booleans())
def test_bool_round_trip(b: bool) -> None:
    assert runopt(None, bool, False, "").cast_to_type(str(b)) is b


@given(st.lists(_item, min_size=1), st.sampled_from([",", ";"]))
def test_list_round_trip(items: list[str], sep: str) -> None:
    assert runopt(None, list[str], False, "").cast_to_type(sep.join(items)) == items


@given(
    st.dictionaries(
        _item,
        st.text(alphabet=st.characters(blacklist_characters=",;=", blacklist_categories=("Cs",))),
    )
)
def test_dict_round_trip(d: dict[str, str]) -> None:
    text = ",".join(f"{k}:{v}" for k, v in d.items())
    assert runopt(None, dict[str, str], False, "").cast_to_type(text) == d


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "cluster_name": _item,
            "retries": st.integers(),
            "preemptible": st.booleans(),
            "tags": st.lists(_item, min_size=1),
        },
    ),
    st.sampled_from([",", ";"]),
)
def test_cfg_from_str_round_trip(cfg: dict[str, object], sep: str) -> None:
    def render(value: object) -> str:
        return sep.join(value) if isinstance(value, list) else str(value)

    text = ",".join(f"{k}={render(v)}" for k, v in cfg.items())
    assert opts().cfg_from_str(text) == cfg
