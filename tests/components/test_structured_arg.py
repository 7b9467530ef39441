"""anylaunch.components.structured_arg: the ``--name`` and ``-j`` parsers of dist.ddp/spmd."""

from __future__ import annotations

import warnings

import pytest

from anylaunch.components import get_components
from anylaunch.components.dist import ddp, spmd
from anylaunch.components.structured_arg import (
    DEFAULT_EXPERIMENT_NAME,
    StructuredJArgument,
    StructuredNameArgument,
)
from anylaunch.specs.errors import InvalidSpecError

N = StructuredNameArgument


@pytest.mark.parametrize(
    ("name", "kwargs", "expected"),
    [
        ("foo/bar", {"script": "x/baz.py"}, N("foo", "bar")),
        ("foo/", {"script": "x/baz.py"}, N("foo", "baz")),
        ("/bar", {"script": "x/baz.py"}, N(DEFAULT_EXPERIMENT_NAME, "bar")),
        ("bar", {"m": "foo.bar"}, N(DEFAULT_EXPERIMENT_NAME, "bar")),
        ("/", {"m": "foo.bar.baz"}, N(DEFAULT_EXPERIMENT_NAME, "baz")),
        ("", {"m": "foo"}, N(DEFAULT_EXPERIMENT_NAME, "foo")),
        ("foo/bar/baz", {"m": "m"}, N("foo", "bar/baz")),  # the first / splits
        (" foo / bar ", {"m": "m"}, N("foo", "bar")),
    ],
)
def test_name_argument(name: str, kwargs: dict[str, str], expected: N) -> None:
    assert N.parse_from(name, **kwargs) == expected


def test_name_argument_default_experiment_and_str() -> None:
    got = N.parse_from("/r", m="a.b", default_experiment_name="team")
    assert got == N("team", "r") and str(got) == "team/r"


@pytest.mark.parametrize("kwargs", [{}, {"m": "a", "script": "b.py"}, {"m": " "}])
def test_name_argument_needs_exactly_one_program(kwargs: dict[str, str]) -> None:
    with pytest.raises(ValueError):  # InvalidSpecError is a ValueError, as TorchX raises
        N.parse_from("foo/bar", **kwargs)


def test_name_argument_rejects_a_non_str_name() -> None:
    with pytest.raises(InvalidSpecError) as info:
        N.parse_from(3, m="a")  # type: ignore[arg-type]
    assert info.value.field == "name"


J = StructuredJArgument


@pytest.mark.parametrize(
    ("h", "j", "expected", "text"),
    [
        ("aws_p4d.24xlarge", "2", J(2, 8), "2x8"),
        ("aws_p4d.24xlarge", "2x8", J(2, 8), "2x8"),
        ("aws_p4d.24xlarge", "1:3", J(3, 8, min_nnodes=1), "1:3x8"),
        ("aws_trn1.32xlarge", "2x16", J(2, 16), "2x16"),
        ("cpu.small", "1x1", J(1, 1), "1x1"),
    ],
)
def test_j_argument(h: str, j: str, expected: J, text: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: the count matches, or the host has no GPU
        got = J.parse_from(h, j)
    assert got == expected and str(got) == text


def test_j_argument_repr_omits_an_unset_min() -> None:
    assert repr(J(2, 4)) == "StructuredJArgument(nnodes=2, nproc_per_node=4)"
    assert (
        repr(J(4, 8, min_nnodes=1))
        == "StructuredJArgument(nnodes=4, nproc_per_node=8, min_nnodes=1)"
    )


def test_j_argument_warns_when_nproc_differs_from_the_gpus() -> None:
    with pytest.warns(UserWarning, match="aws_p4d.24xlarge has 8 GPU"):
        assert J.parse_from("aws_p4d.24xlarge", "2x4") == J(2, 4)


def test_j_argument_cannot_infer_nproc_without_gpus() -> None:
    with pytest.raises(ValueError, match="no GPUs"):
        J.parse_from("aws_trn1.32xlarge", "2")


@pytest.mark.parametrize("j", ["", "2x", "ax2", "1x2x3", "1:x2", 7])
def test_j_argument_rejects_what_is_not_a_topology(j: object) -> None:
    with pytest.raises(InvalidSpecError) as info:
        J.parse_from("gpu.small", j)  # type: ignore[arg-type]
    assert info.value.field == "j"


def test_dist_components_use_the_parsers() -> None:
    role = ddp(script="a/train.py", name="exp/", j="1x2").roles[0]
    names = N.parse_from("exp/", script="a/train.py")
    assert role.env["ANYLAUNCH_TRACKING_EXPERIMENT_NAME"] == names.experiment_name == "exp"
    assert role.env["ANYLAUNCH_TRACKING_RUN_NAME"] == names.run_name == "train"
    app = spmd(m="pkg.trainer", h="gpu.medium", j="3")
    assert app.roles[0].num_replicas == J.parse_from("gpu.medium", "3").nnodes == 3


def test_the_module_holds_no_component() -> None:
    assert not [n for n in get_components(include_invalid=True) if n.startswith("structured")]
