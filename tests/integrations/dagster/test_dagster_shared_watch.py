"""Many apps waited on at once in one Dagster process share one Kubernetes watch: an op runs
three apps concurrently through AnylaunchResource (a thread each, logs streamed), and the API
server's audit log of the test's namespace shows one WATCH per kind for all of them and at most
one status list per app: the launch's status call waits for the watch's first word on the app,
and the log readers describe from the watch's cache too (before that, a streamed app cost about
six lists of each kind)."""

import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from anylaunch.specs import AppDef, Resource, Role
from dagster_anylaunch import AnylaunchResource
from tests.backends import require_backend
from tests.benchmarks.engine_scale import harness
from tests.schedulers.docker.docker_engine import BUSYBOX_IMAGE, busybox_image, docker_client
from tests.schedulers.kubernetes.kube_cluster import kube_client, kubelet, own_namespace

__all__ = ["busybox_image", "docker_client", "kube_client", "kubelet", "own_namespace"]

APPS = 3


def _app(i: int) -> AppDef:
    script = f"echo shared-watch-{i}; sleep 3; echo done-{i}"
    role = Role("sleeper", BUSYBOX_IMAGE, entrypoint="sh", args=["-c", script])
    role.resource = Resource(cpu=0, gpu=0, memMB=128)
    return AppDef(f"shared-{i}", [role])


def _engine_requests(mark: harness.AuditMark, namespace: str) -> Counter[str]:
    files, _ = harness.audit_files(mark)
    counts = harness.count_requests(harness.audit_lines(files), mark.time, 1e12, namespace)
    return counts["engine"]


def test_concurrent_waits_share_one_watch(
    own_namespace: str,
    kubelet: str,
    busybox_image: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a watch of this test's own: the process-wide watch of the provisioned kubeconfig may have
    # been started by an earlier test, and only a watch that ends is in the audit log (a copy
    # of the kubeconfig is another identity, so its schedulers share a watch of their own,
    # stopped when the last of them closes), in a namespace of its own
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_bytes(Path(os.environ["KUBECONFIG"]).read_bytes())
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    require_backend(
        "the API server's audit log",
        harness.AUDIT_LOG.exists(),
        "scripts/provision/30-kubernetes.sh starts kube-apiserver with one",
    )
    cfg = {"namespace": own_namespace, "image_pull_policy": "Never"}

    @dg.op
    def wait_all(context: dg.OpExecutionContext, anylaunch: AnylaunchResource) -> list[str]:
        def one(i: int) -> str:
            return anylaunch.run(context, _app(i), cfg=cfg, reattach=False).handle

        with ThreadPoolExecutor(APPS) as pool:
            return list(pool.map(one, range(APPS)))

    @dg.job(resource_defs={"anylaunch": AnylaunchResource(scheduler="kubernetes")})
    def shared_watch() -> None:
        wait_all()

    mark = harness.audit_mark()
    instance = dg.DagsterInstance.ephemeral()
    result = shared_watch.execute_in_process(instance=instance)
    assert result.success
    lines = [e.user_message for e in instance.all_logs(result.run_id)]
    for i in range(APPS):  # every app's log was streamed into the step's log
        assert any(f"done-{i}" in line for line in lines)
    # reattach=False: no launch is recorded for a retry to find (no run tag, no launch event)
    run = instance.get_run_by_id(result.run_id)
    assert run is not None and not [k for k in run.tags if k.startswith("anylaunch/")]
    assert not [
        e for e in instance.all_logs(result.run_id) if "dagster_pipes/launch_handle" in repr(e)
    ]
    assert sum(line.startswith("launched ") for line in lines) == APPS
    requests = _engine_requests(mark, own_namespace)
    # one shared watch per kind for every app (its watches are logged once they end: the
    # last app's runner closing stopped them)
    for kind in ("WATCH pods", "WATCH jobs"):
        assert requests[kind] == 1, requests
    # the shared watch's own list, and at most one per app (an app the watch had not
    # delivered yet when asked about is listed: a process reads its own writes)
    assert requests["LIST pods"] <= 1 + APPS, requests
