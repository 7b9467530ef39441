"""What every engine's Kubernetes run shares: a fresh namespace per run, the benchmark's own
API client, and the measurements read once the run is over (the engine's requests from the
audit log, the delay split at the kubelet's report)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from tests.benchmarks.engine_scale import harness
from tests.deployments.processes import wait_until
from tests.schedulers.kubernetes import kube_cluster

#: How long each job sleeps, and the waiters each Prefect or Dagster run compares.
SLEEP_S = int(os.environ.get("ANYLAUNCH_ENGINE_SCALE_SLEEP_S", "30"))
TOOLS = ("anylaunch", "incumbent")


@contextlib.contextmanager
def namespace(client: Any) -> Iterator[str]:
    """A fresh namespace (with its default service account), deleted and gone afterwards."""
    from anylaunch.schedulers.kubernetes.client import KubernetesApiError

    name = f"engine-scale-{uuid.uuid4().hex[:8]}"
    path = f"/api/v1/namespaces/{name}"
    client.request(
        "POST",
        "/api/v1/namespaces",
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )
    wait_until(lambda: client.request("GET", f"{path}/serviceaccounts/default"), 60, "default SA")
    try:
        yield name
    finally:
        client.request("DELETE", path)

        def gone() -> bool:
            try:
                client.request("GET", path)
            except KubernetesApiError as e:
                return e.status == 404
            return False

        wait_until(gone, 600, f"namespace {name} deleted", interval=1.0)


def bench_client() -> Any:
    """A client of the cluster's API server whose requests the audit log names as the
    benchmark's (user agent ``harness.BENCH_AGENT``), not the engine's."""
    from anylaunch.schedulers.kubernetes.client import KubeClient

    client = KubeClient.from_config(kube_cluster.kubeconfig())
    client.api_client.user_agent = harness.BENCH_AGENT
    return client


def warn_without_audit_log() -> None:
    if not harness.AUDIT_LOG.exists():
        print(
            f"no {harness.AUDIT_LOG}: engine_api_requests is not measured (restart the API server)"
        )


def read_audit(
    entry: dict[str, Any],
    measured: dict[str, Any],
    namespace: str,
    exits: dict[int, harness.PodExit],
) -> None:
    """Adds to ``entry`` what the audit log says of the run in ``namespace``: the requests by
    client (``engine_api_requests`` and the rest) and the delay split at the kubelet's report.
    A watch is logged only once it ends: call this after the engine's processes ended theirs."""
    mark, end = measured["audit_mark"], measured["audit_end"]
    entry.update(harness.client_summary(harness.audit_requests(mark, end, namespace)))
    files, _ = harness.audit_files(mark)
    reports = harness.kubelet_status_reports(harness.audit_lines(files), mark.time, end, namespace)
    entry.update(harness.delay_split(measured["tis"], exits, reports))


def check(entry: dict[str, Any], n: int) -> None:
    """Every task succeeded, and each one's delay was measured."""
    print(entry)
    assert entry["task_states"] == {"success": n}
    assert entry["delays_measured"] == n


def measure_tools(
    engine: str,
    n: int,
    client: Any,
    run: Callable[[str, dict[str, Any]], dict[str, Any]],
    keep: tuple[str, ...] = (),
) -> None:
    """Measures each tool of a Prefect or Dagster benchmark on ``n`` pods, each in a namespace of
    its own, records its entry in ``.benchmarks/engine_scale_{engine}.json``, then checks them.

    Args:
        run: ``run(tool, parameters)`` starts the tool's flow or job and waits for its end
            (``parameters``: ``n``, ``sleep_s``, ``namespace``); returns what
            :func:`~tests.benchmarks.engine_scale.harness.measure_run` measured
        keep: keys of that measurement copied into the entry as they are
    """
    from tests.benchmarks.engine_scale.report import record

    warn_without_audit_log()
    entries = []
    for tool in TOOLS:
        with namespace(client) as ns:
            measured = run(tool, {"n": n, "sleep_s": SLEEP_S, "namespace": ns})
            exits = harness.pod_container_exits(ns)
            entry = harness.summarize_engine(measured, {i: e.end for i, e in exits.items()})
            entry.update({key: measured[key] for key in keep})
        # the engine's process has ended (and its watches with it): the audit log is complete
        read_audit(entry, measured, ns, exits)
        record("kubernetes", n, tool, entry, engine=engine)
        entries.append(entry)
    for entry in entries:  # both waiters measured, even if one had a failed task
        check(entry, n)


def timeout(n: int) -> float:
    """A safety net for one run of ``n`` jobs, never a measurement."""
    return SLEEP_S + 300 + 6 * n
