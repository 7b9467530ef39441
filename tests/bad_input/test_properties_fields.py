"""Properties of issue 31 for spec fields and scheduler options: a spec field of the wrong type
(or beyond any machine) is refused at construction, and a run option the backend would reject
later is refused at dryrun, each with the project's error naming the field; values that can
work still pass."""

from __future__ import annotations

import string
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anylaunch.runner import get_runner
from anylaunch.specs import (
    AppDef,
    BindMount,
    DeviceMount,
    Resource,
    Role,
    VolumeMount,
    Workspace,
)
from anylaunch.specs.api import MAX_RESOURCE
from anylaunch.specs.errors import InvalidRunConfigException, InvalidSpecError
from anylaunch.specs.handles import make_app_handle
from tests.bad_input.conftest import assert_rejected
from tests.bad_input.test_properties import NOT_STR, PROPERTY

#: a dryrun per example: fewer of them
DRYRUN = settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
NOT_DICT = NOT_STR.filter(lambda v: not isinstance(v, dict))
NAME = st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)
SPACE = st.sampled_from([" ", "\t", "\n", "\r"])


def _dryrun(scheduler: str, cfg: dict[str, Any], app: AppDef | None = None) -> Any:
    role = Role("w", "busybox:1.36", entrypoint="echo", resource=Resource(1, 0, 256))
    with get_runner() as runner:
        return runner.dryrun(app or AppDef("bad", [role]), scheduler, cfg=cfg)


# --- 1. spec fields of the wrong type ---------------------------------------------------------


@PROPERTY
@given(NOT_DICT, st.sampled_from(["metadata", "overrides"]))
def test_role_dict_fields_refuse_what_is_not_a_dict(value: Any, name: str) -> None:
    assert_rejected(lambda: Role("w", "img", **{name: value}), name)


@PROPERTY
@given(NOT_DICT)
def test_appdef_metadata_refuses_what_is_not_a_dict(value: Any) -> None:
    assert_rejected(lambda: AppDef("a", metadata=value), "AppDef.metadata")


@PROPERTY
@given(NOT_STR, st.sampled_from([BindMount, VolumeMount, DeviceMount]), st.booleans())
def test_mount_paths_refuse_what_is_not_a_str(value: Any, kind: type, first: bool) -> None:
    args = (value, "/dst") if first else ("/src", value)
    assert_rejected(lambda: kind(*args), "_path" if kind is not VolumeMount or not first else "src")


@PROPERTY
@given(NOT_STR.filter(lambda v: not isinstance(v, str)), st.integers(0, 2))
def test_make_app_handle_refuses_parts_that_are_not_str(value: Any, which: int) -> None:
    parts = ["local_cwd", "default", "echo-1a2b"]
    parts[which] = value
    assert_rejected(lambda: make_app_handle(*parts), ("scheduler", "session_name", "app_id")[which])


@PROPERTY
@given(NOT_STR.filter(lambda v: v is not None))
def test_role_workspace_refuses_what_is_not_a_workspace(value: Any) -> None:
    assert_rejected(lambda: Role("w", "img", workspace=value), "workspace")


@PROPERTY
@given(st.text(SPACE, min_size=1, max_size=3))
def test_a_blank_image_is_refused_and_the_empty_image_kept(image: str) -> None:
    assert_rejected(lambda: Role("w", image), "image")
    assert Role("w", "").image == ""  # TorchX: no image, for slurm, lsf and local_cwd


# --- 2. resources beyond any machine -----------------------------------------------------------


@PROPERTY
@given(st.sampled_from(sorted(MAX_RESOURCE)), st.integers(min_value=1, max_value=10**40))
def test_resources_beyond_any_machine_are_refused_naming_the_bound(name: str, extra: int) -> None:
    most = MAX_RESOURCE[name]
    values = {"cpu": 1, "gpu": 0, "memMB": 64, name: most + extra}
    try:
        Resource(**values)
    except InvalidSpecError as e:
        assert e.field == f"Resource.{name}"
        assert str(most) in str(e)
        return
    raise AssertionError(f"accepted {name}={most + extra}")


