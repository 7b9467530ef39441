"""Bad input to the spec layer gets the project's error naming the field, never an internal
exception (AttributeError, KeyError, TypeError) from inside, and never echoes a secret."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from anylaunch.runner import get_runner
from anylaunch.specs import AppDef, AppStatus, Resource, Role, parse_mounts
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.runopts import runopts


def _role(**kwargs: Any) -> Role:
    return Role("w", image="img", entrypoint="echo", **kwargs)


def _dryrun(cfg: Any) -> Any:
    with get_runner() as runner:
        return runner.dryrun(AppDef("a", [_role()]), "local_cwd", cfg=cfg)


CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("port_map list", lambda: _role(port_map=[8080]), "port_map"),
    ("port_map int key", lambda: _role(port_map={1: 8080}), "port_map"),
    ("devices list", lambda: Resource(cpu=1, gpu=0, memMB=1, devices=[1]), "devices"),
    ("capabilities list", lambda: Resource(cpu=1, gpu=0, memMB=1, capabilities=[]), "capabilities"),
    ("mounts not a list", lambda: _role(mounts="type=bind"), "mounts"),
    ("too many replicas", lambda: _role(num_replicas=100_000_000), "num_replicas"),
    ("too many retries", lambda: _role(max_retries=10**9), "max_retries"),
    ("resolve a list", lambda: runopts().resolve([1]), "cfg"),  # type: ignore[arg-type]
    ("cfg int key", lambda: _dryrun({1: "x"}), "cfg"),
    ("parse_mounts None", lambda: parse_mounts(None), "mounts"),  # type: ignore[arg-type]
    ("parse_mounts ints", lambda: parse_mounts([1]), "mounts[0]"),  # type: ignore[list-item]
    ("status bogus state", lambda: AppStatus.from_dict({"state": "BOGUS"}), "state"),
    ("status not a dict", lambda: AppStatus.from_dict([]), "data"),  # type: ignore[arg-type]
    (
        "status replica bogus",
        lambda: AppStatus.from_dict(
            {"state": "RUNNING", "roles": [{"role": "w", "replicas": [{"id": 0, "state": 99}]}]}
        ),
        "state",
    ),
    ("status bad roles", lambda: AppStatus.from_dict({"state": "RUNNING", "roles": [1]}), "data"),
]


@pytest.mark.parametrize(("make", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_names_the_field(make: Callable[[], Any], field: str) -> None:
    with pytest.raises(InvalidSpecError) as err:
        make()
    assert field in err.value.field


def test_a_misspelt_run_option_never_echoes_its_value() -> None:
    with pytest.raises(InvalidSpecError) as err:
        _dryrun({"log_dri": "hunter2-s3cr3t"})
    assert "hunter2-s3cr3t" not in str(err.value)
    assert "log_dir" in str(err.value)  # the did-you-mean still helps


def test_non_finite_run_option_and_component_arg_values_are_rejected() -> None:
    with pytest.raises(InvalidSpecError) as err:
        _dryrun({"cancel_grace_s": float("inf")})
    assert err.value.field == "cancel_grace_s"
    from anylaunch.specs.builders import materialize_appdef

    def component(lr: float = 0.1) -> AppDef:
        return AppDef("a", [_role(args=[str(lr)])])

    for bad in ("nan", "inf", "-inf"):
        with pytest.raises(Exception, match="finite"):
            materialize_appdef(component, [f"--lr={bad}"])
