"""AppDefs as plain data: any AppDef survives the dict, JSON and YAML forms; bad data is named
with a fix; the forms people write by hand (named resources, docker-style mounts, describe
output) are accepted."""

import json
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import anylaunch.specs as specs
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.serialize import (
    appdef_from_dict,
    appdef_from_yaml,
    appdef_to_dict,
    appdef_to_yaml,
)

TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=12)
NAME = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,10}", fullmatch=True)
ENV_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)
SCALAR = st.one_of(TEXT, st.integers(-(10**6), 10**6), st.booleans(), st.none())
# free-form fields may nest JSON-like data
JSONISH = st.recursive(
    SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(NAME, inner, max_size=3)),
    max_leaves=6,
)

RESOURCES = st.one_of(
    st.just(specs.NULL_RESOURCE),
    st.builds(
        specs.Resource,
        cpu=st.integers(0, 128),
        gpu=st.integers(0, 8),
        memMB=st.integers(0, 10**6),
        capabilities=st.dictionaries(ENV_NAME, JSONISH, max_size=2),
        devices=st.dictionaries(NAME, st.integers(0, 4), max_size=2),
        tags=st.dictionaries(NAME, SCALAR, max_size=2),
    ),
    st.sampled_from(["cpu.small", "gpu.small"]).map(lambda h: specs.resource(h=h)),
)
# a workspace maps non-blank local paths to sub-directories inside the remote root
WS_LOCAL = TEXT.filter(str.strip)
WS_REMOTE = TEXT.filter(
    lambda t: not t.startswith(("/", "\\")) and ".." not in re.split(r"[/\\]", t)
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
        image=draw(TEXT.filter(lambda t: not t or t.strip())),  # a blank image cannot work
        entrypoint=draw(TEXT.filter(bool)),
        args=draw(st.lists(TEXT, max_size=4)),
        env=draw(st.dictionaries(ENV_NAME, TEXT, max_size=3)),
        num_replicas=num_replicas,
        min_replicas=draw(st.one_of(st.none(), st.integers(1, num_replicas))),
        max_retries=draw(st.integers(0, 3)),
        retry_policy=draw(st.sampled_from(list(specs.RetryPolicy))),
        resource=draw(RESOURCES),
        port_map=draw(st.dictionaries(NAME, st.integers(1, 65535), max_size=2)),
        metadata=draw(st.dictionaries(NAME, JSONISH, max_size=2)),
        mounts=draw(st.lists(MOUNTS, max_size=2)),
        workspace=draw(
            st.one_of(
                st.none(),
                st.builds(
                    specs.Workspace, st.dictionaries(WS_LOCAL, WS_REMOTE, min_size=1, max_size=2)
                ),
            )
        ),
        overrides=draw(st.dictionaries(NAME, JSONISH, max_size=2)),
    )


@st.composite
def appdefs(draw: st.DrawFn) -> specs.AppDef:
    names = draw(st.lists(NAME, min_size=0, max_size=3, unique=True))
    return specs.AppDef(
        name=draw(NAME),
        roles=[draw(roles(name)) for name in names],
        metadata=draw(st.dictionaries(NAME, JSONISH, max_size=2)),
    )


@settings(max_examples=150, deadline=None)
@given(appdefs())
def test_any_appdef_survives_the_dict_json_and_yaml_forms(app: specs.AppDef) -> None:
    data = appdef_to_dict(app)

    assert appdef_from_dict(data) == app
    assert json.loads(json.dumps(data)) == data  # JSON-friendly as it is
    assert appdef_from_dict(json.loads(json.dumps(data))) == app
    assert appdef_from_yaml(appdef_to_yaml(app)) == app
    assert appdef_from_yaml(json.dumps(data)) == app  # JSON text is YAML too
    assert appdef_to_dict(appdef_from_dict(data)) == data


def test_the_dict_names_enums_and_mount_types() -> None:
    role = specs.Role(
        "r",
        image=".",
        entrypoint="echo",
        retry_policy=specs.RetryPolicy.REPLICA,
        mounts=specs.parse_mounts(
            ["type=bind,src=/a,dst=/b", "type=volume,src=v,dst=/v", "type=device,src=/dev/x"]
        ),
    )
    data = appdef_to_dict(specs.AppDef("a", [role]))["roles"][0]

    assert data["retry_policy"] == "REPLICA"
    assert [m["type"] for m in data["mounts"]] == ["bind", "volume", "device"]
    # a mount written without its type: the keys tell
    untyped = [{k: v for k, v in m.items() if k != "type"} for m in data["mounts"]]
    again = appdef_from_dict({"name": "a", "roles": [{**data, "mounts": untyped}]})
    assert again.roles[0].mounts == role.mounts


def test_other_values_become_their_str() -> None:
    from datetime import date

    app = specs.AppDef(
        "a",
        [specs.Role("r", image=".", entrypoint="x")],
        metadata={"day": date(2024, 1, 2), "pair": (1, 2)},
    )

    assert appdef_to_dict(app)["metadata"] == {"day": "2024-01-02", "pair": [1, 2]}


