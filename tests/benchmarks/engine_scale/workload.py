"""The one workload of the engine-scale benchmark, whatever the engine and the waiter: job ``i``
runs ``sh -c SCRIPT`` (sleep ``SLEEP_S`` seconds, then note the time it ended for the local
backends) with ``BENCH_INDEX=i`` in its environment, which is how the benchmark pairs a job's
end with the engine's record of its task. On Kubernetes every waiter runs the same busybox pod:
10m CPU and 64 MiB requested, limits 1 CPU and 128 MiB (anylaunch's ``reserved_*`` run options
give the same pod), so the 2-core node runs as many at once for every waiter.

>>> env = bench_env(3, 20)
>>> env["BENCH_INDEX"], env["SLEEP_S"]
('3', '20')
>>> container = k8s_container(3, 20)
>>> container["resources"]["requests"], container["env"][0]
({'cpu': '10m', 'memory': '64Mi'}, {'name': 'BENCH_INDEX', 'value': '3'})
"""

from __future__ import annotations

from typing import Any

import anylaunch.specs as specs

#: the job of every task: sleep, then note the wall-clock time it ended (local backends)
SCRIPT = (
    'sleep "$SLEEP_S"; if [ -n "$BENCH_OUT" ]; then date +%s.%N > "$BENCH_OUT/$BENCH_INDEX"; fi'
)
K8S_IMAGE = "busybox:latest"
K8S_RESOURCE = specs.Resource(cpu=1, gpu=0, memMB=128)
#: requests: 1000m - 990m = 10m CPU, 128 - 64 = 64 MiB (limits: the resource's 1 CPU, 128 MiB)
K8S_RESERVED = {"reserved_millicpu": 990, "reserved_memmb": 64}
K8S_REQUESTS = {"cpu": "10m", "memory": "64Mi"}
K8S_LIMITS = {"cpu": "1", "memory": "128Mi"}
#: the pod's container name for the incumbents (anylaunch names it after the role)
CONTAINER = "sleeper"


def bench_env(index: int, sleep_s: int, out: str = "") -> dict[str, str]:
    """The environment of job ``index``."""
    return {"BENCH_INDEX": str(index), "SLEEP_S": str(sleep_s), "BENCH_OUT": out}


def sleeper_app(
    image: str, resource: specs.Resource | None = None, env: dict[str, str] | None = None
) -> specs.AppDef:
    """The job as an anylaunch app (one role, one replica)."""
    role = specs.Role(
        name=CONTAINER, image=image, entrypoint="sh", args=["-c", SCRIPT], env=dict(env or {})
    )
    if resource is not None:
        role.resource = resource
    return specs.AppDef(name=CONTAINER, roles=[role])


def k8s_cfg(namespace: str) -> dict[str, Any]:
    """anylaunch's Kubernetes run options for the benchmark's pods in ``namespace``."""
    return {"namespace": namespace, "image_pull_policy": "Never", **K8S_RESERVED}


def k8s_container(index: int, sleep_s: int) -> dict[str, Any]:
    """The same pod's container as a Kubernetes manifest (the incumbents' jobs)."""
    return {
        "name": CONTAINER,
        "image": K8S_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", SCRIPT],
        "env": [{"name": k, "value": v} for k, v in bench_env(index, sleep_s).items()],
        "resources": {"requests": dict(K8S_REQUESTS), "limits": dict(K8S_LIMITS)},
    }
