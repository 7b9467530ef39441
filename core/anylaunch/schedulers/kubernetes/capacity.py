"""Whether a cluster can run an app's pods now: the ``kubernetes`` scheduler's capacity check.

The pods are the ones the scheduler would submit (rendered as at dryrun, nothing created);
what they ask for is their real requests, counted as the kube-scheduler counts them (the sum
of the containers' requests, or the largest init container's if more, plus the pod
overhead). The check reads the cluster with at most three calls:

1. the target namespace's ResourceQuotas: an app whose pods (or Jobs) would take a quota past
   its ``hard`` limit is refused by the API server, so the answer is ``no``, naming the quota,
   the resource, hard, used and asked;
2. the nodes: a node takes the pods when it is Ready, not cordoned, its NoSchedule and
   NoExecute taints are tolerated by the pods and its labels match their ``nodeSelector``;
3. the pods bound to nodes and not finished (all namespaces): their requests are what the
   nodes have given away.

Then the replicas are placed on what the nodes have free
(:func:`~anylaunch.schedulers.common.capacity.fit`). Not read: node affinity, pod
(anti-)affinity, topology spread, extended resources other than ``nvidia.com/gpu``,
LimitRange defaults and priority preemption (a high-priority pod may start where
nothing is free). Pods of an array share one index's demand, as everywhere.

>>> parse_quantity("1500m"), parse_quantity("2Gi"), parse_quantity("1e3")
(Decimal('1.500'), Decimal('2147483648'), Decimal('1E+3'))
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from anylaunch.schedulers.common.capacity import CanRun, Capacity, Demand, Room, fit
from anylaunch.schedulers.kubernetes.client import KubeClient, KubernetesSchedulerError
from anylaunch.schedulers.kubernetes.names import LABEL_REPLICA_ID, LABEL_ROLE
from anylaunch.schedulers.kubernetes.request import KubernetesRequest

__all__ = ["check_capacity", "parse_quantity", "pod_requests", "quota_refusal", "request_pods"]

GPU = "nvidia.com/gpu"
_MIB = Decimal(2**20)
_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
#: Taint effects that keep a pod that does not tolerate them off a node.
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
#: Quota resources the app's pods add to: quota key -> (requests or limits, resource).
_POD_QUOTAS = {
    "requests.cpu": ("requests", "cpu"),
    "cpu": ("requests", "cpu"),
    "limits.cpu": ("limits", "cpu"),
    "requests.memory": ("requests", "memory"),
    "memory": ("requests", "memory"),
    "limits.memory": ("limits", "memory"),
    f"requests.{GPU}": ("requests", GPU),
}
#: Object-count quota keys -> (apiVersion, kind) of the app's objects they count.
_COUNT_QUOTAS = {
    "count/jobs.batch": ("batch/v1", "Job"),
    "services": ("v1", "Service"),
    "count/services": ("v1", "Service"),
    "configmaps": ("v1", "ConfigMap"),
    "count/configmaps": ("v1", "ConfigMap"),
}


def parse_quantity(text: object) -> Decimal:
    """A Kubernetes resource quantity (``"100m"``, ``"1Gi"``, ``"2"``, ``"1e3"``) as a number.

    Raises:
        KubernetesSchedulerError: not a quantity.
    """
    match = _QUANTITY.match(str(text).strip())
    if match is None:
        raise KubernetesSchedulerError(f"{text!r} is not a Kubernetes resource quantity")
    number, exponent, suffix = match.groups()
    try:
        value = Decimal(number + (exponent or ""))
    except InvalidOperation as e:  # pragma: no cover - the pattern admits only numbers
        raise KubernetesSchedulerError(f"{text!r} is not a Kubernetes resource quantity") from e
    if suffix in _BINARY:
        return value * Decimal(2 ** _BINARY[suffix])
    if suffix:
        return value.scaleb(_DECIMAL[suffix])
    return value


def _container_amounts(container: Mapping[str, Any], kind: str) -> dict[str, Decimal]:
    resources = container.get("resources") or {}
    amounts = dict(resources.get("limits") or {}) if kind == "requests" else {}
    # the API server defaults a missing request to the limit
    amounts.update(resources.get(kind) or {})
    return {name: parse_quantity(value) for name, value in amounts.items()}


def pod_requests(spec: Mapping[str, Any], kind: str = "requests") -> dict[str, Decimal]:
    """What a pod asks for (``kind``: requests or limits), as the kube-scheduler counts it:
    per resource the containers' sum or the largest init container's, whichever is more, plus
    the pod overhead.

    >>> pod_requests({"containers": [{"resources": {"requests": {"cpu": "500m"}}},
    ...                              {"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
    ...               "initContainers": [{"resources": {"requests": {"cpu": "2"}}}]})
    {'cpu': Decimal('2'), 'memory': Decimal('1073741824')}
    """
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        for name, value in _container_amounts(container, kind).items():
            total[name] = total.get(name, Decimal(0)) + value
    for container in spec.get("initContainers") or []:
        for name, value in _container_amounts(container, kind).items():
            total[name] = max(total.get(name, Decimal(0)), value)
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, Decimal(0)) + parse_quantity(value)
    return total


def request_pods(
    request: KubernetesRequest, role_names: Mapping[str, str], one_index: bool = False
) -> list[tuple[str, dict[str, Any]]]:
    """(``role/replica``, pod spec) of every pod the request starts at once: a batch/v1 Job's
    template ``parallelism`` times, each embedded Pod (Volcano) once. ``role_names`` maps role
    labels back to role names; ``one_index``: an array's, whose indices share one demand.
    """
    found: list[tuple[str, dict[str, Any]]] = []
    for obj in [*request.objects, *request.embedded_objects]:
        if obj.get("kind") == "Pod":
            meta, spec, count = obj.get("metadata") or {}, obj.get("spec") or {}, 1
        elif (obj.get("apiVersion"), obj.get("kind")) == ("batch/v1", "Job"):
            job = obj.get("spec") or {}
            template = job.get("template") or {}
            meta, spec = template.get("metadata") or {}, template.get("spec") or {}
            count = int(job.get("parallelism", 1))
            if job.get("completions") is not None:
                count = min(count, int(job["completions"]))
        else:
            continue
        labels = meta.get("labels") or {}
        label = str(labels.get(LABEL_ROLE, "?"))
        role = role_names.get(label, label)
        replica = labels.get(LABEL_REPLICA_ID)
        for k in range(count):
            found.append((f"{role}/{replica if replica is not None else k}", spec))
    return found[:1] if one_index else found


def _demand(name: str, spec: Mapping[str, Any]) -> Demand:
    asked = pod_requests(spec)
    return Demand(
        name,
        float(asked.get("cpu", Decimal(0))),
        math.ceil(asked.get("memory", Decimal(0)) / _MIB),
        math.ceil(asked.get(GPU, Decimal(0))),
    )


def _tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Whether one of ``tolerations`` tolerates ``taint`` (Kubernetes' matching rule)."""
    for tol in tolerations:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        operator = tol.get("operator") or "Equal"
        if not tol.get("key"):
            if operator == "Exists":  # an empty key with Exists tolerates every taint
                return True
            continue
        if tol["key"] != taint.get("key"):
            continue
        if operator == "Exists" or (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _unfit_node(node: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    """Why a pod of ``spec`` cannot go on ``node`` (``""`` if it can)."""
    status = node.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    if not ready:
        return "not Ready"
    if (node.get("spec") or {}).get("unschedulable"):
        return "cordoned (unschedulable)"
    tolerations = spec.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in _BLOCKING_EFFECTS and not _tolerates(tolerations, taint):
            value = f"={taint['value']}" if taint.get("value") else ""
            return f"taint {taint.get('key')}{value}:{taint['effect']} not tolerated"
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return f"label {key}={value} (nodeSelector) missing"
    return ""


def _rooms(
    nodes: Sequence[Mapping[str, Any]], bound: Sequence[Mapping[str, Any]], names: Iterable[str]
) -> list[Room]:
    """What ``names`` (nodes) have free: allocatable minus the requests of their pods."""
    used: dict[str, dict[str, Decimal]] = {}
    counts: dict[str, int] = {}
    for pod in bound:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            continue
        counts[node] = counts.get(node, 0) + 1
        mine = used.setdefault(node, {})
        for name, value in pod_requests(pod.get("spec") or {}).items():
            mine[name] = mine.get(name, Decimal(0)) + value
    by_name = {str(n["metadata"]["name"]): n for n in nodes}
    rooms = []
    for name in names:
        alloc = {
            k: parse_quantity(v)
            for k, v in (by_name[name].get("status") or {}).get("allocatable", {}).items()
        }
        if "pods" in alloc and counts.get(name, 0) >= alloc["pods"]:
            continue  # no pod slot left
        taken = used.get(name, {})
        free = {
            r: alloc.get(r, Decimal(0)) - taken.get(r, Decimal(0)) for r in ("cpu", "memory", GPU)
        }
        rooms.append(
            Room(
                name,
                float(free["cpu"]),
                math.floor(free["memory"] / _MIB),
                math.floor(free[GPU]),
            )
        )
    return rooms


def _fmt(resource: str, amount: Decimal) -> str:
    """``amount`` of ``resource`` as a quantity (cpu in millicores, memory in Mi)."""
    if resource.endswith("cpu") and amount != amount.to_integral_value():
        return f"{int(amount * 1000)}m"
    if resource.endswith("memory") and amount % _MIB == 0:
        return f"{int(amount / _MIB)}Mi"
    return str(amount.normalize()) if amount == amount.to_integral_value() else str(amount)


def _in_scope(quota: Mapping[str, Any], spec: Mapping[str, Any]) -> bool | None:
    """Whether a quota's scopes take in a pod of ``spec``; None for scopes not understood."""
    scopes = list((quota.get("spec") or {}).get("scopes") or [])
    selector = (quota.get("spec") or {}).get("scopeSelector") or {}
    expressions = selector.get("matchExpressions") or []
    if not scopes and not expressions:
        return True
    terminating = spec.get("activeDeadlineSeconds") is not None
    best_effort = not any(pod_requests(spec, k) for k in ("requests", "limits"))
    checks: list[tuple[object, object, list[object]]] = [(s, "Exists", []) for s in scopes]
    checks += [(e.get("scopeName"), e.get("operator"), e.get("values") or []) for e in expressions]
    for scope, operator, values in checks:
        if scope == "PriorityClass":
            name = spec.get("priorityClassName")
            hit = {
                "In": name in values,
                "NotIn": name not in values,
                "Exists": name is not None,
                "DoesNotExist": name is None,
            }.get(str(operator))
        elif scope in ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort"):
            fact = terminating if "Terminating" in scope else best_effort
            hit = fact != scope.startswith("Not") if operator == "Exists" else None
        else:
            hit = None
        if hit is None:
            return None
        if not hit:
            return False
    return True


def quota_refusal(
    quotas: Sequence[Mapping[str, Any]],
    pods: Sequence[tuple[str, Mapping[str, Any]]],
    objects: Sequence[Mapping[str, Any]],
) -> str:
    """Why the namespace's ResourceQuotas refuse the app (``""`` if they do not): a quota whose
    ``used`` plus what the app asks would pass ``hard``. Quotas with scopes not understood are
    skipped (no false ``no``)."""
    for quota in quotas:
        status = quota.get("status") or {}
        hard = status.get("hard") or (quota.get("spec") or {}).get("hard") or {}
        used = status.get("used") or {}
        specs = [spec for _, spec in pods]
        scoped = [_in_scope(quota, spec) for spec in specs]
        if None in scoped:
            continue
        mine = [spec for spec, hit in zip(specs, scoped, strict=True) if hit]
        scopes_set = bool((quota.get("spec") or {}).get("scopes")) or bool(
            (quota.get("spec") or {}).get("scopeSelector")
        )
        asked: dict[str, Decimal] = {}
        for key in ("pods", "count/pods"):
            asked[key] = Decimal(len(mine))
        for key, (kind, resource) in _POD_QUOTAS.items():
            asked[key] = sum(
                (pod_requests(s, kind).get(resource, Decimal(0)) for s in mine), Decimal(0)
            )
        if not scopes_set:  # scoped quotas count pods only
            for key, (api_version, kind) in _COUNT_QUOTAS.items():
                asked[key] = Decimal(
                    sum(
                        1
                        for o in objects
                        if (o.get("apiVersion"), o.get("kind")) == (api_version, kind)
                    )
                )
        for key, want in asked.items():
            if key not in hard or want <= 0:
                continue
            limit = parse_quantity(hard[key])
            have = parse_quantity(used.get(key, "0"))
            if have + want > limit:
                name = quota.get("metadata", {}).get("name", "?")
                return (
                    f"ResourceQuota {name} refuses the app: {key} hard {hard[key]}, used "
                    f"{used.get(key, '0')}, the app asks {_fmt(key, want)} more"
                )
    return ""


def check_capacity(
    client: KubeClient,
    namespace: str,
    pods: Sequence[tuple[str, dict[str, Any]]],
    objects: Sequence[Mapping[str, Any]],
    calls: int = 0,
) -> Capacity:
    """Whether the cluster can run ``pods`` (``role/replica``, pod spec) in ``namespace`` now,
    with the app's ``objects`` (for object-count quotas): quotas first, then the nodes, then
    the pods on them (one list call each; see the module docstring). ``calls``: calls
    already made for this check."""
    quotas = client.request("GET", f"/api/v1/namespaces/{namespace}/resourcequotas")
    calls += 1
    refusal = quota_refusal((quotas or {}).get("items") or [], pods, objects)
    if refusal:
        return Capacity(CanRun.NO, refusal, calls=calls)
    nodes = ((client.request("GET", "/api/v1/nodes") or {}).get("items")) or []
    calls += 1
    # pods that place alike (same node constraints) share one fit
    groups: dict[str, tuple[list[str], list[Demand], str]] = {}
    for name, spec in pods:
        unfit = {str(n["metadata"]["name"]): _unfit_node(n, spec) for n in nodes}
        key = repr(sorted(unfit.items()))
        eligible = [node for node, why in unfit.items() if not why]
        excluded = "; ".join(f"{node}: {why}" for node, why in sorted(unfit.items()) if why)
        group = groups.setdefault(key, (eligible, [], excluded))
        group[1].append(_demand(name, spec))
    for eligible, needs, excluded in groups.values():
        if not eligible:
            why = f" ({excluded})" if excluded else ""
            return Capacity(
                CanRun.NO,
                f"no node can take replica {needs[0].name}{why}",
                calls=calls,
            )
    query = {"fieldSelector": "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"}
    bound = (client.request("GET", "/api/v1/pods", query=query) or {}).get("items") or []
    calls += 1
    reasons = []
    for eligible, needs, excluded in groups.values():
        answer = fit(needs, _rooms(nodes, bound, eligible), calls=calls)
        if answer.can_run != CanRun.YES:
            left_out = f"; not counted: {excluded}" if excluded else ""
            reason = f"{answer.reason}, counting requests{left_out}"
            return Capacity(answer.can_run, reason, calls=calls)
        reasons.append(answer.reason)
    return Capacity(CanRun.YES, "; ".join(reasons) or "no pods to place", calls=calls)
