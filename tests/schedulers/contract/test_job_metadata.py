"""Every scheduler stamps the job metadata of :mod:`anylaunch.specs.metadata_keys` (context,
version, scheduler) into its dryrun request, and the submitted job carries it in the backend's
own metadata, read back with the backend's own query (labels, tags, the Slurm comment, ...).

One submission per scheduler, never waited on (the kit deletes it).
"""

from __future__ import annotations

import json
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

import anylaunch
from anylaunch.specs.metadata_keys import ANYLAUNCH_CONTEXT_NAME, app_metadata
from tests.schedulers.contract.kits import Kit

#: A context name every backend holds as it is (a valid label value and tag value).
CONTEXT = "pytest-job-metadata_1.0"


def expected(scheduler: str) -> dict[str, str]:
    return {
        app_metadata.CONTEXT: CONTEXT,
        app_metadata.VERSION: anylaunch.__version__,
        app_metadata.SCHEDULER: scheduler,
    }


def _words(text: str) -> dict[str, str]:
    """The ``key=value`` words of a Slurm comment or an LSF job description, decoded."""
    pairs = (w.partition("=") for w in text.split())
    return {k: urllib.parse.unquote(v) for k, sep, v in pairs if sep}


def request_metadata(kit: Kit, request: Any) -> dict[str, str]:
    """The job metadata as the native request carries it."""
    name = kit.name
    if name == "local_cwd":
        return dict(request.metadata)
    if name == "local_docker":
        return dict(request.containers[0].config["Labels"])
    if name in ("kubernetes", "kubernetes_mcad"):
        return dict(request.objects[-1]["metadata"]["labels"])
    if name == "aws_batch":
        return dict(request.submit_job["tags"])
    if name == "aws_sagemaker":
        return {t["Key"]: t["Value"] for t in request.create_training_job["Tags"]}
    if name == "slurm":
        return _words(request.job_opts["comment"])
    if name == "lsf":
        options = request.jobs[0].options
        return _words(options[options.index("-Jd") + 1])
    raise AssertionError(name)


def backend_metadata(kit: Kit, app_id: str, request: pytest.FixtureRequest) -> dict[str, str]:
    """The job metadata as the backend reports it for the submitted job."""
    name = kit.name
    if name == "local_cwd":  # its backend is the app's state dir
        desc = kit.scheduler.describe(app_id)
        assert desc is not None
        recorded = json.loads((Path(desc.metadata["app_dir"]) / "request.json").read_text())
        return dict(recorded["metadata"])
    if name == "local_docker":
        from anylaunch.schedulers.docker.request import LABEL_APP_ID

        client = request.getfixturevalue("docker_client")
        found = client.containers.list(all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"})
        assert found, app_id
        return dict(found[0].labels)
    if name in ("kubernetes", "kubernetes_mcad"):
        from anylaunch.schedulers.kubernetes.mcad import MCAD_API_VERSION

        client = request.getfixturevalue("kube_client")
        namespace, app = app_id.split(":", 1)
        if name == "kubernetes":
            obj = next(
                iter(client.list("batch/v1", "Job", namespace, f"anylaunch.io/app-id={app}"))
            )
        else:
            obj = client.get(MCAD_API_VERSION, "AppWrapper", namespace, app)
        return dict(obj["metadata"]["labels"])
    if name == "aws_batch":
        import boto3

        desc = kit.scheduler.describe(app_id)
        assert desc is not None
        job = boto3.client("batch").describe_jobs(jobs=[desc.metadata["job_id"]])["jobs"][0]
        return dict(job["tags"])
    if name == "aws_sagemaker":
        import boto3

        sagemaker = boto3.client("sagemaker")
        arn = sagemaker.describe_training_job(TrainingJobName=app_id)["TrainingJobArn"]
        return {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=arn)["Tags"]}
    if name == "slurm":
        job_id = app_id.split("+")[0]
        shown = subprocess.run(
            ["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True
        ).stdout
        comment = next(line for line in shown.splitlines() if line.strip().startswith("Comment="))
        return _words(comment.strip().removeprefix("Comment="))
    if name == "lsf":  # the stand-in's bjobs shows the description bsub was given
        shown = subprocess.run(
            [
                "bjobs",
                "-a",
                "-o",
                "job_description",
                "-noheader",
                "-Jd",
                f"anylaunch app={app_id} *",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return _words(shown.splitlines()[0])
    raise AssertionError(name)


def test_the_dryrun_and_the_submitted_job_carry_the_job_metadata(
    kit: Kit, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ANYLAUNCH_CONTEXT_NAME, CONTEXT)
    info = kit.scheduler.submit_dryrun(kit.app("sleep 30"), kit.cfg)
    want = expected(kit.name)
    carried = request_metadata(kit, info.request)
    assert {k: carried.get(k) for k in want} == want
    assert app_metadata.CONTEXT in str(info)  # the printed dryrun shows it too

    app_id = kit.scheduler.schedule(info)
    shown = backend_metadata(kit, app_id, request)
    assert {k: shown.get(k) for k in want} == want
    # and describe reads it back from the backend (LSF from the job description, SageMaker
    # from the tags, which describe_training_job does not return)
    desc = kit.scheduler.describe(app_id)
    assert desc is not None
    assert {k: desc.metadata.get(k) for k in want} == want