@PROPERTY
@given(st.integers(0, MAX_RESOURCE["cpu"]), st.integers(0, MAX_RESOURCE["gpu"]))
def test_resources_within_the_bounds_pass(cpu: int, gpu: int) -> None:
    assert Resource(cpu=cpu, gpu=gpu, memMB=MAX_RESOURCE["memMB"]).cpu == cpu


# --- 3. workspaces --------------------------------------------------------------------------

SEGMENT = st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=6)
ESCAPING = st.one_of(
    st.lists(SEGMENT, max_size=3).map(lambda parts: "/" + "/".join(parts)),
    st.tuples(st.lists(SEGMENT, max_size=2), st.lists(SEGMENT, max_size=2)).map(
        lambda t: "/".join([*t[0], "..", *t[1]])
    ),
)


@PROPERTY
@given(ESCAPING)
def test_a_workspace_sub_directory_outside_the_root_is_refused(remote: str) -> None:
    assert_rejected(lambda: Workspace({"~/proj": remote}), "Workspace.projects")


@PROPERTY
@given(st.lists(SEGMENT, max_size=3).map("/".join))
def test_a_relative_workspace_sub_directory_passes(remote: str) -> None:
    assert Workspace({"~/proj": remote}).projects == {"~/proj": remote}


# --- 4. run options the backend would reject later ---------------------------------------------


@DRYRUN
@given(NAME, SPACE, NAME, st.sampled_from(["partition", "account", "qos"]))
def test_slurm_names_with_spaces_are_refused(a: str, space: str, b: str, option: str) -> None:
    assert_rejected(lambda: _dryrun("slurm", {option: f"{a}{space}{b}"}), option)


ACCOUNT = st.from_regex(r"[0-9]{12}", fullmatch=True)
BAD_ACCOUNT = st.from_regex(r"[0-9]{1,11}|[0-9]{13,14}|[a-z]{12}", fullmatch=True)


@DRYRUN
@given(BAD_ACCOUNT, NAME, st.sampled_from(["job_role_arn", "execution_role_arn"]))
def test_batch_role_arns_with_a_bad_account_are_refused(account: str, name: str, opt: str) -> None:
    arn = f"arn:aws:iam::{account}:role/{name}"
    assert_rejected(lambda: _dryrun("aws_batch", {"queue": "q", opt: arn}), opt)


@DRYRUN
@given(ACCOUNT, NAME, st.sampled_from(["iam::", "iam:us-east-1:", "s3::", "sts::"]))
def test_sagemaker_role_arn_must_be_an_iam_role(account: str, name: str, where: str) -> None:
    arn = f"arn:aws:{where}{account}:role/{name}"
    cfg = {"output_path": "s3://b/o/", "instance_type": "ml.m5.xlarge", "role_arn": arn}
    if where == "iam::":
        assert _dryrun("aws_sagemaker", cfg).request.job_name
    else:
        assert_rejected(lambda: _dryrun("aws_sagemaker", cfg), "role_arn")


@DRYRUN
@given(st.lists(SEGMENT, min_size=1, max_size=3).map("/".join))
def test_a_relative_lsf_jobdir_is_refused(jobdir: str) -> None:
    assert_rejected(lambda: _dryrun("lsf", {"jobdir": jobdir}), "jobdir")


@DRYRUN
@given(st.from_regex(r"[A-Z][a-z]{0,5}|[a-z]{1,4}[ _][a-z]{1,4}|-[a-z]{1,4}", fullmatch=True))
def test_a_coscheduler_name_that_is_not_dns_1123_is_refused(name: str) -> None:
    assert_rejected(lambda: _dryrun("kubernetes_mcad", {"coscheduler_name": name}), "coscheduler")


@DRYRUN
@given(st.one_of(st.just(""), st.text(SPACE, min_size=1, max_size=2), NAME.map(lambda n: n + "=")))
def test_empty_or_blank_copy_env_patterns_are_refused(pattern: str) -> None:
    cfg = {"copy_env": ["HOME", pattern]}
    try:
        _dryrun("local_docker", cfg)
    except InvalidRunConfigException as e:
        assert e.field == "copy_env"
        return
    raise AssertionError(f"accepted copy_env={cfg['copy_env']!r}")
