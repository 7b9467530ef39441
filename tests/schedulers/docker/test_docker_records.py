"""The role record local_docker keeps in each replica's labels: anyone who can ``docker
inspect`` reads labels, so they hold no secret value (the container's env has the real one),
and describe still gives the role back whole, also from a record the previous version wrote."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from anylaunch.schedulers.api import DescribeAppResponse
from anylaunch.schedulers.docker.request import LABEL_APP_ID, LABEL_ROLE_SPEC
from anylaunch.schedulers.docker.state import _Container, role_of
from anylaunch.schedulers.docker_scheduler import DockerAppRequest, DockerScheduler
from anylaunch.specs import AppDef, AppState, Resource, RetryPolicy, Role, macros

WAIT_S = 120  # a safety net against a hung app, not a measurement
HF_TOKEN = "hf-7f3a9c1e5b2d8f60"
DB_PASSWORD = "pw-d41d8cd98f00b204e98"


def wait(sched: DockerScheduler, app_id: str) -> DescribeAppResponse:
    deadline = time.monotonic() + WAIT_S
    while True:
        desc = sched.describe(app_id)
        assert desc is not None, f"app {app_id} vanished"
        if desc.state.is_terminal():
            return desc
        assert time.monotonic() < deadline, f"app {app_id} still {desc.state} after {WAIT_S}s"
        time.sleep(0.1)


def inspected(client: Any, app_id: str) -> list[dict[str, Any]]:
    """Every container of the app (replicas and event records), as ``docker inspect`` shows
    them."""
    summaries = client.api.containers(all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"})
    return [client.api.inspect_container(s["Id"]) for s in summaries]


def test_labels_hold_no_secret_value_while_the_replica_gets_it(
    scheduler: DockerScheduler, busybox_image: str, docker_client: Any
) -> None:
    # prints its token to stderr (which the failure record quotes) and exits with the
    # secrets' lengths summed: the process saw both values, and no argument quotes them;
    # one APPLICATION retry, then the failure: event records too
    script = 'echo "token $HF_TOKEN refused" >&2; exit $(( ${#HF_TOKEN} + ${#DB_PASSWORD} ))'
    role = Role(
        "trainer",
        image=busybox_image,
        entrypoint="sh",
        args=["-c", script],
        env={"HF_TOKEN": HF_TOKEN, "DB_PASSWORD": DB_PASSWORD, "LR": "0.1"},
        num_replicas=2,
        max_retries=1,
        retry_policy=RetryPolicy.APPLICATION,
    )
    app_id = scheduler.schedule(scheduler.submit_dryrun(AppDef("secrets", [role]), {}))
    desc = wait(scheduler, app_id)
    assert desc.state == AppState.FAILED and desc.num_restarts == 1
    assert f"exit code {len(HF_TOKEN) + len(DB_PASSWORD)}" in desc.msg
    # (the container ran twice: its log holds both runs)
    assert json.loads(desc.structured_error_msg)["stderr_tail"] == ["token *** refused"] * 2

    containers = inspected(docker_client, app_id)
    kinds = sorted(c["Config"]["Labels"]["anylaunch.kind"] for c in containers)
    assert kinds == ["event", "event", "replica", "replica"]  # the retry and the failure
    for attrs in containers:
        labels = json.dumps(attrs["Config"]["Labels"])
        assert HF_TOKEN not in labels and DB_PASSWORD not in labels, attrs["Name"]
    networks = docker_client.api.networks(filters={"label": f"{LABEL_APP_ID}={app_id}"})
    assert networks and all(HF_TOKEN not in json.dumps(n) for n in networks)

    replica = next(c for c in containers if c["Config"]["Labels"]["anylaunch.kind"] == "replica")
    record = json.loads(replica["Config"]["Labels"][LABEL_ROLE_SPEC])
    assert record["env"] == {"HF_TOKEN": "***", "DB_PASSWORD": "***", "LR": "0.1"}
    assert f"HF_TOKEN={HF_TOKEN}" in replica["Config"]["Env"]  # the real value ran

    # describe gives the role back as launched: secret values from the containers' env
    assert len(desc.roles) == 1
    described = desc.roles[0]
    assert described.env == {"HF_TOKEN": HF_TOKEN, "DB_PASSWORD": DB_PASSWORD, "LR": "0.1"}
    assert described.args == role.args and described.num_replicas == 2
    assert described.retry_policy == RetryPolicy.APPLICATION and described.max_retries == 1


def _previous_version_record(role: Role) -> str:
    """The role record as the previous version wrote it into the label (local_cwd's old
    ``_role_spec`` form: the retry policy's value, three resource keys, env unmasked)."""
    return json.dumps(
        {
            "name": role.name,
            "image": role.image,
            "entrypoint": role.entrypoint,
            "args": list(role.args),
            "env": dict(role.env),
            "num_replicas": role.num_replicas,
            "min_replicas": role.min_replicas,
            "max_retries": role.max_retries,
            "retry_policy": role.retry_policy.value,
            "resource": {
                "cpu": role.resource.cpu,
                "gpu": role.resource.gpu,
                "memMB": role.resource.memMB,
            },
            "port_map": dict(role.port_map),
        },
        sort_keys=True,
    )


def test_an_app_the_previous_version_launched_still_describes(
    scheduler: DockerScheduler, busybox_image: str
) -> None:
    worker = Role(
        "worker",
        image=busybox_image,
        entrypoint="sh",
        args=["-c", "echo worker $0 of $ANYLAUNCH_RANK0_HOST", macros.replica_id],
        env={"LR": "0.1", "API_TOKEN": "tok-previous"},
        num_replicas=2,
        max_retries=2,
        retry_policy=RetryPolicy.ROLE,
        resource=Resource(cpu=1, gpu=0, memMB=64),
        port_map={"http": 8080},
    )
    info = scheduler.submit_dryrun(AppDef("previous", [worker]), {})
    request = info.request
    assert isinstance(request, DockerAppRequest)
    for container in request.containers:  # what the previous version put in the labels
        container.config["Labels"][LABEL_ROLE_SPEC] = _previous_version_record(worker)
    app_id = scheduler.schedule(info)

    desc = wait(scheduler, app_id)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert len(desc.roles) == 1
    role = desc.roles[0]
    assert (role.name, role.image, role.entrypoint) == ("worker", busybox_image, "sh")
    assert role.args == worker.args  # the macro as written, not one replica's value
    assert role.env == {"LR": "0.1", "API_TOKEN": "tok-previous"}
    assert (role.num_replicas, role.max_retries) == (2, 2)
    assert role.retry_policy == RetryPolicy.ROLE
    assert (role.resource.cpu, role.resource.gpu, role.resource.memMB) == (1, 0, 64)
    assert role.port_map == {"http": 8080}
    # the rest of the app is served as ever: statuses, listing and logs
    assert [r.state for r in desc.roles_statuses[0].replicas] == [AppState.SUCCEEDED] * 2
    listed = {app.app_id: app.state for app in scheduler.list()}
    assert listed[app_id] == AppState.SUCCEEDED
    assert list(scheduler.log_iter(app_id, "worker", 1)) == [f"worker 1 of {app_id}-worker-0\n"]


@pytest.mark.parametrize(
    "label",
    ["not json", json.dumps(["a", "list"]), json.dumps({"name": "w"}), json.dumps({"env": 1})],
)
def test_a_role_label_that_is_no_record_gives_no_role(label: str) -> None:
    container = _Container("c1", "app-w-0", {LABEL_ROLE_SPEC: label}, "running")
    assert role_of(container) is None
    assert role_of(_Container("c2", "app-w-1", {}, "running")) is None
