"""Properties of issue 31's scheduler inputs the backend would reject later: host ports two
replicas would publish, and resources beyond a backend's known limits. For any such input the
scheduler refuses it with the project's error naming the field (and the limit), before the
job exists; inputs within the limits still pass.

Which schedulers map ``Role.port_map`` to host ports: ``lsf`` in containers without
``host_network`` (``docker run -p P:P`` per replica: refused when two replicas would publish
one port), ``local_docker`` (publishes every port on a host port the engine picks, so no two
replicas ever share one: checked below). Kubernetes sets container ports only (no
``hostPort``); the other backends publish nothing.

Known limits: an AWS Batch multi-node job's instance type (its published vCPUs, GPUs, memory);
the real Slurm cluster's partitions (the largest node's CPUs, all nodes' CPUs; one ``sinfo``
at submission). SageMaker takes its resources from the instance type (AWS's own list of types
is checked at dryrun); Docker refuses CPUs beyond the host when the container is created;
Kubernetes node capacity is not static (an unschedulable pod is a startup failure).
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anylaunch.runner import get_runner
from anylaunch.schedulers.aws.batch_request import check_fits_instance_type
from anylaunch.schedulers.slurm.limits import check_partition_limits, parse_sinfo
from anylaunch.specs import AppDef, Resource, Role
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.named_resources_aws import K8S_ITYPE
from anylaunch.specs.named_resources_aws_catalog import INSTANCE_TYPES
from tests.bad_input.conftest import assert_rejected
from tests.schedulers.slurm.cluster import slurm_cluster  # noqa: F401 (fixture)

PROPERTY = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
IMAGE = "busybox:1.36"
PORTS = st.integers(min_value=1, max_value=65535)
SMALL = Resource(cpu=1, gpu=0, memMB=128)


def _dryrun(scheduler: str, app: AppDef, cfg: dict[str, Any]) -> Any:
    with get_runner() as runner:
        return runner.dryrun(app, scheduler, cfg=cfg).request


@st.composite
def port_roles(draw: st.DrawFn) -> list[Role]:
    """1-3 container roles, each with 1-3 replicas and 0-3 named ports."""
    roles = []
    for i in range(draw(st.integers(1, 3))):
        ports = draw(
            st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), PORTS, max_size=3)
        )
        roles.append(
            Role(
                f"r{i}",
                IMAGE,
                entrypoint="echo",
                num_replicas=draw(st.integers(1, 3)),
                port_map=ports,
                resource=SMALL,
            )
        )
    return roles


def _publishers(roles: list[Role]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for role in roles:
        for port in set(role.port_map.values()):
            counts[port] = counts.get(port, 0) + role.num_replicas
    return counts


# --- duplicate host ports --------------------------------------------------------------------


@PROPERTY
@given(port_roles())
def test_lsf_refuses_a_host_port_two_replicas_would_publish(roles: list[Role]) -> None:
    app = AppDef("ports", roles)
    if any(n > 1 for n in _publishers(roles).values()):
        assert_rejected(lambda: _dryrun("lsf", app, {}), "port_map")
    else:
        _dryrun("lsf", app, {})
    _dryrun("lsf", app, {"host_network": True})  # nothing is published on the host


@PROPERTY
@given(port_roles())
def test_docker_never_publishes_one_host_port_twice(roles: list[Role]) -> None:
    request = _dryrun("local_docker", AppDef("ports", roles), {})
    for container in request.containers:
        for bindings in container.config["HostConfig"].get("PortBindings", {}).values():
            assert [b["HostPort"] for b in bindings] == [""]  # the engine picks a free one


@PROPERTY
@given(port_roles())
def test_kubernetes_maps_no_host_port(roles: list[Role]) -> None:
    request = _dryrun("kubernetes", AppDef("ports", roles), {"validate_spec": False})
    text = str(request.objects)
    assert "hostPort" not in text


# --- resources beyond a backend's known limits ----------------------------------------------

ITYPES = st.sampled_from(sorted(t for t in INSTANCE_TYPES if INSTANCE_TYPES[t].cpu <= 192))


@settings(PROPERTY, max_examples=15)  # each example loads botocore's Batch model check
@given(
    ITYPES,
    st.sampled_from(["cpu", "gpu", "memMB"]),
    st.integers(min_value=1, max_value=512),
    st.integers(min_value=2, max_value=4),
)
def test_aws_batch_refuses_a_multinode_role_bigger_than_its_instance_type(
    itype: str, field: str, extra: int, nodes: int
) -> None:
    row = INSTANCE_TYPES[itype]
    fits = {"cpu": row.cpu, "gpu": row.gpu, "memMB": int(row.mem_gib * 1024)}
    over = dict(fits, **{field: fits[field] + extra})
    res = Resource(**over, capabilities={K8S_ITYPE: itype})
    app = AppDef("big", [Role("w", IMAGE, entrypoint="echo", num_replicas=nodes, resource=res)])
    assert_rejected(lambda: _dryrun("aws_batch", app, {"queue": "q"}), f"resource.{field}")
    with pytest.raises(InvalidSpecError) as caught:
        check_fits_instance_type(app, itype)
    assert itype in str(caught.value) and str(fits[field]) in str(caught.value)  # the limit
    ok = Resource(**fits, capabilities={K8S_ITYPE: itype})
    check_fits_instance_type(AppDef("ok", [Role("w", IMAGE, resource=ok)]), itype)


@st.composite
def partitions(draw: st.DrawFn) -> str:
    """``sinfo -h -o '%P|%c|%D'`` of 1-2 partitions, each of 1-3 node sizes."""
    lines = []
    for i in range(draw(st.integers(1, 2))):
        for _ in range(draw(st.integers(1, 3))):
            cpus, nodes = draw(st.integers(1, 128)), draw(st.integers(1, 16))
            lines.append(f"p{i}{'*' if i == 0 else ''}|{cpus}|{nodes}")
    return "\n".join(lines)


@PROPERTY
@given(
    partitions(),
    st.lists(st.tuples(st.integers(1, 256), st.integers(1, 64)), min_size=1, max_size=3),
)
def test_slurm_refuses_what_no_partition_node_or_the_partition_can_hold(
    sinfo: str, components: list[tuple[int, int]]
) -> None:
    sizes = parse_sinfo(sinfo)
    size = sizes["p0"]
    asked = [
        (f"r{i}", {"ntasks": str(tasks), "cpus-per-task": str(cpus)})
        for i, (cpus, tasks) in enumerate(components)
    ]
    too_wide = any(cpus > size.max_node_cpus for cpus, _ in components)
    too_many = sum(cpus * tasks for cpus, tasks in components) > size.total_cpus
    if too_wide or too_many:
        with pytest.raises(InvalidSpecError) as caught:
            check_partition_limits(asked, sizes)
        assert "partition 'p0'" in str(caught.value)
        assert caught.value.field.endswith((".resource.cpu", ".num_replicas"))
    else:
        check_partition_limits(asked, sizes)


@pytest.mark.usefixtures("slurm_cluster")
def test_the_real_slurm_cluster_refuses_cpus_beyond_its_largest_node(tmp_path: Path) -> None:
    from anylaunch.schedulers.slurm.limits import read_partitions
    from anylaunch.schedulers.slurm_scheduler import create_scheduler

    sizes = read_partitions()
    assert sizes, "sinfo answered nothing"
    widest = max(p.max_node_cpus for p in sizes.values())
    sched = create_scheduler("bad-input")
    name = f"wide-{uuid.uuid4().hex[:8]}"
    role = Role("w", "", entrypoint="true", resource=Resource(cpu=widest + 1, gpu=0, memMB=64))
    info = sched.submit_dryrun(AppDef(name, [role]), {"job_dir": str(tmp_path / "job")})
    assert_rejected(lambda: sched.schedule(info), "Role[w].resource.cpu")
    queued = subprocess.run(
        ["squeue", "-h", "-o", "%j"], capture_output=True, text=True, check=True
    )
    assert name not in queued.stdout  # nothing was submitted
