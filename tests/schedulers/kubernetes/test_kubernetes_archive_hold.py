"""The archive's hold on a Kubernetes app (``anylaunch.schedulers.kubernetes.hold``), on the
real cluster of scripts/provision/30-kubernetes.sh (TTLAfterFinished on):

- an app with an archive and ``ttl_seconds_after_finished=0`` ends while no process watches
  it; the TTL controller deletes its Job at once, yet the Job and pods stay (marked for
  deletion) until a runner that knows nothing of the launch (no archive configured: it finds
  the app's in its roles' env) sees the end, archives it and lets go; then the cluster
  removes them, and the outcome and every line are answered from the archive;
- a cancelled held app still stops at once (its pods are killed), ends CANCELLED and is
  released once archived;
- without an archive nothing is held, and the TTL alone deletes the Job;
- offline: the finalizer and the TTL in the dryrun, and bad TTLs refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anylaunch.runner import get_runner
from anylaunch.runner.archive import ARCHIVE_URL_ENV
from anylaunch.schedulers.kubernetes.client import KubeClient
from anylaunch.schedulers.kubernetes.hold import ARCHIVE_FINALIZER
from anylaunch.schedulers.kubernetes.names import LABEL_APP_ID
from anylaunch.specs import AppDef, AppState, Resource, Role
from anylaunch.specs.errors import InvalidRunConfigException
from tests.schedulers.kubernetes.kube_cluster import BUSYBOX, kubeconfig, wait_for

WAIT_S = 180.0  # safety nets against a hung cluster, not measurements
SMALL = Resource(cpu=1, gpu=0, memMB=64)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No archive configured, no user config: each runner knows only what the test gives."""
    monkeypatch.delenv(ARCHIVE_URL_ENV, raising=False)
    monkeypatch.setenv("ANYLAUNCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ANYLAUNCHCONFIG", raising=False)
    if kubeconfig() is not None:
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig()))
    yield


def _app(script: str) -> AppDef:
    return AppDef(
        "held", [Role("w", BUSYBOX, entrypoint="sh", args=["-c", script], resource=SMALL)]
    )


def _objects(client: KubeClient, namespace: str, handle: str) -> list[dict[str, Any]]:
    name = handle.rsplit("/", 1)[1].split(":", 1)[1]
    selector = f"{LABEL_APP_ID}={name}"
    # (list items carry no kind)
    return [
        {**obj, "kind": kind}
        for api_version, kind in (("batch/v1", "Job"), ("v1", "Pod"))
        for obj in client.list(api_version, kind, namespace, selector)
    ]


def _ended(client: KubeClient, namespace: str, handle: str) -> bool:
    pods = [o for o in _objects(client, namespace, handle) if o["kind"] == "Pod"]
    return bool(pods) and all(p["status"].get("phase") in ("Succeeded", "Failed") for p in pods)


def test_a_job_its_ttl_deletes_is_held_until_a_new_runner_archives_its_end(
    env: None, kube_client: KubeClient, kube_namespace: str, kubelet: str, tmp_path: Path
) -> None:
    archive = (tmp_path / "archive").as_uri()
    cfg = {"namespace": kube_namespace, "ttl_seconds_after_finished": 0, "archive_url": archive}
    with get_runner("hold") as launcher:  # launches, and never looks again
        handle = launcher.run(_app("echo out-1; echo out-2; exit 3"), "kubernetes", cfg)

    # the TTL controller asks for the deletion as soon as the Job failed: nobody saw the end
    def marked() -> bool:
        objects = _objects(kube_client, kube_namespace, handle)
        return bool(objects) and all(o["metadata"].get("deletionTimestamp") for o in objects)

    wait_for(marked, WAIT_S, "the TTL to delete the Job (and the GC its pods)")
    held = _objects(kube_client, kube_namespace, handle)
    assert {o["kind"] for o in held} == {"Job", "Pod"}
    assert all(ARCHIVE_FINALIZER in o["metadata"]["finalizers"] for o in held)

    with get_runner("reader") as reader:  # another process's runner: no archive configured
        status = reader.status(handle)
        assert status is not None and status.state == AppState.FAILED, status
        assert "exit code 3" in status.msg or "exit 3" in status.msg, status.msg
    # its record is written and the hold released: the cluster finishes the deletion
    wait_for(
        lambda: not _objects(kube_client, kube_namespace, handle),
        WAIT_S,
        "the released Job and pods to be deleted",
    )
    assert (tmp_path / "archive").is_dir()
    os.environ[ARCHIVE_URL_ENV] = archive  # a later reader that knows where records are
    try:
        with get_runner("later") as later:
            status = later.status(handle)
            lines = list(later.log_lines(handle, "w"))
    finally:
        del os.environ[ARCHIVE_URL_ENV]
    assert status is not None and status.state == AppState.FAILED
    assert "from the archive" in status.msg
    assert lines == ["out-1\n", "out-2\n"], lines


