"""The spec data model: validation errors, macros, statuses, mounts, handles, workspaces."""

import json
import os
from typing import Any

import pytest
import yaml

from anylaunch.runner import get_runner
from anylaunch.specs import (
    AppDef,
    AppState,
    AppStatus,
    AppStatusError,
    BindMount,
    DeviceMount,
    InvalidSpecError,
    MalformedAppHandleException,
    ReplicaStatus,
    Resource,
    RetryPolicy,
    Role,
    RoleStatus,
    VolumeMount,
    Workspace,
    macros,
    make_app_handle,
    parse_app_handle,
    parse_mounts,
)


def role(**kw: object) -> Role:
    base: dict[str, object] = {"name": "trainer", "image": "img", "entrypoint": "train.py"}
    base.update(kw)
    return Role(**base)  # type: ignore[arg-type]


# --- validation: each bad input names the field, the value and the fix -----------------------


def test_app_without_roles_is_rejected_at_validation() -> None:
    app = AppDef(name="empty")
    with pytest.raises(InvalidSpecError) as e:
        app.validate()
    assert e.value.field == "AppDef.roles"
    assert "at least one role" in str(e.value) and "Fix:" in str(e.value)


@pytest.mark.parametrize("name", ["", "has space", "a/b", "x,y", "-lead", None])
def test_role_name_must_be_identifier_safe(name: object) -> None:
    with pytest.raises(InvalidSpecError) as e:
        role(name=name)
    assert e.value.field == "Role.name"
    assert e.value.value == name
    assert "rename the role" in str(e.value)


@pytest.mark.parametrize("name", ["trainer", "worker-0", "ps_1", "my.module", "0rank"])
def test_role_name_accepts_safe_names(name: str) -> None:
    assert role(name=name).name == name


@pytest.mark.parametrize("n", [0, -1])
def test_num_replicas_at_least_one(n: int) -> None:
    with pytest.raises(InvalidSpecError) as e:
        role(num_replicas=n)
    assert e.value.field == "Role[trainer].num_replicas"
    assert e.value.value == n
    assert "1 <= num_replicas" in str(e.value)


def test_min_replicas_cannot_exceed_num_replicas() -> None:
    with pytest.raises(InvalidSpecError) as e:
        role(num_replicas=2, min_replicas=3)
    assert e.value.field == "Role[trainer].min_replicas"
    assert "num_replicas=2" in str(e.value)
    assert role(num_replicas=3, min_replicas=2).min_replicas == 2


@pytest.mark.parametrize("field", ["cpu", "gpu", "memMB"])
def test_negative_resources_rejected(field: str) -> None:
    values = {"cpu": 1, "gpu": 0, "memMB": 128, field: -2}
    with pytest.raises(InvalidSpecError) as e:
        Resource(**values)  # type: ignore[arg-type]
    assert e.value.field == f"Resource.{field}"
    assert e.value.value == -2


def test_bool_is_not_a_resource_count() -> None:
    with pytest.raises(InvalidSpecError, match="must be an int"):
        Resource(cpu=True, gpu=0, memMB=1)


def test_role_validation_rechecks_mutations() -> None:
    r = role()
    app = AppDef(name="a", roles=[r])
    r.num_replicas = 0
    with pytest.raises(InvalidSpecError, match="num_replicas"):
        app.validate()


def test_non_string_args_rejected_with_fix() -> None:
    with pytest.raises(InvalidSpecError, match=r"str\(lr\)"):
        role(args=["--lr", 0.1])


def test_env_value_error_does_not_echo_the_value() -> None:
    secret = 123456789
    with pytest.raises(InvalidSpecError) as e:
        role(env={"API_TOKEN": secret})
    assert str(secret) not in str(e.value)
    assert "API_TOKEN" in str(e.value)


def test_duplicate_role_names_rejected() -> None:
    with pytest.raises(InvalidSpecError, match="two roles have this name"):
        AppDef(name="a", roles=[role(), role()])


def test_retry_policy_string_is_coerced_and_bad_one_rejected() -> None:
    assert role(retry_policy="REPLICA").retry_policy is RetryPolicy.REPLICA
    with pytest.raises(InvalidSpecError, match="REPLICA, APPLICATION, ROLE"):
        role(retry_policy="SOMETIMES")


def test_port_map_validated() -> None:
    with pytest.raises(InvalidSpecError, match="port_map"):
        role(port_map={"tb": 70000})


def test_default_resource_is_null() -> None:
    assert role().resource.is_null()


# --- resources -----------------------------------------------------------------------------


def test_resource_copy_merges_capabilities_without_aliasing() -> None:
    original = Resource(cpu=2, gpu=0, memMB=256, capabilities={"a": 1}, devices={"efa": 1})
    copied = Resource.copy(original, b=2)
    assert copied.capabilities == {"a": 1, "b": 2}
    copied.devices["efa"] = 4
    assert original.devices == {"efa": 1}
    assert original.capabilities == {"a": 1}


# --- macros --------------------------------------------------------------------------------


def test_macros_substitute_args_env_and_nested_metadata_only() -> None:
    r = role(
        entrypoint=f"run-{macros.app_id}",
        args=[macros.replica_id, f"--root={macros.img_root}"],
        env={"ID": macros.app_id},
        metadata={"k": [macros.replica_id, {"x": macros.app_id}], "n": 3},
    )
    values = macros.Values(img_root="/root", app_id="app-1", replica_id="2", rank0_env="HOST")
    applied = values.apply(r)
    assert applied.args == ["2", "--root=/root"]
    assert applied.env == {"ID": "app-1"}
    assert applied.metadata == {"k": ["2", {"x": "app-1"}], "n": 3}
    assert applied.entrypoint == "run-${app_id}"  # other fields are NOT substituted
    assert r.args == [macros.replica_id, f"--root={macros.img_root}"]  # original untouched