def _app(**role_fields: object) -> dict:
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
        ({"name": "a", "metadata": [1]}, "AppDef.metadata='list' is invalid: must be a mapping"),
        ({"name": "a", "roles": ["r"]}, "roles[0]='str' is invalid: must be a mapping"),
        (
            {"name": "a", "roles": [{"name": "r", "image": "."}]},
            "roles[0].entrypoint=None is invalid: is required",
        ),
        (
            _app(num_replica=2),
            "Role[r].num_replica=2 is invalid: is not a field of Role. Fix: Did you mean 'num_replicas'?",
        ),
        (_app(args="--lr 1"), "Role[r].args='--lr 1' is invalid: must be a list"),
        (_app(env=["A=1"]), "Role[r].env='list' is invalid: must be a mapping"),
        (_app(env={"TOKEN": 123}), "Role[r].env['TOKEN']='<int>' is invalid: must be a str"),
        (_app(num_replicas=0), "Role[r].num_replicas=0 is invalid"),
        (_app(resource={"cpu": 1, "gpu": 0}), "misses memMB"),
        (
            _app(resource={"cpu": 1, "gpu": 0, "memMB": 1, "mem": 2}),
            "Role[r].resource.mem=2 is invalid: is not a field of Resource. Fix: Did you mean 'memMB'?",
        ),
        (_app(resource={"cpu": "two", "gpu": 0, "memMB": 1}), "Resource.cpu='two' is invalid"),
        (_app(resource="gpu.smal"), "gpu.small"),
        (
            _app(mounts=[{"type": "nfs", "src": "x"}]),
            "Role[r].mounts[0].type='nfs' is invalid: is not a mount type",
        ),
        (_app(mounts=[{"src_path": "/a"}]), "a bind mount needs dst_path"),
        (
            _app(mounts=[{"type": "bind", "src_path": "/a", "dst_path": "/b", "read_only": "yes"}]),
            "Role[r].mounts[0].read_only='yes' is invalid: must be a bool",
        ),
        (
            _app(mounts=[{"type": "volume", "src": "v", "dst_path": "/v", "permissions": "r"}]),
            "Role[r].mounts[0].permissions='r' is invalid: is not a field of a volume mount",
        ),
        (_app(mounts=["type=bind,src=/a"]), "needs src and dst"),
        (
            _app(retry_policy="SOMETIMES"),
            "Role[r].retry_policy='SOMETIMES' is invalid: is not a RetryPolicy",
        ),
        (_app(workspace={"project": {".": ""}}), "Did you mean 'projects'?"),
    ],
)
def test_bad_data_is_named_with_the_fix(data: dict, expected: str) -> None:
    # (an unknown named resource raises the core's UnknownNamedResourceError, a LookupError)
    with pytest.raises((InvalidSpecError, LookupError)) as info:
        appdef_from_dict(data)
    assert expected in str(info.value)
    assert "Fix:" in str(info.value) or isinstance(info.value, LookupError)


def test_a_secret_env_value_never_shows_in_the_error() -> None:
    with pytest.raises(InvalidSpecError) as info:
        appdef_from_dict(_app(env={"TOKEN": ["s3cr3t-value"]}))
    assert "s3cr3t-value" not in str(info.value)


def test_hand_written_forms_and_describe_output_are_accepted() -> None:
    data = _app(
        mounts=["type=bind,src=/data,dst=/mnt,readonly"], resource="cpu.small", workspace="."
    )
    app = appdef_from_dict({"app_handle": "local_cwd://s/a-1", "AppDef": data})

    role = app.roles[0]
    assert role.mounts == [specs.BindMount("/data", "/mnt", True)]
    assert role.resource == specs.resource(h="cpu.small")
    assert role.workspace == specs.Workspace({".": ""})
    assert (role.num_replicas, role.retry_policy) == (1, specs.RetryPolicy.APPLICATION)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("name: [oops", "is not valid YAML"),
        ("- a\n- b\n", "is YAML of a list, not of a mapping"),
        ("", "is YAML of a NoneType"),
        (
            "name: a\nroles: [{name: r, image: ., entrypoint: x, num_replicas: -1}]",
            "num_replicas=-1",
        ),
    ],
)
def test_bad_yaml_is_named(text: str, expected: str) -> None:
    with pytest.raises(InvalidSpecError, match="Fix:") as info:
        appdef_from_yaml(text)
    assert expected in str(info.value)


@pytest.mark.parametrize("bad", [None, {"name": "a"}, "name: a"])
def test_to_dict_and_to_yaml_want_an_appdef(bad: object) -> None:
    with pytest.raises(InvalidSpecError, match="must be an AppDef"):
        appdef_to_dict(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="must be an AppDef"):
        appdef_to_yaml(bad)  # type: ignore[arg-type]


def test_from_yaml_wants_text() -> None:
    with pytest.raises(InvalidSpecError, match="must be YAML text"):
        appdef_from_yaml(b"name: a")  # type: ignore[arg-type]


def test_importing_specs_does_not_import_serialize_or_yaml() -> None:
    code = "import sys, anylaunch.specs; print(sorted(m for m in sys.modules if m in {'yaml', 'anylaunch.specs.serialize'}))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"
    code = "import sys, anylaunch.specs.serialize; print('yaml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "False"  # yaml is imported on the first YAML call
