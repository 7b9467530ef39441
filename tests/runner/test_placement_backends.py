"""Placement on the real backends: Kubernetes (the 1.20 API server and its one kubelet node)
and the two-node Slurm cluster.

- an app asking for more CPUs than the Kubernetes node has is not submitted there and runs to
  SUCCEEDED on Slurm (the capacity check);
- an app whose image Kubernetes cannot pull moves to Slurm within its startup timeout, and
  nothing of it is left on Kubernetes;
- a Slurm job whose node is set DOWN while it runs is relaunched as attempt 1, which reads
  what attempt 0 wrote under ``ANYLAUNCH_CHECKPOINT_URL`` and ends SUCCEEDED;
- an application failure (exit 3) is not relaunched.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import anylaunch.specs as specs
from anylaunch.runner import Runner, get_runner
from anylaunch.runner.placement import Placement, Target
from anylaunch.specs import AppState
from tests.schedulers.slurm.cluster import slurm_cluster as slurm_cluster  # a fixture

DEADLINE_S = 300.0
NO_SUCH_IMAGE = "anylaunch-test/no-such-image:1"


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slurm_cluster: Any) -> Iterator[Runner]:
    from tests.schedulers.kubernetes.kube_cluster import kubeconfig

    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ANYLAUNCH_HOME", str(tmp_path / "home"))
    # the Slurm nodes share this machine's filesystem: a path is a checkpoint URL they all see
    monkeypatch.setenv("ANYLAUNCH_CHECKPOINT_ROOT", str(tmp_path / "ckpt"))
    if kubeconfig() is not None:
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig()))
    with get_runner(f"pl{time.time_ns() % 10**8}") as runner:
        yield runner


def _app(name: str, image: str, script: str, cpu: int = 1) -> specs.AppDef:
    res = specs.Resource(cpu=cpu, gpu=0, memMB=64)
    role = specs.Role("w", image, entrypoint="sh", args=["-c", script], resource=res)
    return specs.AppDef(name, [role])


def _slurm(tmp_path: Path) -> Target:
    return Target("slurm", {"job_dir": str(tmp_path / "job")})


def _wait(runner: Runner, handle: str) -> specs.AppStatus:
    status = runner.wait(handle, wait_interval=0.5, timeout=DEADLINE_S)
    assert status is not None and status.placement is not None, status
    return status


def _pods(kube_client: Any, namespace: str) -> list[dict[str, Any]]:
    return list(kube_client.list("v1", "Pod", namespace, None))


def test_more_cpus_than_the_kubernetes_node_has_runs_on_slurm_instead(
    runner: Runner, tmp_path: Path, kube_client: Any, kube_namespace: str, kubelet: str
) -> None:
    before = {p["metadata"]["name"] for p in _pods(kube_client, kube_namespace)}
    app = _app("wide", NO_SUCH_IMAGE, "echo ran on $(hostname) with $ANYLAUNCH_ATTEMPT", cpu=3)
    placement = Placement([Target("kubernetes", {"namespace": kube_namespace}), _slurm(tmp_path)])

    handle = runner.run(app, placement=placement)
    status = _wait(runner, handle)

    assert status.state == AppState.SUCCEEDED, status
    entries = status.placement.entries if status.placement else ()
    assert [(e.scheduler, e.outcome) for e in entries] == [
        ("kubernetes", "skipped"),
        ("slurm", "ended"),
    ]
    assert entries[0].handle is None and entries[0].reason.startswith("no:"), entries[0]
    assert "CPU" in entries[0].reason and kubelet in entries[0].reason
    # nothing was ever created on Kubernetes for it
    assert {p["metadata"]["name"] for p in _pods(kube_client, kube_namespace)} == before
    lines = "".join(runner.log_lines(handle, "w", 0))
    assert "with 0" in lines, lines


def test_an_image_kubernetes_cannot_pull_moves_to_slurm_within_its_startup_timeout(
    runner: Runner, tmp_path: Path, kube_client: Any, kube_namespace: str, kubelet: str
) -> None:
    app = _app("unpullable", NO_SUCH_IMAGE, "echo attempt $ANYLAUNCH_ATTEMPT ran")
    placement = Placement(
        [
            # a 50m CPU request: the node's capacity says yes even while other tests load it
            Target(
                "kubernetes",
                {"namespace": kube_namespace, "reserved_millicpu": 950},
                startup_timeout=10,
            ),
            _slurm(tmp_path),
        ]
    )

    handle = runner.run(app, placement=placement)
    status = _wait(runner, handle)

    assert status.state == AppState.SUCCEEDED, status
    entries = status.placement.entries if status.placement else ()
    assert [(e.attempt, e.scheduler, e.outcome) for e in entries] == [
        (0, "kubernetes", "moved"),
        (1, "slurm", "ended"),
    ]
    assert "did not start within 10 s on kubernetes" in entries[0].reason
    assert "".join(runner.log_lines(handle, "w", 0)).strip() == "attempt 1 ran"
    k8s_attempt = entries[0].handle
    assert k8s_attempt is not None
    k8s_status = runner.status(k8s_attempt)
    assert k8s_status is None or k8s_status.state == AppState.CANCELLED, k8s_status
    app_id = k8s_attempt.rsplit("/", 1)[1]

    def nothing_left() -> bool:
        return not [
            p
            for p in _pods(kube_client, kube_namespace)
            if app_id in p["metadata"]["name"]
            and p.get("status", {}).get("phase") in ("Pending", "Running")
            and not p["metadata"].get("deletionTimestamp")
        ]

    deadline = time.monotonic() + 60
    while not nothing_left():
        assert time.monotonic() < deadline, "a pod of the moved app still runs on Kubernetes"
        time.sleep(0.5)


# attempt 0 writes its progress and keeps running until its node goes away; a later attempt
# finds the progress under the same checkpoint URL and finishes
RESUMABLE = """
mkdir -p "$ANYLAUNCH_CHECKPOINT_URL"
if [ -f "$ANYLAUNCH_CHECKPOINT_URL/step" ]; then
  echo "attempt $ANYLAUNCH_ATTEMPT resumes from $(cat "$ANYLAUNCH_CHECKPOINT_URL/step")"
