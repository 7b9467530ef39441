"""Preemption, eviction and lost hosts read as ``infrastructure``, images that never come as
``startup``, in each backend's own words (``anylaunch.runner.failures``):

- Kubernetes: a real eviction (the Eviction API) of a running replica on the provisioned
  1.20 cluster, and an image that is not on the node; the pod shapes newer clusters write
  (the ``DisruptionTarget`` condition of 1.26+, kubelet evictions, lost nodes, node
  shutdown) through the scheduler's own state translation;
- AWS Batch: describe_jobs shapes of a host that went away (and a spot reclaim) through the
  state translation, and a real job on moto that exits 3, which stays ``application``;
- SageMaker: a managed spot job stopped at MaxWaitTimeExceeded, by what it went through.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from anylaunch.runner import Runner, get_runner
from anylaunch.runner.failures import FailureCategory, decision_category, failure_category
from anylaunch.runner.watch import StartupTimedOut, WatchPolicy
from anylaunch.schedulers.aws.batch_state import job_state
from anylaunch.schedulers.aws.sagemaker import _declared, _job_state
from anylaunch.schedulers.kubernetes.client import KubeClient
from anylaunch.schedulers.kubernetes.scheduler import _job_replica
from anylaunch.schedulers.kubernetes.state import app_verdict
from anylaunch.specs import AppDef, AppState, AppStatus, Resource, Role
from tests.schedulers.aws import moto_env
from tests.schedulers.kubernetes import kube_cluster

# moto's fixtures, for the Batch job that really runs
moto_server = moto_env.moto_server
moto_aws = moto_env.moto_aws
batch_queue = moto_env.batch_queue
batch_docker = moto_env.batch_docker

# --- Kubernetes: what newer clusters write, through the scheduler's state translation ------

FAILED_JOB = {
    "spec": {"backoffLimit": 0},
    "status": {
        "failed": 1,
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit",
            }
        ],
    },
}


def failed_pod(status: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    """A Failed pod of replica w/0 whose container was killed (exit 137), plus ``status``."""
    killed = {"terminated": {"exitCode": 137, "reason": "Error"}}
    return {
        "metadata": {"name": "app-w-0-abcde", **metadata},
        "status": {"phase": "Failed", "containerStatuses": [{"state": killed}], **status},
    }


def kube_status(pod: dict[str, Any]) -> AppStatus:
    """The app status the kubernetes scheduler reports for a jobs-mode app whose only Job
    failed with ``pod`` as its newest pod."""
    replica = _job_replica("w", 0, FAILED_JOB, pod)
    state, msg = app_verdict(None, [replica], "", cancelled=False, workload_gone=False)
    return AppStatus(state, msg=msg)


def disruption(reason: str, message: str) -> dict[str, Any]:
    """The DisruptionTarget condition of Kubernetes >= 1.26 (Pod disruption conditions)."""
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2024-01-01T00:00:00Z",
    }


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("PreemptionByScheduler", "Preempted in order to admit pod ml/urgent on node n1"),
        ("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint"),
        ("EvictionByEvictionAPI", "Eviction API: evicting"),
        ("DeletionByPodGC", "PodGC: node no longer exists"),
        ("TerminationByKubelet", "The node was low on resource: memory."),
    ],
)
def test_a_disruption_target_pod_is_an_infrastructure_failure(reason: str, message: str) -> None:
    status = kube_status(failed_pod({"conditions": [disruption(reason, message)]}))
    assert status.state == AppState.FAILED
    assert f"DisruptionTarget ({reason}): {message}" in status.msg
    assert "exit code 137" in status.msg  # the exit stays visible, after the cause
    assert failure_category(status) == FailureCategory.INFRASTRUCTURE


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("Evicted", "The node was low on resource: ephemeral-storage."),
        ("NodeLost", "Node n1 which was running pod app-w-0-abcde is unresponsive"),
        ("Terminated", "Pod was terminated in response to imminent node shutdown."),
        ("Preempting", "Preempted in order to admit critical pod"),
    ],
)
def test_a_pod_the_node_ended_is_an_infrastructure_failure(reason: str, message: str) -> None:
    status = kube_status(failed_pod({"reason": reason, "message": message}))
    assert f"{reason}: {message}" in status.msg
    assert failure_category(status) == FailureCategory.INFRASTRUCTURE


def test_a_pod_deleted_while_it_ran_is_an_infrastructure_failure() -> None:
    # an eviction on a cluster < 1.26: the pod's deletion was asked for at 10:00:00 (its
    # deletionTimestamp less the 30 s grace), then its container was killed
    pod = failed_pod({}, deletionTimestamp="2024-01-01T10:00:30Z", deletionGracePeriodSeconds=30)
    pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = (
        "2024-01-01T10:00:01Z"
    )
    status = kube_status(pod)
    assert "deleted while it ran" in status.msg
    assert failure_category(status) == FailureCategory.INFRASTRUCTURE
    # a replica that failed by itself and was deleted later is the app's
    pod["status"]["containerStatuses"][0]["state"]["terminated"].update(
        exitCode=3, finishedAt="2024-01-01T09:59:00Z"
    )
    assert failure_category(kube_status(pod)) == FailureCategory.APPLICATION


def test_the_app_s_own_failures_keep_their_categories() -> None:
    exited = failed_pod({})
    exited["status"]["containerStatuses"][0]["state"]["terminated"].update(exitCode=3)
    assert failure_category(kube_status(exited)) == FailureCategory.APPLICATION
    oom = failed_pod({})
    oom["status"]["containerStatuses"][0]["state"]["terminated"].update(reason="OOMKilled")
    assert failure_category(kube_status(oom)) == FailureCategory.OUT_OF_MEMORY
    # the kubelet refusing a pod the node has no memory for is not the app running out of it
    refused = {
        "metadata": {"name": "app-w-0-abcde"},
        "status": {
            "phase": "Failed",
            "reason": "OutOfmemory",
            "message": "Pod Node didn't have enough resource: memory, requested: 1, used: 2, "
            "capacity: 2",
        },
    }
    assert failure_category(kube_status(refused)) == FailureCategory.STARTUP


# --- Kubernetes: the real cluster -------------------------------------------------------------


@pytest.fixture
def runner(kube_namespace: str, kubelet: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runner]:
    config = kube_cluster.kubeconfig()
    assert config is not None
    monkeypatch.setenv("KUBECONFIG", config)
    with get_runner(f"pre{time.time_ns() % 10**8}") as runner:
        yield runner


def _sh(script: str, image: str = kube_cluster.BUSYBOX) -> AppDef:
    res = Resource(cpu=1, gpu=0, memMB=128)
    return AppDef("evictee", [Role("w", image, entrypoint="sh", args=["-c", script], resource=res)])


def _wait(runner: Runner, handle: str, done: Any, what: str, timeout: float = 120) -> AppStatus:
    def seen() -> AppStatus | None:
        status = runner.status(handle)
        return status if status is not None and done(status) else None

    found: AppStatus = kube_cluster.wait_for(seen, timeout, what)
    return found


def test_an_evicted_replica_is_never_the_app_s_failure(
    runner: Runner, kube_client: KubeClient, kube_namespace: str
) -> None:
    """Kubernetes 1.20 (backoffLimit 0): the Job controller no longer counts a pod that is
    being deleted, so it starts a new one at once; the app runs again and succeeds. A
    cluster that counts the evicted pod as a failure ends the app FAILED: infrastructure."""
    app = _sh("trap 'exit 143' TERM; sleep 3 & wait")
    handle = runner.run(app, "kubernetes", cfg={"namespace": kube_namespace})
    try:
        running = _wait(runner, handle, lambda s: s.state == AppState.RUNNING, "the replica to run")
        evicted = running.roles[0].replicas[0].hostname
        policy = "policy/v1" if _serves(kube_client, "/apis/policy/v1") else "policy/v1beta1"
        kube_client.request(
            "POST",
            f"/api/v1/namespaces/{kube_namespace}/pods/{evicted}/eviction",
            body={
                "apiVersion": policy,
                "kind": "Eviction",
                "metadata": {"name": evicted, "namespace": kube_namespace},
            },
        )
        final = _wait(runner, handle, lambda s: s.state.is_terminal(), "the app to end")
        if final.state == AppState.FAILED:
            assert failure_category(final) == FailureCategory.INFRASTRUCTURE, final.msg
        else:
            assert final.state == AppState.SUCCEEDED, final
            assert final.roles[0].replicas[0].hostname != evicted  # a new pod ran it
    finally:
        runner.cancel(handle)


def _serves(client: KubeClient, path: str) -> bool:
    from anylaunch.schedulers.kubernetes.client import KubernetesApiError

    try:
        client.request("GET", path)
    except KubernetesApiError:
        return False
    return True


def test_a_pending_replica_says_its_image_does_not_come(
    runner: Runner, kube_namespace: str
) -> None:
    """imagePullPolicy IfNotPresent (the run option's default) and an image the node lacks:
    the kubelet tries a registry (none is reachable here) and the status says why the replica
    waits; the startup timeout ends it as a startup failure that says so."""
    app = _sh("true", image="anylaunch-no-such-image:1")
    handle = runner.run(app, "kubernetes", cfg={"namespace": kube_namespace})
    try:
        pulling = _wait(
            runner,
            handle,
            lambda s: "ErrImagePull" in s.msg or "ImagePullBackOff" in s.msg,
            "the pending replica's image pull error",
            timeout=60,
        )
        assert pulling.state == AppState.PENDING
        assert pulling.msg.startswith("w/0 pending: "), pulling.msg
        # what a startup timeout ends with (and the category the same words give)
        decision = WatchPolicy(0.5, startup_timeout=0.1, handle=handle).observe(
            pulling, time.time() + 1
        )
        assert isinstance(decision, StartupTimedOut)
        assert decision_category(decision) == FailureCategory.STARTUP
        failed = AppStatus(AppState.FAILED, msg=pulling.msg)
        assert failure_category(failed) == FailureCategory.STARTUP
    finally:
        runner.cancel(handle)


# --- AWS Batch ---------------------------------------------------------------------------------


def batch_status(job: dict[str, Any]) -> AppStatus:
    state, msg, _ = job_state({"jobId": "j", "createdAt": 0, **job}, time.time())
    return AppStatus(state, msg=msg)


@pytest.mark.parametrize(
    "job",
    [
        {"status": "FAILED", "statusReason": "Host EC2 (instance i-0123456789abcdef0) terminated."},
        {"status": "FAILED", "statusReason": "Host EC2 (instance i-0123456789abcdef0) stopped."},
        # the job's reason a summary, the last attempt's the cause; the exit code of the kill
        {
            "status": "FAILED",
            "statusReason": "Essential container in task exited",
            "container": {"exitCode": 143},
            "attempts": [
                {"statusReason": "Essential container in task exited"},
                {"statusReason": "Host EC2 (instance i-0abc) terminated."},
            ],
        },
        # Fargate Spot reclaims a task with exit code 137 and these words
        {
            "status": "FAILED",
            "statusReason": "Your Spot Task was interrupted.",
            "container": {"exitCode": 137},
        },
    ],
)
def test_a_batch_job_whose_host_went_away_is_an_infrastructure_failure(
    job: dict[str, Any],
) -> None:
    status = batch_status(job)
    assert status.state == AppState.FAILED
    assert failure_category(status) == FailureCategory.INFRASTRUCTURE, status.msg


def test_a_batch_job_retried_after_a_lost_host_that_then_exits_3_is_the_app_s() -> None:
    job = {
        "status": "FAILED",
        "statusReason": "Essential container in task exited",
        "container": {"exitCode": 3},
        "attempts": [
            {"statusReason": "Host EC2 (instance i-0abc) terminated."},
            {"statusReason": "Essential container in task exited"},
        ],
    }
    assert failure_category(batch_status(job)) == FailureCategory.APPLICATION


@pytest.mark.usefixtures("moto_aws", "batch_docker")
def test_a_real_batch_job_that_exits_3_is_an_application_failure(batch_queue: str) -> None:
    """moto runs the container and fails the job, without Batch's exit code or reason: no
    word of a lost host, so the failure is the app's."""
    role = Role(
        "main",
        moto_env.BATCH_IMAGE,
        entrypoint="sh",
        args=["-c", "exit 3"],
        resource=Resource(cpu=1, gpu=0, memMB=128),
    )
    with get_runner("pre-batch") as runner:
        handle = runner.run(AppDef("exits3", [role]), "aws_batch", cfg={"queue": batch_queue})
        status = runner.wait(handle, wait_interval=0.2, timeout=120)
    assert status is not None and status.state == AppState.FAILED, status
    assert failure_category(status) == FailureCategory.APPLICATION


# --- SageMaker ---------------------------------------------------------------------------------


def sagemaker_status(job: dict[str, Any]) -> AppStatus:
    state, msg = _job_state(job)
    return AppStatus(state, msg=msg, structured_error_msg=_declared(job, state, msg))


def spot_job(*seen: str, secondary: str = "MaxWaitTimeExceeded") -> dict[str, Any]:
    """A managed spot training job that went through the secondary statuses ``seen``
    (documented in SageMaker's "Managed Spot Training Lifecycle") and then stopped."""
    return {
        "TrainingJobStatus": "Stopped",
        "SecondaryStatus": secondary,
        "SecondaryStatusTransitions": [{"Status": s} for s in (*seen, "Stopping", secondary)],
    }


def test_a_spot_job_interrupted_past_its_max_wait_is_an_infrastructure_failure() -> None:
    job = spot_job(
        "Starting",
        "Downloading",
        "Training",
        "Interrupted",
        "Starting",
        "Downloading",
        "Training",
        "Interrupted",
        "Downloading",
        "Training",
    )
    status = sagemaker_status(job)
    assert status.state == AppState.FAILED
    assert "spot interruption" in status.msg
    assert failure_category(status) == FailureCategory.INFRASTRUCTURE


def test_a_spot_job_never_launched_is_a_startup_failure() -> None:
    status = sagemaker_status(spot_job("Starting"))
    assert "did not start" in status.msg
    assert failure_category(status) == FailureCategory.STARTUP


def test_a_job_that_ran_out_of_time_is_the_app_s() -> None:
    trained = sagemaker_status(spot_job("Starting", "Downloading", "Training"))
    assert failure_category(trained) == FailureCategory.APPLICATION
    too_long = sagemaker_status(spot_job("Starting", "Training", secondary="MaxRuntimeExceeded"))
    assert too_long.msg == "stopped: MaxRuntimeExceeded"
    assert failure_category(too_long) == FailureCategory.APPLICATION