def test_a_cancelled_held_app_stops_and_is_released_once_archived(
    env: None, kube_client: KubeClient, kube_namespace: str, kubelet: str, tmp_path: Path
) -> None:
    archive = (tmp_path / "archive").as_uri()
    cfg = {"namespace": kube_namespace, "archive_url": archive}
    with get_runner("hold") as runner:
        # (sh as pid 1 ignores SIGTERM unless it traps it: the pod would take its grace period)
        script = "trap 'exit 143' TERM; echo started; sleep 600 & wait"
        handle = runner.run(_app(script), "kubernetes", cfg)
        wait_for(
            lambda: (s := runner.status(handle)) is not None and s.state == AppState.RUNNING,
            WAIT_S,
            "the app to run",
        )
        runner.cancel(handle)
        status = runner.wait(handle, wait_interval=1, timeout=WAIT_S)
        assert status is not None and status.state == AppState.CANCELLED, status
    wait_for(
        lambda: (
            not [o for o in _objects(kube_client, kube_namespace, handle) if o["kind"] == "Pod"]
        ),
        WAIT_S,
        "the cancelled app's pods to be gone once archived",
    )


def test_without_an_archive_nothing_is_held_and_the_ttl_deletes_the_job(
    env: None, kube_client: KubeClient, kube_namespace: str, kubelet: str
) -> None:
    cfg = {"namespace": kube_namespace, "ttl_seconds_after_finished": 0}
    with get_runner("nohold") as runner:
        handle = runner.run(_app("echo done"), "kubernetes", cfg)
    wait_for(
        lambda: not _objects(kube_client, kube_namespace, handle),
        WAIT_S,
        "the TTL to delete the Job and its pods",
    )


def test_the_dryrun_shows_the_hold_and_the_ttl_and_bad_ttls_are_refused(
    env: None, tmp_path: Path
) -> None:
    cfg: dict[str, Any] = {"ttl_seconds_after_finished": 60, "indexed_job": "no"}
    with get_runner() as runner:
        plain = runner.dryrun(_app("true"), "kubernetes", cfg).request
        held = runner.dryrun(
            _app("true"), "kubernetes", {**cfg, "archive_url": str(tmp_path)}
        ).request
        for value in (-1, 2**31):
            with pytest.raises(InvalidRunConfigException, match="ttl_seconds_after_finished"):
                runner.dryrun(_app("true"), "kubernetes", {"ttl_seconds_after_finished": value})
        with pytest.raises(InvalidRunConfigException, match="jobs mode"):
            runner.dryrun(
                _app("true"), "kubernetes", {"ttl_seconds_after_finished": 5, "mode": "volcano"}
            )
    (job,) = [o for o in plain.objects if o["kind"] == "Job"]
    assert job["spec"]["ttlSecondsAfterFinished"] == 60
    assert "finalizers" not in job["metadata"]
    (job,) = [o for o in held.objects if o["kind"] == "Job"]
    assert job["metadata"]["finalizers"] == [ARCHIVE_FINALIZER]
    assert job["spec"]["template"]["metadata"]["finalizers"] == [ARCHIVE_FINALIZER]
    role = job["spec"]["template"]["spec"]["containers"][0]
    assert {"name": ARCHIVE_URL_ENV, "value": str(tmp_path)} in role["env"]