def test_unknown_placeholders_are_left_alone() -> None:
    values = macros.Values(img_root="", app_id="a", replica_id="0", rank0_env="H")
    assert values.substitute("${HOME} $PATH ${app_id}") == "${HOME} $PATH a"


# --- statuses ------------------------------------------------------------------------------


def status() -> AppStatus:
    return AppStatus(
        AppState.FAILED,
        num_restarts=1,
        msg="trainer/1 exited 3",
        ui_url="file:///logs",
        roles=[
            RoleStatus(
                "trainer",
                [
                    ReplicaStatus(0, AppState.SUCCEEDED, "trainer", "localhost"),
                    ReplicaStatus(1, AppState.FAILED, "trainer", "localhost", "exit 3"),
                ],
            )
        ],
    )


def test_status_round_trips_through_json_and_yaml() -> None:
    s = status()
    assert AppStatus.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert AppStatus.from_dict(yaml.safe_load(s.to_yaml())["AppStatus"]) == s


def test_raise_for_status_carries_the_status() -> None:
    with pytest.raises(AppStatusError) as e:
        status().raise_for_status()
    assert e.value.status.state is AppState.FAILED
    assert e.value.app_status is e.value.status
    assert "trainer/1 exited 3" in str(e.value)
    AppStatus(AppState.SUCCEEDED).raise_for_status()


def test_format_filters_roles() -> None:
    s = status()
    s.roles.append(RoleStatus("ps", [ReplicaStatus(0, AppState.RUNNING, "ps", "h")]))
    text = s.format(filter_roles=["ps"])
    assert " *ps[0]:RUNNING" in text and "trainer[" not in text
    assert "  trainer[1]:FAILED (exitcode: <N/A>)" in s.format()


# --- mounts --------------------------------------------------------------------------------


def test_parse_mounts_all_kinds() -> None:
    mounts = parse_mounts(
        [
            "type=bind,src=/a,dst=/b,readonly",
            "type=volume,src=vol,dst=/data",
            "type=device,src=/dev/fuse,dst=/dev/f,perm=r",
        ]
    )
    assert mounts == [
        BindMount("/a", "/b", True),
        VolumeMount("vol", "/data", False),
        DeviceMount("/dev/fuse", "/dev/f", "r"),
    ]


@pytest.mark.parametrize(
    ("opts", "problem"),
    [
        (["src=/a,dst=/b"], "before any type"),
        (["type=nfs,src=a,dst=b"], "unknown mount type"),
        (["type=bind,src=/a"], "needs src and dst"),
        (["type=bind,src=/a,dst=/b,color=red"], "unknown mount option"),
        (["type=device,src=/dev/x,perm=rwx"], "letters r, w and m"),
    ],
)
def test_parse_mounts_errors_name_the_fix(opts: list[str], problem: str) -> None:
    with pytest.raises(InvalidSpecError, match=problem):
        parse_mounts(opts)


# --- handles -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "handle", ["", "no-scheme", "local_cwd://default/", "local_cwd:/x/y", "a://s/b/c", 42]
)
def test_malformed_handles(handle: object) -> None:
    with pytest.raises(MalformedAppHandleException) as e:
        parse_app_handle(handle)  # type: ignore[arg-type]
    assert "{scheduler}://{session_name}/{app_id}" in str(e.value)


def test_handle_round_trip() -> None:
    handle = make_app_handle("slurm", "sess", "1234")
    assert parse_app_handle(handle) == ("slurm", "sess", "1234")
    with pytest.raises(MalformedAppHandleException):
        make_app_handle("slurm", "sess", "a/b")


# --- workspace -----------------------------------------------------------------------------


def test_workspace_merge_into_copies_projects(tmp_path: os.PathLike[str]) -> None:
    src = os.path.join(tmp_path, "src")
    os.makedirs(os.path.join(src, "pkg"))
    with open(os.path.join(src, "pkg", "mod.py"), "w") as f:
        f.write("x = 1\n")
    single = os.path.join(tmp_path, "README")
    with open(single, "w") as f:
        f.write("hi\n")
    out = os.path.join(tmp_path, "out")
    Workspace(projects={src: "code", single: "docs/README"}).merge_into(out)
    with open(os.path.join(out, "code", "pkg", "mod.py")) as f:
        assert f.read() == "x = 1\n"
    with open(os.path.join(out, "docs", "README")) as f:
        assert f.read() == "hi\n"


def test_workspace_missing_path_is_clear(tmp_path: os.PathLike[str]) -> None:
    with pytest.raises(InvalidSpecError, match="does not exist"):
        Workspace(projects={os.path.join(tmp_path, "nope"): ""}).merge_into(tmp_path)
    assert not Workspace(projects={})  # TorchX: an empty workspace is allowed, and falsy


@pytest.mark.parametrize(
    "make",
    [
        lambda: Role("worker\n", image="img", entrypoint="echo"),
        lambda: Role("worker", image="img", entrypoint="echo", env={"FOO\n": "v"}),
        lambda: parse_app_handle("local_cwd://session/app-1\n"),
        lambda: get_runner("session\n"),
    ],
    ids=["role name", "env name", "handle", "session name"],
)
def test_a_trailing_newline_is_not_a_valid_name(make: Any) -> None:
    # `$` matches before a final newline: every name check must match the whole string
    with pytest.raises(InvalidSpecError):
        make()
