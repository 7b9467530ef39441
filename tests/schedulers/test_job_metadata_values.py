"""Whatever ``$ANYLAUNCH_CONTEXT_NAME`` holds, the job metadata every scheduler stamps is valid
for its backend (Kubernetes label values, AWS tag values, one ``#SBATCH --comment`` line, one
LSF ``-Jd`` word list) and never carries a secret of the app. Offline: dryruns only."""

from __future__ import annotations

import re
import shlex
import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anylaunch.schedulers import get_scheduler_factory
from anylaunch.schedulers.common.job_metadata import MAX_VALUE_LEN, context_name, job_metadata
from anylaunch.specs import AppDef, Resource, Role
from anylaunch.specs.metadata_keys import ANYLAUNCH_CONTEXT_NAME, NA, app_metadata
from anylaunch.specs.secrets import MASK

# https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set
K8S_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html (values: 0-256 chars)
AWS_TAG_VALUE = re.compile(r"^[\w .:/=+\-@]{0,256}$")
SECRET = "s3cr3t-token-value"

contexts = st.text(min_size=0, max_size=400)


def _app() -> AppDef:
    role = Role(
        "w",
        "busybox",
        entrypoint="echo",
        env={"API_TOKEN": SECRET},
        resource=Resource(cpu=1, gpu=0, memMB=128),
    )
    return AppDef("meta", [role])


def _dryrun(name: str, cfg: dict[str, object]) -> object:
    return get_scheduler_factory(name)("props").submit_dryrun(_app(), cfg).request


def test_unset_or_blank_context_is_na_and_keys_are_torchx_s() -> None:
    assert context_name(_app(), {}) == NA
    assert context_name(_app(), {ANYLAUNCH_CONTEXT_NAME: "  \n"}) == NA
    assert set(job_metadata(_app(), "slurm", {})) == {
        "anylaunch/context",
        "anylaunch/version",
        "anylaunch/scheduler",
    }
    assert app_metadata.ROLES_PREFIX == "anylaunch/roles."


@given(raw=contexts)
def test_the_context_is_one_line_bounded_and_never_a_secret(raw: str) -> None:
    value = context_name(_app(), {ANYLAUNCH_CONTEXT_NAME: raw + SECRET[: len(raw) % 3] + SECRET})
    assert SECRET not in value and value == MASK
    value = context_name(_app(), {ANYLAUNCH_CONTEXT_NAME: raw})
    assert "\n" not in value and "\x00" not in value and 0 < len(value) <= MAX_VALUE_LEN


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=contexts)
def test_kubernetes_labels_are_valid_label_values(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ANYLAUNCH_CONTEXT_NAME, raw.replace("\x00", ""))
    for name in ("kubernetes", "kubernetes_mcad"):
        request = _dryrun(name, {"validate_spec": False} if name == "kubernetes" else {})
        for obj in request.objects:  # type: ignore[attr-defined]
            labels = obj["metadata"]["labels"]
            for key in (app_metadata.CONTEXT, app_metadata.VERSION, app_metadata.SCHEDULER):
                assert len(labels[key]) <= 63 and K8S_LABEL_VALUE.match(labels[key]), labels
                assert SECRET not in labels[key]


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=contexts)
def test_aws_tags_are_valid_tag_values(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ANYLAUNCH_CONTEXT_NAME, raw.replace("\x00", ""))
    tags = _dryrun("aws_batch", {"queue": "q"}).submit_job["tags"]  # type: ignore[attr-defined]
    sagemaker = _dryrun(
        "aws_sagemaker",
        {
            "role_arn": "arn:aws:iam::123456789012:role/sagemaker",
            "output_path": "s3://b/o/",
            "instance_type": "ml.m5.xlarge",
        },
    ).create_training_job["Tags"]  # type: ignore[attr-defined]
    for found in (tags, {t["Key"]: t["Value"] for t in sagemaker}):
        for key in (app_metadata.CONTEXT, app_metadata.VERSION, app_metadata.SCHEDULER):
            assert AWS_TAG_VALUE.match(found[key]) and SECRET not in found[key], found


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=contexts)
def test_the_slurm_comment_and_lsf_description_read_back(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ANYLAUNCH_CONTEXT_NAME, raw.replace("\x00", ""))
    want = context_name(_app())
    script = _dryrun("slurm", {"comment": 'it\'s "mine"'}).materialize()  # type: ignore[attr-defined]
    (line,) = [ln for ln in script.splitlines() if ln.startswith("#SBATCH --comment=")]
    value = line.removeprefix("#SBATCH --comment=")
    comment = re.sub(r"\\(.)", r"\1", value[1:-1]) if value.startswith('"') else value
    words = dict(w.partition("=")[::2] for w in comment.split() if "=" in w)
    assert urllib.parse.unquote(words[app_metadata.CONTEXT]) == want
    assert comment.startswith('it\'s "mine" ')

    request = _dryrun("lsf", {})
    options = request.jobs[0].options  # type: ignore[attr-defined]
    description = options[options.index("-Jd") + 1]
    assert "\n" not in description and shlex.split(shlex.quote(description)) == [description]
    words = dict(w.partition("=")[::2] for w in description.split() if "=" in w)
    assert urllib.parse.unquote(words[app_metadata.CONTEXT]) == want
