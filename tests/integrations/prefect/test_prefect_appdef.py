"""AppDefs as block data: any AppDef survives the dict and the YAML form; bad data is named."""

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import anylaunch.specs as specs
from anylaunch.specs.errors import InvalidSpecError
from prefect_anylaunch.appdef import appdef_from_data, appdef_from_dict, appdef_to_dict

TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=12)
NAME = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,10}", fullmatch=True)
ENV_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)
SCALAR = st.one_of(TEXT, st.integers(-(10**6), 10**6), st.booleans(), st.none())

RESOURCES = st.one_of(
    st.just(specs.NULL_RESOURCE),
    st.builds(
        specs.Resource,
        cpu=st.integers(0, 128),
        gpu=st.integers(0, 8),
        memMB=st.integers(0, 10**6),
        capabilities=st.dictionaries(ENV_NAME, SCALAR, max_size=2),
        devices=st.dictionaries(NAME, st.integers(0, 4), max_size=2),
        tags=st.dictionaries(NAME, SCALAR, max_size=2),
    ),
    st.sampled_from(["cpu.small", "gpu.small"]).map(lambda h: specs.resource(h=h)),
)
MOUNTS = st.one_of(
    st.builds(specs.BindMount, TEXT, TEXT, st.booleans()),
    st.builds(specs.VolumeMount, TEXT, TEXT, st.booleans()),
    st.builds(specs.DeviceMount, TEXT, TEXT, st.sampled_from(["r", "rw", "rwm"])),
)


@st.composite
def roles(draw: st.DrawFn, name: str) -> specs.Role:
    num_replicas = draw(st.integers(1, 4))
    return specs.Role(
        name=name,
        image=draw(TEXT),
        entrypoint=draw(TEXT.filter(bool)),
        args=draw(st.lists(TEXT, max_size=4)),
        env=draw(st.dictionaries(ENV_NAME, TEXT, max_size=3)),
        num_replicas=num_replicas,
        min_replicas=draw(st.one_of(st.none(), st.integers(1, num_replicas))),
        max_retries=draw(st.integers(0, 3)),
        retry_policy=draw(st.sampled_from(list(specs.RetryPolicy))),
        resource=draw(RESOURCES),
        port_map=draw(st.dictionaries(NAME, st.integers(1, 65535), max_size=2)),
        metadata=draw(st.dictionaries(NAME, SCALAR, max_size=2)),
        mounts=draw(st.lists(MOUNTS, max_size=2)),
        workspace=draw(
            st.one_of(
                st.none(),
                st.builds(specs.Workspace, st.dictionaries(TEXT, TEXT, min_size=1, max_size=2)),
            )
        ),
        overrides=draw(st.dictionaries(NAME, SCALAR, max_size=2)),
    )


@st.composite
def appdefs(draw: st.DrawFn) -> specs.AppDef:
    names = draw(st.lists(NAME, min_size=1, max_size=3, unique=True))
    return specs.AppDef(
        name=draw(NAME),
        roles=[draw(roles(name)) for name in names],
        metadata=draw(st.dictionaries(NAME, SCALAR, max_size=2)),
    )


@settings(max_examples=100, deadline=None)
@given(appdefs())
def test_any_appdef_survives_the_dict_and_yaml_forms(app: specs.AppDef) -> None:
    data = appdef_to_dict(app)
    assert appdef_from_dict(data) == app
    assert appdef_from_data(yaml.safe_dump(data)) == app
    assert appdef_from_data(app) == app


def _app(**role_fields) -> dict:
    role = {"name": "r", "image": ".", "entrypoint": "echo", **role_fields}
    return {"name": "a", "roles": [role]}


@pytest.mark.parametrize(
    "data, expected",
    [
        (
            {"nmae": "a"},
            "AppDef.nmae='a' is invalid: is not a field of AppDef. Fix: Did you mean 'name'?",
        ),
        ({"roles": []}, "AppDef.name=None is invalid: is required"),
        ({"name": "a", "roles": {"r": {}}}, "AppDef.roles='dict' is invalid: must be a list"),
        (
            {"name": "a", "roles": [{"name": "r", "image": "."}]},
            "roles[0].entrypoint=None is invalid: is required",
        ),
        (_app(num_replica=2), "Did you mean 'num_replicas'?"),
        (_app(args="--lr 1"), "Role[r].args='--lr 1' is invalid: must be a list"),
        (_app(num_replicas=0), "Role[r].num_replicas=0 is invalid"),
        (_app(resource={"cpu": 1, "gpu": 0}), "misses memMB"),
        (_app(resource={"cpu": 1, "gpu": 0, "memMB": 1, "mem": 2}), "Did you mean 'memMB'?"),
        (_app(resource="gpu.smal"), "gpu.small"),
        (_app(mounts=[{"type": "nfs", "src": "x"}]), "is not a mount type"),
        (_app(mounts=[{"src_path": "/a"}]), "a bind mount needs dst_path"),
        (_app(mounts=["type=bind,src=/a"]), "needs src and dst"),
        (_app(retry_policy="SOMETIMES"), "is not a RetryPolicy"),
    ],
)
def test_bad_data_is_named_with_the_fix(data: dict, expected: str) -> None:
    # (an unknown named resource raises the core's UnknownNamedResourceError, a LookupError)
    with pytest.raises((InvalidSpecError, LookupError)) as info:
        appdef_from_dict(data)
    assert expected in str(info.value)


def test_docker_style_mounts_named_resources_and_describe_output_are_accepted() -> None:
    data = _app(
        mounts=["type=bind,src=/data,dst=/mnt,readonly"], resource="cpu.small", workspace="."
    )
    app = appdef_from_dict({"app_handle": "local_cwd://s/a-1", "AppDef": data})

    role = app.roles[0]
    assert role.mounts == [specs.BindMount("/data", "/mnt", True)]
    assert role.resource == specs.resource(h="cpu.small")
    assert role.workspace == specs.Workspace({".": ""})