else
  echo "attempt $ANYLAUNCH_ATTEMPT" > "$ANYLAUNCH_CHECKPOINT_URL/step"
  echo "attempt $ANYLAUNCH_ATTEMPT wrote its checkpoint"
  sleep 600
fi
"""


def _scontrol(*args: str) -> str:
    return subprocess.run(
        ["scontrol", *args], capture_output=True, text=True, check=True, timeout=60
    ).stdout


def _resume(node: str) -> None:
    """Puts the node back in service (a no-op if something already did: Slurm refuses to
    resume a node that is not down), and checks that it is."""
    subprocess.run(
        ["scontrol", "update", f"nodename={node}", "state=resume"],
        capture_output=True,
        timeout=60,
    )
    state = _scontrol("show", "node", node)
    assert "State=DOWN" not in state and "DRAIN" not in state, state


def _node_of(job_id: str) -> str:
    out = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T %N"], capture_output=True, text=True, timeout=60
    ).stdout.split()
    return out[1] if len(out) == 2 and out[0] == "RUNNING" else ""


def test_a_slurm_job_whose_node_goes_down_is_relaunched_and_resumes_from_its_checkpoint(
    runner: Runner, tmp_path: Path
) -> None:
    handle = runner.run(
        _app("resumes", "slurm-nodes", RESUMABLE),
        placement=Placement([_slurm(tmp_path)], max_infra_retries=1),
    )
    first = runner.status(handle)
    assert first is not None and first.placement is not None
    job = first.placement.current.handle
    assert job is not None
    job_id = job.rsplit("/", 1)[1]
    deadline = time.monotonic() + DEADLINE_S
    while not (node := _node_of(job_id)) or not list((tmp_path / "ckpt").rglob("step")):
        assert time.monotonic() < deadline, "attempt 0 never ran and wrote its checkpoint"
        time.sleep(0.5)
    _scontrol("update", f"nodename={node}", "state=down", "reason=anylaunch-placement-test")
    try:
        status = _wait(runner, handle)
    finally:
        _resume(node)

    assert status.state == AppState.SUCCEEDED, status
    entries = status.placement.entries if status.placement else ()
    assert [(e.attempt, e.outcome) for e in entries] == [(0, "relaunched"), (1, "ended")]
    assert "infrastructure" in entries[0].reason, entries[0].reason
    lines = "".join(runner.log_lines(handle, "w", 0))
    assert "attempt 1 resumes from attempt 0" in lines, lines


def test_an_application_failure_on_slurm_is_not_relaunched(runner: Runner, tmp_path: Path) -> None:
    handle = runner.run(
        _app("exits3", "slurm-nodes", "echo attempt $ANYLAUNCH_ATTEMPT; exit 3"),
        placement=Placement([_slurm(tmp_path), "local_cwd"], max_infra_retries=2),
    )
    status = _wait(runner, handle)

    assert status.state == AppState.FAILED
    assert status.placement is not None
    assert [(e.scheduler, e.outcome) for e in status.placement.entries] == [("slurm", "ended")]
    assert "".join(runner.log_lines(handle, "w", 0)).strip() == "attempt 0"


def test_a_reader_hands_an_unstarted_last_target_past_its_startup_timeout_to_the_driver(
    runner: Runner, kube_namespace: str, kubelet: str
) -> None:
    """A pod whose image cannot be pulled, on the last target, past its startup timeout: a
    process that only reads (an Airflow trigger) is told the driver must act
    (``next_move``), and the driver cancels it and ends the placement FAILED (startup)."""
    last = Target(
        "kubernetes", {"namespace": kube_namespace, "reserved_millicpu": 950}, startup_timeout=3
    )
    handle = runner.run(_app("stuck", NO_SUCH_IMAGE, "echo never"), placement=Placement([last]))
    with get_runner(f"rd{time.time_ns() % 10**8}") as reader:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            seen = reader.status(handle)
            assert seen is not None and seen.placement is not None
            if seen.placement.next_move:
                break
            assert time.monotonic() < deadline, seen
            time.sleep(0.5)
    assert seen.state == AppState.PENDING
    assert "did not start within 3 s on kubernetes" in seen.placement.next_move

    status = _wait(runner, handle)  # the driver settles it

    assert status.state == AppState.FAILED, status
    entries = status.placement.entries if status.placement else ()
    assert [(e.scheduler, e.outcome) for e in entries] == [("kubernetes", "ended")]
    pod_app = entries[0].handle
    assert pod_app is not None
    ended = runner.status(pod_app)
    assert ended is None or ended.state == AppState.CANCELLED, ended
