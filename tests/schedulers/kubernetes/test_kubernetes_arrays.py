"""Job arrays on the kubernetes scheduler: the fallback (one Job per index, at most K released
at once) on the provisioned 1.20 cluster, and the Indexed Job a >= 1.29 server gets, rendered
in a dryrun and checked against the batch/v1 Job schema of the kubernetes client's models
(generated from a recent Kubernetes OpenAPI; the 1.20 server cannot check it)."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

import pytest

from anylaunch.runner.api import Runner
from anylaunch.schedulers.kubernetes import arrays
from anylaunch.schedulers.kubernetes.names import LABEL_APP_ID
from anylaunch.schedulers.kubernetes_scheduler import KubernetesScheduler
from anylaunch.specs import AppState, Resource, macros
from tests.schedulers.arrays_kit import (
    FAILING_INDEX,
    PARALLELISM,
    SIZE,
    check_failed_array,
    check_retried,
    failing_array_app,
)
from tests.schedulers.kubernetes.conftest import CountingClient
from tests.schedulers.kubernetes.kube_cluster import BUSYBOX

TIMEOUT = 900  # the node is slow: 20 pods, 4 at a time


def check_model(value: Any, type_name: str, path: str = "") -> None:
    """``value`` (a manifest dict) fits the kubernetes client's model ``type_name``: every key
    is a field of it (recursively) and every scalar has the field's type."""
    import kubernetes.client as k8s_client

    if type_name.startswith("list["):
        assert isinstance(value, list), path
        for i, item in enumerate(value):
            check_model(item, type_name[5:-1], f"{path}[{i}]")
        return
    if type_name.startswith(("dict(", "dict[")):
        assert isinstance(value, dict), path
        inner = type_name[5:-1].split(", ", 1)[1]
        for key, item in value.items():
            check_model(item, inner, f"{path}.{key}")
        return
    scalars: dict[str, Any] = {"str": str, "int": int, "bool": bool, "object": object}
    scalars["float"] = (int, float)
    if type_name in scalars:
        assert isinstance(value, scalars[type_name]), f"{path}: {value!r} is not {type_name}"
        return
    model = getattr(k8s_client, type_name)
    fields = {json_key: attr for attr, json_key in model.attribute_map.items()}
    assert isinstance(value, dict), path
    for key, item in value.items():
        assert key in fields, f"{path}.{key} is not a field of {type_name}"
        check_model(item, model.openapi_types[fields[key]], f"{path}.{key}")


