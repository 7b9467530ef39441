"""Apps that really run: the kubernetes scheduler's Jobs on the provisioned kubelet (dockershim
on the local Docker engine, images built locally): exit codes, logs (read, followed, filtered),
rank-0 discovery without DNS, retries, a failed replica stopping the others, pending reasons,
and the Runner end to end. Kept few: each starts real containers."""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from anylaunch.schedulers.api import DescribeAppResponse, Stream
from anylaunch.schedulers.kubernetes.client import KubeClient
from anylaunch.schedulers.kubernetes_scheduler import KubernetesScheduler
from anylaunch.specs import AppDef, AppState, BindMount, Resource, Role, macros
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.overlays import set_overlay
from tests.schedulers.kubernetes.kube_cluster import BUSYBOX, kubeconfig, wait_for

# no cpu request: the test pods never wait for each other's cpu on the 2-core node
DOCKER_HOST = "unix:///run/anylaunch-backends/docker/docker.sock"  # 10-docker.sh's engine
SMALL = Resource(cpu=0, gpu=0, memMB=128)


def sh(name: str, script: str, **kwargs: Any) -> Role:
    return Role(name, BUSYBOX, entrypoint="sh", args=["-c", script], resource=SMALL, **kwargs)


def collect(lines: Any, timeout: float = 120) -> list[str]:
    """Drains a (followed) log iterator in a thread, failing the test if it does not end."""
    out: list[str] = []
    done = threading.Event()

    def drain() -> None:
        try:
            out.extend(lines)
        finally:
            done.set()

    threading.Thread(target=drain, daemon=True).start()
    if not done.wait(timeout):
        pytest.fail(f"the followed log did not end within {timeout:g}s (got {out!r})")
    return out


def wait_terminal(
    scheduler: KubernetesScheduler, app_id: str, timeout: float = 120
) -> DescribeAppResponse:
    def done() -> DescribeAppResponse | None:
        desc = scheduler.describe(app_id)
        assert desc is not None
        return desc if desc.state.is_terminal() else None

    result: DescribeAppResponse = wait_for(done, timeout, f"{app_id} to finish", interval=0.5)
    return result


RENDEZVOUS = """
if [ "$RANK" = 0 ]; then
  echo "rank0 at $ANYLAUNCH_RANK0_HOST"
  # a connection may carry nothing (rank 1 racing the listener): accept until a line arrives
  for i in $(seq 20); do
    line=$(nc -l -p 29500 | head -n 1)
    if [ -n "$line" ]; then echo "$line"; exit 0; fi
  done
  exit 1
else
  echo "rank1 dials $ANYLAUNCH_RANK0_HOST"
  for i in $(seq 150); do
    if echo "hello from rank1" | nc -w 2 "$ANYLAUNCH_RANK0_HOST" 29500; then
      # resend a few times: rank 0 keeps the first non-empty line (refusals after it are fine)
      for j in 1 2 3 4; do sleep 0.2; echo "hello from rank1" | nc -w 1 "$ANYLAUNCH_RANK0_HOST" 29500 2>/dev/null; done
      exit 0
    fi
    sleep 0.2
  done
  exit 1
fi
"""


def test_replicas_find_rank0_by_pod_ip_talk_and_log(
    k8s: KubernetesScheduler, kubelet: str, kube_namespace: str
) -> None:
    # no cluster DNS here: rank 1 learns rank 0's pod IP at submission (rank0_host=pod_ip)
    app = AppDef("rdzv", [sh("node", RENDEZVOUS, num_replicas=2, env={"RANK": macros.replica_id})])
    app_id = k8s.submit(app, {"namespace": kube_namespace, "rank0_host": "pod_ip"})
    desc = wait_terminal(k8s, app_id)
    assert desc.state == AppState.SUCCEEDED, desc
    assert [r.state for r in desc.roles_statuses[0].replicas] == [AppState.SUCCEEDED] * 2
    rank0 = list(k8s.log_iter(app_id, "node", 0))
    rank1 = list(k8s.log_iter(app_id, "node", 1))
    ip = rank0[0].split()[-1]
    assert rank0 == [f"rank0 at {ip}\n", "hello from rank1\n"]
    assert rank1 == [f"rank1 dials {ip}\n"]


def test_exit_code_and_logs_followed_filtered_and_windowed(
    k8s: KubernetesScheduler, kubelet: str, kube_namespace: str
) -> None:
    script = "echo one; sleep 1; echo two >&2; sleep 1; echo three; exit 3"
    app = AppDef("fails", [sh("main", script)])
    sidecar = {"name": "side", "image": BUSYBOX, "command": ["echo", "from the sidecar"]}
    set_overlay(app.roles[0], "kubernetes", "V1Pod", {"spec": {"containers": [sidecar]}})
    app_id = k8s.submit(app, {"namespace": kube_namespace})
    started = datetime.now()
    # follows the role's container from before the pod starts until the app has ended
    assert collect(k8s.log_iter(app_id, "main", 0, should_tail=True)) == [
        "one\n",
        "two\n",
        "three\n",
    ]
    desc = k8s.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED
    assert desc.msg == "replica main/0 failed: exit code 3 (Error)"
    assert desc.roles_statuses[0].replicas[0].structured_error_msg == "exit code 3 (Error)"

    assert list(k8s.log_iter(app_id, "main", 0, regex="^t")) == ["two\n", "three\n"]
    assert list(k8s.log_iter(app_id, "main", 0, until=started - timedelta(minutes=5))) == []
    time.sleep(1.5)
    assert list(k8s.log_iter(app_id, "main", 0, since=datetime.now())) == []
    # without following, every container is read; others' lines are prefixed
    assert list(k8s.log_iter(app_id, "main", 0, since=started - timedelta(minutes=1))) == [
        "one\n",
        "two\n",
        "three\n",
        "[side] from the sidecar\n",
    ]
    with pytest.raises(InvalidSpecError, match="combined"):
        k8s.log_iter(app_id, "main", 0, streams=Stream.STDERR)
    with pytest.raises(InvalidSpecError, match="Did you mean 'main'"):
        k8s.log_iter(app_id, "mian", 0)
    with pytest.raises(InvalidSpecError, match="1 replica"):
        k8s.log_iter(app_id, "main", 1)


