"""Overlays where TorchX HEAD's ``specs/overlays.py`` documents behaviour for odd stored
values: a namespace that is no dict holds no overlay (get: ``{}``; set: replaced, with a
warning), and a legacy flat namespace is read whole, with a warning, unless it looks nested
(several keys all holding dicts)."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import pytest

from anylaunch.specs import AppDef, Role
from anylaunch.specs.overlays import (
    JOIN,
    PUT,
    InvalidOverlayError,
    OverlayTypeError,
    apply_overlay,
    get_overlay,
    set_overlay,
)

LOGGER = "anylaunch.specs.overlays"


def _role(metadata: dict[str, Any] | None = None) -> Role:
    role = Role(name="trainer", image="img", entrypoint="train.py")
    if metadata is not None:
        role.metadata = metadata
    return role


@pytest.mark.parametrize("stored", [42, 1.5, True, ["a"], ("t",), b"bytes"])
def test_get_overlay_of_a_non_dict_namespace_is_empty_with_a_warning(
    stored: object, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert get_overlay(_role({"kubernetes": stored}), "kubernetes", "V1Pod") == {}
    assert f"holds a {type(stored).__name__}" in caplog.text


@pytest.mark.parametrize("stored", [42, ["a"], b"bytes"])
def test_set_overlay_replaces_a_non_dict_namespace_with_a_warning(
    stored: object, caplog: pytest.LogCaptureFixture
) -> None:
    app = AppDef("a", roles=[_role()])
    app.metadata = {"kubernetes": stored}  # type: ignore[dict-item]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        set_overlay(app, "kubernetes", "V1Job", {"spec": {"parallelism": 2}})
    assert get_overlay(app, "kubernetes", "V1Job") == {"spec": {"parallelism": 2}}
    assert "replacing it" in caplog.text


def test_set_overlay_replaces_a_non_dict_kind_entry(caplog: pytest.LogCaptureFixture) -> None:
    role = _role({"k8s": {"V1Pod": "not an overlay", "V1Job": {"x": 1}}})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        set_overlay(role, "k8s", "V1Pod", {"spec": {"hostIPC": True}})
    assert get_overlay(role, "k8s", "V1Pod") == {"spec": {"hostIPC": True}}
    assert get_overlay(role, "k8s", "V1Job") == {"x": 1}  # the other kind is kept
    assert "metadata['k8s']['V1Pod'] holds a str" in caplog.text


def test_get_overlay_of_a_non_dict_kind_entry_names_it() -> None:
    # TorchX would read such a namespace as a flat overlay; a stored overlay that is no dict
    # is a mistake worth naming (a deliberate difference)
    with pytest.raises(InvalidOverlayError, match=r"metadata\['k8s'\]\['V1Pod'\]"):
        get_overlay(_role({"k8s": {"V1Pod": 5}}), "k8s", "V1Pod")


@pytest.mark.parametrize(
    "namespace",
    [
        {"spec": {"hostIPC": True}},  # one dict-valued field
        {"spec": {"hostIPC": True}, "priority": 3},  # mixed values
        {"priority": 3},  # scalars only
        {"spec": {}, "tags": ["a"]},  # not all values dicts
    ],
)
def test_a_legacy_flat_namespace_is_the_overlay_with_a_logged_and_a_deprecation_warning(
    namespace: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    role = _role({"k8s": namespace})
    with (
        caplog.at_level(logging.WARNING, logger=LOGGER),
        pytest.warns(DeprecationWarning, match="flat V1Pod overlay"),
    ):
        got = get_overlay(role, "k8s", "V1Pod")
    assert got == namespace and got is not namespace
    assert "overlay kind 'V1Pod' not found in metadata['k8s']" in caplog.text
    assert "set_overlay(target, 'k8s', 'V1Pod', overlay)" in caplog.text


@pytest.mark.parametrize(
    "namespace",
    [
        {"spec": {"a": 1}, "metadata": {"b": 2}},  # several keys, all dicts: kinds (TorchX)
        {"V1Job": {"spec": {}}},  # a key named like a kind (ours)
        {"__anylaunch_overlays__": True, "spec": {}},  # written by set_overlay (ours)
        {},
    ],
)
def test_namespaces_that_look_nested_are_never_read_as_flat(
    namespace: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            assert get_overlay(_role({"k8s": namespace}), "k8s", "V1Pod") == {}
    assert "flat" not in caplog.text


def test_flat_fallback_false_reads_no_flat_namespace() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        role = _role({"k8s": {"spec": {"a": 1}}})
        assert get_overlay(role, "k8s", "V1Pod", flat_fallback=False) == {}


# --- structural errors: TorchX's exception types ---------------------------------------------


@pytest.mark.parametrize(
    ("base", "overlay"),
    [
        ({"a": [1]}, {"a": {"b": 1}}),  # dict meets list
        ({"a": {"b": 1}}, {"a": [1]}),  # list meets dict
        ({"a": "s"}, {"a": [1]}),  # list meets str
        ({"a": [1]}, {JOIN("a", on="n"): 1}),  # JOIN value not a list
        ({"a": [1]}, {JOIN("a", on="n"): [{"n": 1}]}),  # JOIN into non-dict items
        ({"a": 1}, {JOIN("a", on="n"): [{"n": 1}]}),  # JOIN into a non-list
    ],
)
def test_type_mismatches_are_type_errors(base: dict[str, Any], overlay: dict[str, Any]) -> None:
    before = repr(base)
    with pytest.raises(TypeError) as err:
        apply_overlay(base, overlay)
    assert isinstance(err.value, OverlayTypeError)
    assert repr(base) == before  # nothing half-applied


@pytest.mark.parametrize("overlay", [{"__join__:a": []}, {"__join__:a:": []}])
def test_malformed_join_keys_are_value_errors(overlay: dict[str, Any]) -> None:
    with pytest.raises(ValueError) as err:
        apply_overlay({"a": []}, overlay)
    assert isinstance(err.value, InvalidOverlayError)


def test_put_replaces_where_a_plain_key_would_mismatch() -> None:
    base: dict[str, Any] = {"a": [1]}
    apply_overlay(base, {PUT("a"): {"b": 1}})
    assert base == {"a": {"b": 1}}
