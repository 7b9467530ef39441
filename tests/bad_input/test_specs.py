"""Specs: AppDef, Role, Resource, RetryPolicy, mounts, handles, statuses, named resources."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from anylaunch.specs import (
    AppDef,
    AppStatus,
    BindMount,
    DeviceMount,
    Resource,
    Role,
    VolumeMount,
    Workspace,
    parse_app_handle,
    parse_mounts,
)
from anylaunch.specs.file_linter import parse_fn_docstring, validate
from anylaunch.specs.handles import make_app_handle
from tests.bad_input.conftest import Case, assert_rejected

BAD_NAMES: list[tuple[str, Any]] = [
    ("none", None),
    ("int", 3),
    ("empty", ""),
    ("newline", "w\n"),
    ("nul", "w\x00"),
    ("list", ["w"]),
    ("space", "two words"),
    ("slash", "a/b"),
]
BAD_COUNTS: list[tuple[str, Any]] = [
    ("negative", -1),
    ("float", 1.5),
    ("nan", math.nan),
    ("inf", math.inf),
    ("str", "2"),
    ("bool", True),
    ("huge", 10**12),
]
BAD_RESOURCE_NUMBERS: list[tuple[str, Any]] = [
    ("nan", math.nan),
    ("inf", math.inf),
    ("str", "4"),
    ("bool", True),
    ("list", [1]),
    ("negative", -5),
]


def _role(**kwargs: Any) -> Role:
    kwargs.setdefault("name", "w")
    return Role(image="img", entrypoint="echo", **kwargs)


def _dryrun(app: AppDef) -> Any:
    from anylaunch.runner import get_runner

    with get_runner() as runner:
        return runner.dryrun(app, "local_cwd")


CASES: list[Case] = []
for label, value in BAD_NAMES:
    CASES.append(Case(f"role-name-{label}", lambda v=value: _role(name=v), "name"))
    if label not in ("space", "slash"):  # free text in an app name is sanitized
        CASES.append(Case(f"app-name-{label}", lambda v=value: AppDef(v, [_role()]), "name"))
for label, value in BAD_COUNTS:
    CASES.append(
        Case(f"num_replicas-{label}", lambda v=value: _role(num_replicas=v), "num_replicas")
    )
    CASES.append(Case(f"max_retries-{label}", lambda v=value: _role(max_retries=v), "max_retries"))
for field in ("cpu", "gpu", "memMB"):
    for label, value in BAD_RESOURCE_NUMBERS:
        if field == "cpu" and label == "negative":
            continue  # -1 is the documented "unset" sentinel; -5 is checked below
        values = {"cpu": 1, "gpu": 0, "memMB": 1, field: value}
        CASES.append(Case(f"resource-{field}-{label}", lambda kw=values: Resource(**kw), field))
CASES += [
    Case("resource-cpu-negative", lambda: Resource(cpu=-5, gpu=0, memMB=1), "cpu"),
    Case("role-entrypoint-none", lambda: Role("w", "img", entrypoint=None), "entrypoint"),  # type: ignore[arg-type]
    Case("role-entrypoint-int", lambda: Role("w", "img", entrypoint=3), "entrypoint"),  # type: ignore[arg-type]
    Case("role-image-int", lambda: Role("w", 3, entrypoint="e"), "image"),  # type: ignore[arg-type]
    Case("role-args-str", lambda: _role(args="--lr 1"), "args"),
    Case("role-args-int-item", lambda: _role(args=["--lr", 1]), "args"),
    # NUL bytes cannot reach any process: every scheduler rejects them at dryrun
    Case("dryrun-args-nul", lambda: _dryrun(AppDef("a", [_role(args=["a\x00b"])])), "args"),
    Case("dryrun-env-nul", lambda: _dryrun(AppDef("a", [_role(env={"A": "x\x00"})])), "env"),
    Case(
        "dryrun-entrypoint-nul",
        lambda: _dryrun(AppDef("a", [Role("w", "img", entrypoint="e\x00")])),
        "entrypoint",
    ),
    Case("role-env-list", lambda: _role(env=["A=1"]), "env"),
    Case("role-env-int-value", lambda: _role(env={"A": 1}), "env"),
    Case("role-env-bad-name", lambda: _role(env={"A B": "1"}), "env"),
    Case("role-env-newline-name", lambda: _role(env={"A\n": "1"}), "env"),
    Case("role-env-empty-name", lambda: _role(env={"": "1"}), "env"),
    Case("role-port_map-list", lambda: _role(port_map=[8080]), "port_map"),
    Case("role-port_map-str-port", lambda: _role(port_map={"http": "80"}), "port_map"),
    Case("role-port_map-huge", lambda: _role(port_map={"http": 70000}), "port_map"),
    Case("role-retry_policy-str", lambda: _role(retry_policy="sometimes"), "retry_policy"),
    Case("role-mounts-str", lambda: _role(mounts="type=bind"), "mounts"),
    Case("role-resource-dict", lambda: _role(resource={"cpu": 1}), "resource"),
    Case("role-min_replicas-above", lambda: _role(num_replicas=2, min_replicas=3), "min_replicas"),
    Case("role-min_replicas-negative", lambda: _role(min_replicas=-1), "min_replicas"),
    Case("resource-devices-list", lambda: Resource(1, 0, 1, devices=[1]), "devices"),
    Case("resource-capabilities-list", lambda: Resource(1, 0, 1, capabilities=[]), "capabilities"),
    Case("appdef-roles-none", lambda: AppDef("a", None), "roles"),  # type: ignore[arg-type]
    Case("appdef-roles-dict", lambda: AppDef("a", {"w": _role()}), "roles"),  # type: ignore[arg-type]
    Case("appdef-roles-str-item", lambda: AppDef("a", ["w"]), "roles"),  # type: ignore[list-item]
    Case("appdef-duplicate-roles", lambda: AppDef("a", [_role(), _role()]), "roles"),
    Case("parse_mounts-none", lambda: parse_mounts(None), "mounts"),  # type: ignore[arg-type]
    Case("parse_mounts-int-item", lambda: parse_mounts([1]), "mounts"),  # type: ignore[list-item]
    Case("parse_mounts-unknown-type", lambda: parse_mounts(["type=nfs", "src=a", "dst=b"]), "type"),
    Case("parse_mounts-no-type", lambda: parse_mounts(["src=a", "dst=b"]), "type"),
    Case("parse_mounts-bad-pair", lambda: parse_mounts(["type=bind", "src"]), "mounts"),
    Case("handle-empty", lambda: parse_app_handle(""), "app_handle"),
    Case("handle-no-scheme", lambda: parse_app_handle("session/app"), "app_handle"),
    Case("handle-newline", lambda: parse_app_handle("local_cwd://s/app\n"), "app_handle"),
    Case("handle-int", lambda: parse_app_handle(3), "app_handle"),  # type: ignore[arg-type]
    Case("handle-extra-path", lambda: parse_app_handle("local_cwd://s/a/b/c"), "app_handle"),
    Case("status-bogus-state", lambda: AppStatus.from_dict({"state": "BOGUS"}), "state"),
    Case("status-list", lambda: AppStatus.from_dict([]), "data"),  # type: ignore[arg-type]
    Case(
        "status-roles-int", lambda: AppStatus.from_dict({"state": "RUNNING", "roles": [1]}), "data"
    ),
    # issue 31: the component linter
    Case("file_linter-path-none", lambda: validate(None, "fn"), "path"),  # type: ignore[arg-type]
    Case("file_linter-path-int", lambda: validate(3, "fn"), "path"),  # type: ignore[arg-type]
    Case("file_linter-path-bytes", lambda: validate(b"c.py", "fn"), "path"),  # type: ignore[arg-type]
    Case("file_linter-path-empty", lambda: validate("", "fn"), "path"),
    Case("file_linter-path-nul", lambda: validate("c\x00.py", "fn"), "path"),
    Case("file_linter-fn-none", lambda: validate("c.py", None), "component_function"),  # type: ignore[arg-type]
    Case("file_linter-validators-str", lambda: validate("c.py", "fn", "x"), "validators"),  # type: ignore[arg-type]
    Case("file_linter-docstring-none", lambda: parse_fn_docstring(None), "docstring"),  # type: ignore[arg-type]
    # issue 31: every spec field type-checked at construction
    Case("role-metadata-list", lambda: _role(metadata=["a"]), "metadata"),
    Case("role-metadata-int-key", lambda: _role(metadata={1: "a"}), "metadata"),
    Case("role-overrides-str", lambda: _role(overrides="spec"), "overrides"),
    Case("appdef-metadata-str", lambda: AppDef("a", [_role()], metadata="x"), "metadata"),  # type: ignore[arg-type]
    Case("role-workspace-str", lambda: _role(workspace="."), "workspace"),
    Case("role-image-blank", lambda: _role_image(" "), "image"),
    Case("role-image-newline", lambda: _role_image("img\n"), "image"),
    Case("bindmount-src-none", lambda: BindMount(None, "/x"), "src_path"),  # type: ignore[arg-type]
    Case("bindmount-dst-path", lambda: BindMount("/x", Path("/y")), "dst_path"),  # type: ignore[arg-type]
    Case("bindmount-read_only-str", lambda: BindMount("/x", "/y", "no"), "read_only"),  # type: ignore[arg-type]
    Case("volumemount-src-int", lambda: VolumeMount(3, "/x"), "src"),  # type: ignore[arg-type]
    Case("devicemount-dst-none", lambda: DeviceMount("/dev/x", None), "dst_path"),  # type: ignore[arg-type]
    Case("devicemount-permissions-int", lambda: DeviceMount("/dev/x", "/dev/x", 7), "permissions"),  # type: ignore[arg-type]
    Case("mount-changed-after", lambda: _role(mounts=[_changed_mount()]), "dst_path"),
    Case("resource-cpu-huge", lambda: Resource(cpu=10**30, gpu=0, memMB=1), "cpu"),
    Case("resource-gpu-huge", lambda: Resource(cpu=1, gpu=10**6, memMB=1), "gpu"),
    Case("resource-memMB-huge", lambda: Resource(cpu=1, gpu=0, memMB=2**40), "memMB"),
    Case("workspace-from_str-int", lambda: Workspace.from_str(3), "workspace"),  # type: ignore[arg-type]
    Case("workspace-empty-local", lambda: Workspace({"": "x"}), "Workspace.projects"),
    Case("workspace-remote-absolute", lambda: Workspace({"a": "/etc"}), "Workspace.projects"),
    Case("workspace-remote-dotdot", lambda: Workspace({"a": "x/../../y"}), "Workspace.projects"),
    Case("make_app_handle-int", lambda: make_app_handle(1, "s", "a"), "scheduler"),  # type: ignore[arg-type]
    Case("make_app_handle-none", lambda: make_app_handle("local", None, "a"), "session_name"),  # type: ignore[arg-type]
    Case("make_app_handle-empty-id", lambda: make_app_handle("local", "s", ""), "app_id"),
]


def _role_image(image: str) -> Role:
    return Role("w", image, entrypoint="echo")


def _changed_mount() -> BindMount:
    mount = BindMount("/x", "/y")
    mount.dst_path = None  # type: ignore[assignment]
    return mount


def test_torchx_values_still_work() -> None:
    """What TorchX accepts and can work: no image (slurm, lsf), the empty workspace, bounds."""
    assert Role("w", "", entrypoint="true").image == ""
    assert not Workspace({}) and not Workspace.from_str(None)
    assert Workspace({"a": "x/./y"}).projects == {"a": "x/./y"}
    assert Resource(cpu=65_536, gpu=1_024, memMB=2**30).memMB == 2**30
    assert BindMount("/x", "/y").read_only is False


@pytest.mark.parametrize(("call", "field"), [c.param() for c in CASES])
def test_rejected(call: Any, field: str) -> None:
    assert_rejected(call, field)