def test_indexed_job_for_new_servers_fits_the_job_schema() -> None:
    scheduler = KubernetesScheduler("arr")
    app = failing_array_app(BUSYBOX)
    info = scheduler.submit_dryrun(app, {"namespace": "ml", "indexed_job": "yes"})
    request: Any = info.request
    (job,) = request.objects
    check_model(job, "V1Job")
    with pytest.raises(AssertionError, match="completionMod is not a field"):  # it does check
        check_model({"spec": {"completionMod": "Indexed"}}, "V1Job")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert (spec["completions"], spec["parallelism"]) == (SIZE, PARALLELISM)
    assert spec["backoffLimitPerIndex"] == 0
    container = spec["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["sh", "-c"]
    assert "anylaunch_slot=$$JOB_COMPLETION_INDEX" in container["command"][2]  # kubelet-escaped
    assert {"name": arrays.SELECTED_ENV, "value": "all"} in container["env"]
    text = str(info)
    assert "completionMode: Indexed" in text and "[19] sh -c" in text
    assert arrays.indexed_supported({"major": "1", "minor": "29"})
    assert not arrays.indexed_supported({"major": "1", "minor": "28"})


def _started_finished(pod: dict[str, Any]) -> tuple[datetime, datetime]:
    (status,) = pod["status"]["containerStatuses"]
    term = status["state"]["terminated"]
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    return datetime.strptime(term["startedAt"], fmt), datetime.strptime(term["finishedAt"], fmt)


def test_fallback_on_the_cluster_runs_at_most_four_and_retries_only_the_failed(
    k8s: KubernetesScheduler, counting_client: CountingClient, kube_namespace: str, kubelet: str
) -> None:
    app = failing_array_app(
        BUSYBOX,
        resource=Resource(cpu=1, gpu=0, memMB=32),
        role_kwargs={"env": {"APP_ID": macros.app_id}},
    )
    cfg: dict[str, Any] = {"namespace": kube_namespace, "reserved_millicpu": 950}
    info = k8s.submit_dryrun(app, cfg)  # indexed_job=auto: the 1.20 server gets the fallback
    request: Any = info.request
    jobs = request.objects
    assert [j["kind"] for j in jobs] == ["Job"] * SIZE
    assert [j["spec"]["parallelism"] for j in jobs] == [1] * PARALLELISM + [0] * (SIZE - 4)
    assert jobs[3]["spec"]["template"]["spec"]["containers"][0]["command"][-1] == "shard-3"

    def factory(session_name: str, **kwargs: Any) -> KubernetesScheduler:
        return k8s

    with Runner(k8s.session_name, {"kubernetes": factory}) as runner:
        handle = runner.schedule(info)
        name = handle.rsplit(":", 1)[1]
        sampler = KubernetesScheduler(k8s.session_name, client=k8s.client()).client()
        samples: list[int] = []
        stop = threading.Event()

        def sample() -> None:  # pods not yet ended, every half second, while the array runs
            while not stop.wait(0.5):
                pods = sampler.list("v1", "Pod", kube_namespace, f"{LABEL_APP_ID}={name}")
                phases = [p.get("status", {}).get("phase") for p in pods]
                samples.append(sum(ph not in ("Succeeded", "Failed") for ph in phases))

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            status = runner.wait(handle, wait_interval=2.0, timeout=TIMEOUT)
        finally:
            stop.set()
            thread.join()
        assert samples and max(samples) <= PARALLELISM, samples
        check_failed_array(status)
        assert status is not None and status.array is not None
        assert status.array.exit_codes[FAILING_INDEX] == 1

        # a describe: none from the shared watch's cache (the runner's waits use it), three
        # list calls (record, Jobs, pods) without it; nothing left to release
        counting_client.calls.clear()
        runner.status(handle)
        assert counting_client.calls == [], counting_client.calls
        fresh = KubernetesScheduler(k8s.session_name, client=counting_client)
        described = fresh.describe(handle.split("/", 3)[3])
        assert described is not None and described.array is not None
        assert len(counting_client.calls) == 3, counting_client.calls
        assert all(c.startswith("GET ") for c in counting_client.calls)

        pods = counting_client.list("v1", "Pod", kube_namespace, f"{LABEL_APP_ID}={name}")
        spans = [_started_finished(p) for p in pods]
        assert len(spans) == SIZE
        most = max(sum(1 for s, f in spans if s <= t < f) for t, _ in spans)
        assert most <= PARALLELISM, sorted(spans)
        assert list(runner.log_lines(handle, "shard", k=12)) == ["index=12 of=20 arg=shard-12\n"]

        retried = runner.retry_failed(handle)
        new_name = retried.rsplit(":", 1)[1]
        new_jobs = counting_client.list(
            "batch/v1", "Job", kube_namespace, f"{LABEL_APP_ID}={new_name}"
        )
        assert [j["metadata"]["name"] for j in new_jobs] == [f"{new_name}-shard-{FAILING_INDEX}"]
        # the copied pod names the new app, not the one it was copied from
        container = new_jobs[0]["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container.get("env") or []}
        assert env["APP_ID"].endswith(new_name), env
        retry_status = runner.wait(retried, wait_interval=2.0, timeout=TIMEOUT)
        check_retried(retry_status)
        assert list(runner.log_lines(retried, "shard", k=FAILING_INDEX)) == [
            "index=7 of=20 arg=shard-7\n"
        ]
        assert retry_status is not None and retry_status.state == AppState.FAILED


@pytest.mark.parametrize("value", ["maybe"])
def test_bad_indexed_job_option_is_refused(value: str) -> None:
    from anylaunch.specs.errors import InvalidRunConfigException

    with pytest.raises(InvalidRunConfigException, match="indexed_job"):
        KubernetesScheduler("arr").submit_dryrun(failing_array_app(BUSYBOX), {"indexed_job": value})