def test_a_retried_replica_succeeds_through_a_host_path_mount(
    k8s: KubernetesScheduler, kubelet: str, kube_namespace: str, tmp_path: Path
) -> None:
    script = (
        "if [ -e /state/attempted ]; then echo second try; exit 0; fi; "
        "touch /state/attempted; echo first try; exit 1"
    )
    role = sh("flaky", script, max_retries=1, mounts=[BindMount(str(tmp_path), "/state")])
    app_id = k8s.submit(AppDef("retry", [role]), {"namespace": kube_namespace})
    desc = wait_terminal(k8s, app_id)
    assert (desc.state, desc.num_restarts) == (AppState.SUCCEEDED, 1)
    assert (tmp_path / "attempted").exists()  # written by the first pod, on this host
    assert list(k8s.log_iter(app_id, "flaky", 0)) == ["second try\n"]  # the newest attempt


def test_a_failed_replica_stops_the_others(
    k8s: KubernetesScheduler, kubelet: str, kube_client: KubeClient, kube_namespace: str
) -> None:
    # (the trap ends the sleeper at once when stopped, instead of after the grace period)
    script = 'if [ "$RANK" = 1 ]; then exit 7; fi; trap "exit 143" TERM; sleep 600 & wait'
    app = AppDef("gang", [sh("w", script, num_replicas=2, env={"RANK": macros.replica_id})])
    app_id = k8s.submit(app, {"namespace": kube_namespace})
    desc = wait_terminal(k8s, app_id)
    assert desc.state == AppState.FAILED
    assert desc.msg == "replica w/1 failed: exit code 7 (Error)"
    name = app_id.split(":", 1)[1]

    def replica0_stopped() -> bool:
        job = kube_client.get("batch/v1", "Job", kube_namespace, f"{name}-w-0")
        conditions = (job or {}).get("status", {}).get("conditions") or []
        return any(c["type"] == "Failed" and c["reason"] == "DeadlineExceeded" for c in conditions)

    wait_for(replica0_stopped, 60, "the sleeping replica to be stopped")
    desc = k8s.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED
    assert desc.msg == "replica w/1 failed: exit code 7 (Error)"  # the cause, not the stop


def test_a_missing_image_is_surfaced_as_the_pending_reason(
    k8s: KubernetesScheduler, kubelet: str, kube_namespace: str
) -> None:
    role = Role("main", "anylaunch-test/no-such-image:1", entrypoint="true", resource=SMALL)
    cfg = {"namespace": kube_namespace, "image_pull_policy": "Never"}
    app_id = k8s.submit(AppDef("noimage", [role]), cfg)

    def image_error() -> DescribeAppResponse | None:
        desc = k8s.describe(app_id)
        assert desc is not None
        return desc if "ErrImageNeverPull" in desc.msg else None

    desc = wait_for(image_error, 60, "the image error to be reported")
    assert desc.state == AppState.PENDING
    k8s.cancel(app_id)
    desc = k8s.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED


def test_the_runner_runs_a_builtin_component_on_kubernetes(
    kubelet: str, kube_namespace: str, session_name: str
) -> None:
    from anylaunch.runner import get_runner

    with get_runner(session_name, kubeconfig=kubeconfig()) as runner:
        handle = runner.run_component(
            "utils.echo",
            {"msg": "hello kubernetes", "image": BUSYBOX},
            "kubernetes",
            {"namespace": kube_namespace},
        )
        assert handle.startswith(f"kubernetes://{session_name}/{kube_namespace}:echo-")
        status = runner.wait(handle, wait_interval=0.5, timeout=120)
        assert status is not None and status.state == AppState.SUCCEEDED
        assert list(runner.log_lines(handle, "echo", 0)) == ["hello kubernetes\n"]
        app = runner.describe(handle)
        assert app is not None and app.roles[0].args == ["hello kubernetes"]
        runner.delete(handle)
        assert runner.status(handle) is None


def test_a_docker_workspace_is_built_on_the_nodes_engine_and_run(
    k8s: KubernetesScheduler,
    kubelet: str,
    kube_namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the kubelet's dockershim runs on the engine the workspace image is built on
    monkeypatch.setenv("DOCKER_HOST", os.environ.get("DOCKER_HOST", DOCKER_HOST))
    (tmp_path / "hello.sh").write_text("echo hello from the workspace\n")
    role = Role("main", BUSYBOX, entrypoint="sh", args=["/hello.sh"], resource=SMALL)
    app_id = k8s.submit(
        AppDef("ws", [role]), {"namespace": kube_namespace}, workspace=str(tmp_path)
    )
    desc = wait_terminal(k8s, app_id)
    assert desc.state == AppState.SUCCEEDED, desc
    assert desc.roles[0].image.startswith("anylaunch-workspace:")
    assert list(k8s.log_iter(app_id, "main", 0)) == ["hello from the workspace\n"]
