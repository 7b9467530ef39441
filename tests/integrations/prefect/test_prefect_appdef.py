"""The ``app`` field of an AnylaunchJob: an AppDef, its dict form or YAML text; what cannot be
launched is refused when the block is made. (The converter itself, anylaunch.specs.serialize,
is tested in tests/specs/test_serialize.py.)"""

import pytest
from pydantic import ValidationError

import anylaunch.specs as specs
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.serialize import appdef_to_dict, appdef_to_yaml
from prefect_anylaunch import AnylaunchJob
from prefect_anylaunch.appdef import appdef_from_data

APP = specs.AppDef(
    "typed",
    [
        specs.Role(
            "w",
            image=".",
            entrypoint="echo",
            args=["hi"],
            env={"A": "1"},
            resource=specs.resource(h="cpu.small"),
            mounts=specs.parse_mounts(["type=bind,src=/data,dst=/mnt,readonly"]),
        )
    ],
)


# also run in each engine version's own environment (scripts/engine_envs.sh)
pytestmark = pytest.mark.engine_matrix


@pytest.mark.parametrize(
    "given", [APP, appdef_to_dict(APP), appdef_to_yaml(APP)], ids=["AppDef", "dict", "yaml"]
)
def test_every_form_gives_the_same_app_and_the_block_stores_plain_data(given: object) -> None:
    app = appdef_from_data(given)  # type: ignore[arg-type]
    assert app == APP
    assert app is not APP  # a copy: the block never shares the caller's AppDef

    job = AnylaunchJob(app=given)
    assert job.app == appdef_to_dict(APP) or job.app == appdef_to_yaml(APP)
    assert job.build_app() == APP


@pytest.mark.parametrize(
    "given, expected",
    [
        ({"name": "empty"}, "AppDef.roles=[] is invalid: an app needs at least one role"),
        ("name: [oops", "is not valid YAML"),
        ({"name": "a", "roles": [{"name": "r", "image": ".", "entrypont": "x"}]}, "entrypoint"),
    ],
)
def test_what_cannot_be_launched_is_refused_naming_the_field(given: object, expected: str) -> None:
    with pytest.raises(InvalidSpecError) as info:
        appdef_from_data(given)  # type: ignore[arg-type]
    assert expected in str(info.value)
    # and already when the block is made, not at launch
    with pytest.raises((ValidationError, InvalidSpecError)) as made:
        AnylaunchJob(app=given)
    assert expected in str(made.value)


def test_a_value_of_another_type_is_refused() -> None:
    with pytest.raises(InvalidSpecError, match="must be an AppDef, a dict or YAML text of one"):
        appdef_from_data(42)  # type: ignore[arg-type]
