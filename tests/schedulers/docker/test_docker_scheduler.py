"""local_docker against a real Docker engine: apps that run, talk to rank 0, fail, retry, are
cancelled, stream logs and are deleted; plus dryruns and bad inputs (no engine needed)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from anylaunch.schedulers.api import DescribeAppResponse, Stream
from anylaunch.schedulers.docker.request import (
    LABEL_APP_ID,
    DockerEngineUnavailableError,
    DockerImageNotFoundError,
    DockerSchedulerError,
)
from anylaunch.schedulers.docker_scheduler import (
    DockerAppRequest,
    DockerScheduler,
    create_scheduler,
)
from anylaunch.specs import AppDef, AppState, Resource, RetryPolicy, Role, macros, parse_mounts
from anylaunch.specs.errors import InvalidRunConfigException, InvalidSpecError, UnknownAppException

WAIT_S = 60  # a safety net against a hung app, not a measurement


def wait(sched: DockerScheduler, app_id: str, timeout: float = WAIT_S) -> DescribeAppResponse:
    deadline = time.monotonic() + timeout
    while True:
        desc = sched.describe(app_id)
        assert desc is not None, f"app {app_id} vanished"
        if desc.state.is_terminal():
            return desc
        assert time.monotonic() < deadline, f"app {app_id} still {desc.state} after {timeout}s"
        time.sleep(0.1)


def wait_for(sched: DockerScheduler, app_id: str, state: AppState) -> DescribeAppResponse:
    deadline = time.monotonic() + WAIT_S
    while True:
        desc = sched.describe(app_id)
        assert desc is not None
        if desc.state == state:
            return desc
        assert time.monotonic() < deadline, f"app {app_id} never reached {state}: {desc.state}"
        time.sleep(0.05)


def sh(name: str, script: str, image: str = "busybox:latest", **kwargs: Any) -> Role:
    return Role(name, image=image, entrypoint="sh", args=["-c", script], **kwargs)


def run(sched: DockerScheduler, app: AppDef, cfg: dict[str, Any] | None = None) -> str:
    return sched.schedule(sched.submit_dryrun(app, cfg or {}))


def logs(sched: DockerScheduler, app_id: str, role: str, k: int = 0, **kwargs: Any) -> list[str]:
    return list(sched.log_iter(app_id, role, k, **kwargs))


def engine_containers(client: Any, app_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = client.api.containers(
        all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"}
    )
    return found


# --- dryrun and bad inputs (no engine) ----------------------------------------------------------


def offline_scheduler() -> DockerScheduler:
    # an address where nothing listens: a dryrun must not need the engine
    return DockerScheduler("offline", docker_host="unix:///nonexistent/docker.sock")


def test_dryrun_translates_roles_into_container_create_bodies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANYLAUNCH_TEST_COPIED", "from-launcher")
    monkeypatch.setenv("ANYLAUNCH_TEST_SHADOWED", "from-launcher")
    trainer = Role(
        "trainer",
        image="busybox:latest",
        entrypoint="train",
        args=["--id", macros.replica_id, "--app", macros.app_id, "--rank0", macros.rank0_env],
        env={"ANYLAUNCH_TEST_SHADOWED": "from-role", "HF_TOKEN": "s3cr3t"},
        num_replicas=2,
        resource=Resource(cpu=2, gpu=1, memMB=512),
        port_map={"tensorboard": 6006},
        mounts=parse_mounts(
            [f"type=bind,src={tmp_path},dst=/data,readonly", "type=volume,src=cache,dst=/cache"]
        ),
        max_retries=3,
        retry_policy=RetryPolicy.REPLICA,
    )
    reader = Role("Data_Reader", image="busybox:latest", entrypoint="read")
    app = AppDef("My Train", roles=[trainer, reader])
    cfg = {"copy_env": ["ANYLAUNCH_TEST_*"], "env": {"LOGLEVEL": "DEBUG"}, "privileged": True}

    info = offline_scheduler().submit_dryrun(app, cfg)
    request = info.request
    assert isinstance(request, DockerAppRequest)
    app_id = request.app_id
    assert app_id.startswith("my-train-") and request.network == app_id
    names = [c.name for c in request.containers]
    assert names == [f"{app_id}-trainer-0", f"{app_id}-trainer-1", f"{app_id}-data-reader-0"]

    rank0 = f"{app_id}-trainer-0"
    for c in request.containers:
        env = dict(item.split("=", 1) for item in c.config["Env"])
        assert env["ANYLAUNCH_RANK0_HOST"] == rank0
        assert env["ANYLAUNCH_TEST_COPIED"] == "from-launcher"
        assert env["LOGLEVEL"] == "DEBUG"
        assert c.config["HostConfig"]["Privileged"] is True
        assert c.config["HostConfig"]["NetworkMode"] == app_id
        assert c.config["Labels"]["anylaunch.role"] == c.role
        assert c.config["Labels"]["anylaunch.replica-id"] == str(c.replica_id)
        assert c.config["Labels"]["anylaunch.session"] == "offline"

    trainer1 = request.containers[1].config
    env = dict(item.split("=", 1) for item in trainer1["Env"])
    assert env["ANYLAUNCH_TEST_SHADOWED"] == "from-role"  # the role's env wins
    assert trainer1["Entrypoint"] == ["train"]
    assert trainer1["Cmd"] == ["--id", "1", "--app", app_id, "--rank0", "ANYLAUNCH_RANK0_HOST"]
    host = trainer1["HostConfig"]
    assert host["NanoCpus"] == 2_000_000_000 and host["Memory"] == 512 * 1024 * 1024
    assert host["DeviceRequests"][0]["Count"] == 1
    assert host["RestartPolicy"] == {"Name": "on-failure", "MaximumRetryCount": 3}
    assert host["PortBindings"] == {"6006/tcp": [{"HostIp": "127.0.0.1", "HostPort": ""}]}
    assert host["Mounts"] == [
        {"Type": "bind", "Source": str(tmp_path), "Target": "/data", "ReadOnly": True},
        {"Type": "volume", "Source": "cache", "Target": "/cache", "ReadOnly": False},
    ]
    # a role without resources runs without limits, and without engine retries
    reader_host = request.containers[2].config["HostConfig"]
    assert "NanoCpus" not in reader_host and "Memory" not in reader_host
    assert "RestartPolicy" not in reader_host

    text = str(info)
    assert "HF_TOKEN=***" in text and "s3cr3t" not in text
    assert "limits: cpus=2 memory=512MiB gpus=1 privileged" in text
    assert f"bind {tmp_path}:/data (ro)" in text
    assert "restart: on failure, up to 3 times" in text


def test_device_mounts_and_runopts_schema() -> None:
    role = Role(
        "w",
        image="busybox:latest",
        entrypoint="true",
        mounts=parse_mounts(["type=device,src=/dev/null,dst=/dev/sink,perm=rw"]),
    )
    request = offline_scheduler().submit_dryrun(AppDef("dev", [role]), {}).request
    assert request.containers[0].config["HostConfig"]["Devices"] == [
        {"PathOnHost": "/dev/null", "PathInContainer": "/dev/sink", "CgroupPermissions": "rw"}
    ]
    opts = dict(offline_scheduler().run_opts())
    own = {"image_repo", "copy_env", "env", "privileged", "cancel_grace_s", "init"}
    assert set(opts) == own | {"archive_url"}  # the runner's option every scheduler takes
    assert opts["cancel_grace_s"].default == 5.0


@pytest.mark.parametrize(
    ("role_kwargs", "cfg", "field"),
    [
        ({"mounts": parse_mounts(["type=bind,src=/no/such/dir,dst=/x"])}, {}, "mounts"),
        ({"mounts": parse_mounts(["type=bind,src=/tmp,dst=relative"])}, {}, "mounts"),
        ({"mounts": parse_mounts(["type=volume,src=/abs/path,dst=/x"])}, {}, "mounts"),
        ({"mounts": parse_mounts(["type=device,src=/dev/no-such-device"])}, {}, "mounts"),
        ({"image": " "}, {}, "image"),
        ({"image": "."}, {}, "image"),
        ({"image": "Busybox:latest"}, {}, "image"),
        ({}, {"cancel_grace_s": -1}, "cancel_grace_s"),
        ({}, {"env": {"A=B": "1"}}, "env"),
        ({}, {"image_repo": "Not A Repo"}, "image_repo"),
        ({}, {"copy_env": ["AWS_*", ""]}, "copy_env"),
        ({"resource": Resource(cpu=1, gpu=0, memMB=4)}, {}, "memMB"),
    ],
)
def test_bad_inputs_are_rejected_at_dryrun(
    role_kwargs: dict[str, Any], cfg: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidSpecError) as err:  # at construction (" ") or at dryrun
        role = Role(**{"name": "w", "image": "busybox:latest", "entrypoint": "true", **role_kwargs})
        offline_scheduler().submit_dryrun(AppDef("bad", [role]), cfg)
    assert field in err.value.field
    assert "Fix:" in str(err.value)


def test_bad_scheduler_arguments_and_a_nul_in_a_secret_option_value() -> None:
    for timeout in (0, -1, float("inf"), float("nan"), True, "30"):
        with pytest.raises(InvalidSpecError, match="start_timeout"):
            DockerScheduler("s", start_timeout=timeout)  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="docker_host"):
        DockerScheduler("s", docker_host="")
    role = Role("w", image="busybox:latest", entrypoint="true")
    with pytest.raises(InvalidSpecError, match="NUL") as err:
        offline_scheduler().submit_dryrun(AppDef("x", [role]), {"env": {"API_TOKEN": "s3\x00t"}})
    assert "API_TOKEN" in err.value.field and "s3" not in str(err.value)


def test_unknown_run_option_and_clashing_role_names() -> None:
    role = Role("w", image="busybox:latest", entrypoint="true")
    with pytest.raises(InvalidRunConfigException, match="privilegd"):
        offline_scheduler().submit_dryrun(AppDef("bad", [role]), {"privilegd": True})
    clash = [Role("a_b", image="x", entrypoint="true"), Role("a.b", image="x", entrypoint="true")]
    with pytest.raises(InvalidSpecError, match="clash"):
        offline_scheduler().submit_dryrun(AppDef("bad", clash), {})


def test_missing_engine_is_one_clear_error() -> None:
    sched = create_scheduler("s", docker_host="unix:///nonexistent/docker.sock")
    info = sched.submit_dryrun(AppDef("x", [Role("w", image="busybox", entrypoint="true")]), {})
    with pytest.raises(DockerEngineUnavailableError) as err:
        sched.schedule(info)
    message = str(err.value)
    assert "unix:///nonexistent/docker.sock" in message and "10-docker.sh" in message
    with pytest.raises(DockerEngineUnavailableError):
        sched.describe("x-12345678")


# --- running apps ------------------------------------------------------------------------------


def test_replicas_of_several_roles_reach_rank0_by_name(
    scheduler: DockerScheduler, python_image: str, busybox_image: str
) -> None:
    server = textwrap.dedent(
        """
        import os, socket
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("", 2222)); s.listen()
        got = []
        for _ in range(4):
            conn, _ = s.accept()
            got.append(conn.recv(100).decode().strip()); conn.sendall(b"welcome"); conn.close()
        print("server", os.environ["ANYLAUNCH_RANK0_HOST"], "got", sorted(got))
        """
    )
    client = (
        "for i in $(seq 100); do "
        '  out=$(echo ${role}-${id} | nc $ANYLAUNCH_RANK0_HOST 2222 2>/dev/null) && [ -n "$out" ] && break; '
        "  sleep 0.1; "
        "done; echo ${role}-${id} heard $out"
    )
    app = AppDef(
        "rank0",
        roles=[
            Role("server", image=python_image, entrypoint="python3", args=["-c", server]),
            sh("worker", client, num_replicas=3, env={"role": "worker", "id": macros.replica_id}),
            sh("loader", client, env={"role": "loader", "id": macros.replica_id}),
        ],
    )
    app_id = run(scheduler, app)
    desc = wait(scheduler, app_id)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    got = logs(scheduler, app_id, "server")
    assert got == [
        f"server {app_id}-server-0 got ['loader-0', 'worker-0', 'worker-1', 'worker-2']\n"
    ]
    for i in range(3):
        assert logs(scheduler, app_id, "worker", i) == [f"worker-{i} heard welcome\n"]
    statuses = {
        r.role: [(rep.id, rep.state, rep.hostname) for rep in r.replicas]
        for r in desc.roles_statuses
    }
    assert statuses["worker"] == [(i, AppState.SUCCEEDED, f"{app_id}-worker-{i}") for i in range(3)]
    assert [role.name for role in desc.roles] == ["server", "worker", "loader"]
    assert desc.roles[1].num_replicas == 3


def test_a_failed_replica_fails_the_app_with_its_exit_code_and_stops_the_rest(
    scheduler: DockerScheduler, busybox_image: str, docker_client: Any
) -> None:
    app = AppDef(
        "fails",
        roles=[
            sh("sleeper", "sleep 300", num_replicas=2),
            sh("crasher", "sleep 0.5; echo 'bad input' >&2; exit 3"),
        ],
    )
    app_id = run(scheduler, app)
    desc = wait(scheduler, app_id)
    assert desc.state == AppState.FAILED
    assert f"replica crasher/0 (container {app_id}-crasher-0) failed with exit code 3" == desc.msg
    error = json.loads(desc.structured_error_msg)
    assert error["exit_code"] == 3 and error["stderr_tail"] == ["bad input"]
    states = {(r.role, rep.id): rep.state for r in desc.roles_statuses for rep in r.replicas}
    assert states == {
        ("sleeper", 0): AppState.CANCELLED,
        ("sleeper", 1): AppState.CANCELLED,
        ("crasher", 0): AppState.FAILED,
    }
    # nothing keeps running, and the verdict is stable for any later reader
    assert all(c["State"] != "running" for c in engine_containers(docker_client, app_id))
    again = DockerScheduler("other-process", docker_host=scheduler.docker_host).describe(app_id)
    assert again is not None and again.state == AppState.FAILED and again.msg == desc.msg


def test_replica_retries_are_made_by_the_engine(
    scheduler: DockerScheduler, busybox_image: str, tmp_path: Path
) -> None:
    # fails twice, then succeeds; the attempt count survives restarts in a bind mount
    script = "n=$(cat /state/n 2>/dev/null || echo 0); echo $((n+1)) > /state/n; echo try $n; [ $n -ge 2 ]"
    role = sh(
        "flaky",
        script,
        max_retries=2,
        retry_policy=RetryPolicy.REPLICA,
        mounts=parse_mounts([f"type=bind,src={tmp_path},dst=/state"]),
    )
    app_id = run(scheduler, AppDef("replica-retry", [role]))
    desc = wait(scheduler, app_id)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert desc.num_restarts == 2
    assert logs(scheduler, app_id, "flaky") == ["try 0\n", "try 1\n", "try 2\n"]


def _counting(name: str, fail_first: bool, state_dir: Path, **kwargs: Any) -> Role:
    fail = "[ $n -ge 1 ]" if fail_first else "sleep 1"
    script = f"n=$(cat /state/{name} 2>/dev/null || echo 0); echo $((n+1)) > /state/{name}; {fail}"
    return sh(
        name, script, mounts=parse_mounts([f"type=bind,src={state_dir},dst=/state"]), **kwargs
    )


@pytest.mark.parametrize(
    ("policy", "other_runs"), [(RetryPolicy.APPLICATION, "2"), (RetryPolicy.ROLE, "1")]
)
def test_application_and_role_retries_restart_what_the_policy_says(
    scheduler: DockerScheduler,
    busybox_image: str,
    tmp_path: Path,
    policy: RetryPolicy,
    other_runs: str,
) -> None:
    app = AppDef(
        "retry",
        roles=[
            _counting("steady", False, tmp_path, max_retries=1, retry_policy=policy),
            _counting("flaky", True, tmp_path, max_retries=1, retry_policy=policy),
        ],
    )
    app_id = run(scheduler, app)
    desc = wait(scheduler, app_id)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert desc.num_restarts == 1
    assert (tmp_path / "flaky").read_text().strip() == "2"
    # APPLICATION restarts every replica; ROLE only the failed one's role
    assert (tmp_path / "steady").read_text().strip() == other_runs


def test_exhausted_retries_fail_the_app(scheduler: DockerScheduler, busybox_image: str) -> None:
    role = sh("always", "exit 7", max_retries=2, retry_policy=RetryPolicy.APPLICATION)
    app_id = run(scheduler, AppDef("exhausted", [role]))
    desc = wait(scheduler, app_id)
    assert desc.state == AppState.FAILED
    assert desc.num_restarts == 2
    assert desc.msg.endswith("failed with exit code 7 after 2 retries")


def test_cancel_stops_the_containers(
    scheduler: DockerScheduler, busybox_image: str, docker_client: Any
) -> None:
    app = AppDef("cancel", roles=[sh("a", "sleep 300", num_replicas=2), sh("b", "sleep 300")])
    app_id = run(scheduler, app, {"cancel_grace_s": 2})
    wait_for(scheduler, app_id, AppState.RUNNING)
    started = time.monotonic()
    scheduler.cancel(app_id)
    assert time.monotonic() - started < 10  # the containers obey SIGTERM (sh exits at once)
    desc = scheduler.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED
    assert all(rep.state == AppState.CANCELLED for r in desc.roles_statuses for rep in r.replicas)
    assert all(
        c["State"] == "exited"
        for c in engine_containers(docker_client, app_id)
        if c["Labels"]["anylaunch.kind"] == "replica"
    )
    scheduler.cancel(app_id)  # idempotent
    assert scheduler.describe(app_id).state == AppState.CANCELLED  # type: ignore[union-attr]


def test_cancel_of_a_finished_app_changes_nothing(
    scheduler: DockerScheduler, busybox_image: str
) -> None:
    app_id = run(scheduler, AppDef("done", [sh("a", "true")]))
    assert wait(scheduler, app_id).state == AppState.SUCCEEDED
    scheduler.cancel(app_id)
    assert scheduler.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]


def test_delete_removes_containers_and_network(
    scheduler: DockerScheduler, busybox_image: str, docker_client: Any
) -> None:
    app_id = run(scheduler, AppDef("delete", [sh("a", "sleep 300", num_replicas=2)]))
    wait_for(scheduler, app_id, AppState.RUNNING)
    assert any(app.app_id == app_id for app in scheduler.list())
    scheduler.delete(app_id)
    assert engine_containers(docker_client, app_id) == []
    assert docker_client.api.networks(names=[app_id]) == []
    assert scheduler.describe(app_id) is None
    assert all(app.app_id != app_id for app in scheduler.list())
    with pytest.raises(UnknownAppException):
        scheduler.log_iter(app_id, "a")
    scheduler.delete(app_id)  # a no-op now


def test_a_request_is_scheduled_once(scheduler: DockerScheduler, busybox_image: str) -> None:
    info = scheduler.submit_dryrun(AppDef("once", [sh("a", "true")]), {})
    app_id = scheduler.schedule(info)
    with pytest.raises(DockerSchedulerError, match="dry-run the app again"):
        scheduler.schedule(info)
    assert wait(scheduler, app_id).state == AppState.SUCCEEDED  # the first one is untouched


def test_list_by_label_across_schedulers(
    scheduler: DockerScheduler, busybox_image: str, session_name: str
) -> None:
    app_id = run(scheduler, AppDef("listed", [sh("a", "exit 1")]))
    wait(scheduler, app_id)
    other = DockerScheduler("another-session", docker_host=scheduler.docker_host)
    listed = {app.app_id: app for app in other.list()}
    assert listed[app_id].state == AppState.FAILED
    assert listed[app_id].app_handle == f"local_docker://{session_name}/{app_id}"
    assert listed[app_id].name == "listed"


def test_the_app_survives_the_process_that_launched_it(
    scheduler: DockerScheduler, busybox_image: str
) -> None:
    launcher = textwrap.dedent(
        f"""
        from anylaunch.schedulers.docker_scheduler import DockerScheduler
        from anylaunch.specs import AppDef, Role
        s = DockerScheduler({scheduler.session_name!r}, docker_host={scheduler.docker_host!r})
        role = Role("a", image="busybox:latest", entrypoint="sh",
                    args=["-c", "sleep 2; echo outlived"])
        print(s.schedule(s.submit_dryrun(AppDef("orphan", [role]), {{}})))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", launcher], capture_output=True, text=True, timeout=WAIT_S, check=True
    )
    app_id = out.stdout.strip()
    desc = scheduler.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING  # the launcher is gone
    assert wait(scheduler, app_id).state == AppState.SUCCEEDED
    assert logs(scheduler, app_id, "a") == ["outlived\n"]


def test_missing_image_is_one_clear_error_and_leaves_nothing(
    scheduler: DockerScheduler, docker_client: Any
) -> None:
    role = Role("a", image="anylaunch-no-such-image:1", entrypoint="true")
    info = scheduler.submit_dryrun(AppDef("noimage", [role]), {})
    with pytest.raises(DockerImageNotFoundError, match="anylaunch-no-such-image:1"):
        scheduler.schedule(info)
    assert engine_containers(docker_client, info.request.app_id) == []
    assert docker_client.api.networks(names=[info.request.app_id]) == []


@pytest.mark.parametrize(
    "resource", [Resource(cpu=0, gpu=1, memMB=0), Resource(cpu=512, gpu=0, memMB=0)]
)
def test_resources_the_engine_cannot_give_are_refused_cleanly(
    scheduler: DockerScheduler, busybox_image: str, docker_client: Any, resource: Resource
) -> None:
    info = scheduler.submit_dryrun(AppDef("greedy", [sh("a", "true", resource=resource)]), {})
    with pytest.raises(DockerSchedulerError, match=f"{info.request.app_id}-a-0"):
        scheduler.schedule(info)
    assert engine_containers(docker_client, info.request.app_id) == []
    assert docker_client.api.networks(names=[info.request.app_id]) == []


def test_env_limits_mounts_and_ports_reach_the_container(
    scheduler: DockerScheduler,
    busybox_image: str,
    docker_client: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "in.txt").write_text("from host")
    monkeypatch.setenv("ANYLAUNCH_TEST_COPY_ME", "copied")
    script = (
        "echo env $ANYLAUNCH_TEST_COPY_ME $LOGLEVEL $ROLE_ONLY; "
        "echo read $(cat /in/in.txt); "
        "{ echo x > /in/new.txt; } 2>/dev/null && echo ro-writable || echo ro-refused; "
        "echo y > /out/made.txt; echo null > /dev/sink && echo device-ok; "
        "mkdir -p /www && echo served > /www/index.html && httpd -f -p 8080 -h /www"
    )
    role = sh(
        "web",
        script,
        env={"ROLE_ONLY": "role"},
        resource=Resource(cpu=1, gpu=0, memMB=64),
        port_map={"http": 8080},
        mounts=parse_mounts(
            [
                f"type=bind,src={tmp_path},dst=/in,readonly",
                f"type=bind,src={tmp_path},dst=/out",
                "type=device,src=/dev/null,dst=/dev/sink",
            ]
        ),
    )
    # (privileged containers cannot start on these machines: runc may not apply all caps)
    cfg = {"copy_env": ["ANYLAUNCH_TEST_COPY_*"], "env": {"LOGLEVEL": "debug"}}
    app_id = run(scheduler, AppDef("web", [role]), cfg)
    wait_for(scheduler, app_id, AppState.RUNNING)
    attrs = docker_client.api.inspect_container(f"{app_id}-web-0")
    assert attrs["HostConfig"]["NanoCpus"] == 1_000_000_000
    assert attrs["HostConfig"]["Memory"] == 64 << 20
    binding = attrs["NetworkSettings"]["Ports"]["8080/tcp"][0]
    assert binding["HostIp"] == "127.0.0.1"
    desc = scheduler.describe(app_id)
    assert desc is not None
    assert desc.metadata["ports"] == f"web/0:8080/tcp=127.0.0.1:{binding['HostPort']}"
    body = ""
    for _ in range(100):
        try:
            url = f"http://127.0.0.1:{binding['HostPort']}/index.html"
            with urllib.request.urlopen(url, timeout=5) as response:
                body = response.read().decode()
            break
        except OSError:
            time.sleep(0.1)
    assert body == "served\n"
    lines = logs(scheduler, app_id, "web")
    assert lines == ["env copied debug role\n", "read from host\n", "ro-refused\n", "device-ok\n"]
    assert (tmp_path / "made.txt").read_text() == "y\n"
    assert not (tmp_path / "new.txt").exists()


def test_out_of_memory_is_reported(scheduler: DockerScheduler, python_image: str) -> None:
    hog = Role(
        "hog",
        image=python_image,
        entrypoint="python3",
        args=["-c", "x = bytearray(512 * 1024 * 1024); print(len(x))"],
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    desc = wait(scheduler, run(scheduler, AppDef("oom", [hog])))
    assert desc.state == AppState.FAILED
    assert "exit code 137 (SIGKILL: out of memory)" in desc.msg


# --- logs --------------------------------------------------------------------------------------


def test_log_streams_windows_and_regex(scheduler: DockerScheduler, busybox_image: str) -> None:
    script = "echo out1; echo err1 >&2; sleep 1.5; echo out2; echo err2 >&2"
    app_id = run(scheduler, AppDef("logs", [sh("a", script)]))
    assert wait(scheduler, app_id).state == AppState.SUCCEEDED
    assert logs(scheduler, app_id, "a", streams=Stream.STDOUT) == ["out1\n", "out2\n"]
    assert logs(scheduler, app_id, "a", streams=Stream.STDERR) == ["err1\n", "err2\n"]
    combined = logs(scheduler, app_id, "a")
    assert sorted(combined) == ["err1\n", "err2\n", "out1\n", "out2\n"]
    assert combined.index("out1\n") < combined.index("out2\n")
    assert logs(scheduler, app_id, "a", regex="^err") == ["err1\n", "err2\n"]

    # the window between the two bursts splits them
    stamped = scheduler._client().api.logs(f"{app_id}-a-0", timestamps=True).decode().splitlines()
    from anylaunch.schedulers.docker.request import _parse_time

    first = _parse_time(stamped[0].split(" ")[0])
    middle = datetime.fromtimestamp(first + 0.75)
    assert logs(scheduler, app_id, "a", until=middle, streams=Stream.STDOUT) == ["out1\n"]
    assert logs(scheduler, app_id, "a", since=middle, streams=Stream.STDOUT) == ["out2\n"]
    future = datetime.now() + timedelta(hours=1)
    assert logs(scheduler, app_id, "a", since=future) == []


def test_tailing_follows_until_the_app_ends(scheduler: DockerScheduler, busybox_image: str) -> None:
    script = "for i in 1 2 3 4 5; do echo line $i; sleep 0.3; done"
    app_id = run(scheduler, AppDef("tail", [sh("a", script), sh("b", "sleep 3")]))
    started = time.monotonic()
    got = []
    for line in scheduler.log_iter(app_id, "a", should_tail=True):
        got.append((line, time.monotonic() - started))
    assert [line for line, _ in got] == [f"line {i}\n" for i in range(1, 6)]
    assert got[-1][1] - got[0][1] > 0.5  # lines arrived as written, not all at the end
    desc = scheduler.describe(app_id)
    assert desc is not None and desc.state == AppState.SUCCEEDED  # it followed to the end


def test_tailing_spans_engine_restarts(scheduler: DockerScheduler, busybox_image: str) -> None:
    role = sh(
        "a", "echo attempt; sleep 0.3; exit 1", max_retries=2, retry_policy=RetryPolicy.REPLICA
    )
    app_id = run(scheduler, AppDef("tail-retry", [role]))
    lines = list(scheduler.log_iter(app_id, "a", should_tail=True))
    assert lines == ["attempt\n"] * 3


def test_log_iter_rejects_unknown_roles_replicas_and_streams(
    scheduler: DockerScheduler, busybox_image: str
) -> None:
    app_id = run(scheduler, AppDef("badlogs", [sh("trainer", "true", num_replicas=2)]))
    with pytest.raises(InvalidSpecError, match="Did you mean 'trainer'"):
        scheduler.log_iter(app_id, "trainr")
    with pytest.raises(InvalidSpecError, match="has 2 replica"):
        scheduler.log_iter(app_id, "trainer", k=2)
    with pytest.raises(InvalidSpecError, match="stream"):
        scheduler.log_iter(app_id, "trainer", streams="both")  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="regular expression"):
        scheduler.log_iter(app_id, "trainer", regex="(")
    with pytest.raises(UnknownAppException):
        scheduler.log_iter("no-such-app-12345678", "trainer")


# --- through the Runner ------------------------------------------------------------------------


def test_runner_run_wait_and_logs(runner: Any, busybox_image: str) -> None:
    app = AppDef("runner", roles=[sh("echo", "echo hello from $ANYLAUNCH_RANK0_HOST")])
    handle = runner.run(app, "local_docker")
    status = runner.wait(handle, wait_interval=0.2, timeout=WAIT_S)
    assert status is not None and status.state == AppState.SUCCEEDED
    app_id = handle.split("/")[-1]
    assert list(runner.log_lines(handle, "echo")) == [f"hello from {app_id}-echo-0\n"]


# --- several watchers, and launchers that die ----------------------------------------------------


def test_concurrent_watchers_restart_an_app_once_per_failure(
    scheduler: DockerScheduler, busybox_image: str, tmp_path: Path
) -> None:
    import threading

    app = AppDef(
        "watched",
        roles=[
            _counting("steady", False, tmp_path, max_retries=2),
            _counting("flaky", True, tmp_path, max_retries=2),
        ],
    )
    app_id = run(scheduler, app)
    finals: list[DescribeAppResponse] = []

    def watch() -> None:
        # each watcher is its own "process": its own scheduler and engine connection
        mine = DockerScheduler("watcher", docker_host=scheduler.docker_host)
        finals.append(wait(mine, app_id))
        mine.close()

    watchers = [threading.Thread(target=watch) for _ in range(4)]
    for t in watchers:
        t.start()
    for t in watchers:
        t.join(timeout=WAIT_S)
    assert [d.state for d in finals] == [AppState.SUCCEEDED] * 4
    assert {d.num_restarts for d in finals} == {1}
    assert (tmp_path / "flaky").read_text().strip() == "2"
    assert (tmp_path / "steady").read_text().strip() == "2"


def test_containers_a_dead_launcher_never_started_fail_the_app(
    docker_client: Any, busybox_image: str, session_name: str
) -> None:
    sched = DockerScheduler(session_name, start_timeout=1, client=docker_client)
    request = sched.submit_dryrun(AppDef("orphaned", [sh("a", "true")]), {}).request
    # what a launcher that died between creating and starting leaves behind
    docker_client.api.create_network(request.network, labels=request.network_labels)
    for c in request.containers:
        docker_client.api.create_container_from_config(c.config, name=c.name)
    try:
        assert sched.describe(request.app_id).state == AppState.PENDING  # type: ignore[union-attr]
        time.sleep(1.5)
        desc = sched.describe(request.app_id)
        assert desc is not None and desc.state == AppState.FAILED
        assert "never started" in desc.msg
    finally:
        sched.delete(request.app_id)
    assert engine_containers(docker_client, request.app_id) == []


# --- the state machine, on engine views written out by hand -------------------------------------


def _replica(
    cid: str,
    status: str,
    exit_code: int = 0,
    started: float = 10.0,
    finished: float = 0.0,
    **labels: str,
) -> Any:
    from anylaunch.schedulers.docker.state import _Container

    base = {
        "anylaunch.kind": "replica",
        "anylaunch.role": "r",
        "anylaunch.replica-id": cid[-1],
        "anylaunch.retry-policy": "APPLICATION",
        "anylaunch.max-retries": "1",
    }
    return _Container(
        cid,
        f"app-{cid}",
        {**base, **labels},
        status,
        exit_code,
        created=1.0,
        started=started,
        finished=finished,
    )


def _retry_event(created: float) -> Any:
    from anylaunch.schedulers.docker.state import _Container

    labels = {
        "anylaunch.kind": "event",
        "anylaunch.event": "retry",
        "anylaunch.event-data": json.dumps({"scope": "app", "role": "r"}),
    }
    return _Container("e", "app.retry.x", labels, "created", created=created)


def test_a_retry_in_progress_is_neither_a_new_failure_nor_repeated() -> None:
    from anylaunch.schedulers.docker.state import _evaluate

    # the restarter recorded the retry at t=20 and stopped r1 (exit 143); nothing restarted yet
    view = [
        _replica("r0", "exited", 1, started=10, finished=19),
        _replica("r1", "exited", 143, started=10, finished=21),
        _retry_event(20),
    ]
    verdict = _evaluate(view, now=22, start_timeout=30)
    assert verdict.state == AppState.RUNNING and verdict.retry is None and verdict.fail is None
    assert verdict.num_restarts == 1 and not verdict.resume
    # the restarter died: once the start timeout passed, whoever looks next starts them
    late = _evaluate(view, now=60, start_timeout=30)
    assert late.state == AppState.RUNNING and {c.id for c in late.resume} == {"r0", "r1"}
    # restarted (after the retry) and failed again: the one retry is used up
    again = [
        _replica("r0", "exited", 1, started=25, finished=26),
        _replica("r1", "running", started=25),
        _retry_event(20),
    ]
    assert _evaluate(again, now=27, start_timeout=30).fail is not None


def test_engine_restarts_and_unstarted_containers() -> None:
    from anylaunch.schedulers.docker.state import _evaluate

    restarting = [
        _replica("r0", "restarting", 1, **{"anylaunch.retry-policy": "REPLICA"}),
        _replica("r1", "running"),
    ]
    assert _evaluate(restarting, now=11, start_timeout=30).state == AppState.RUNNING
    created = [_replica("r0", "created", started=0.0, **{"anylaunch.max-retries": "0"})]
    assert _evaluate(created, now=5, start_timeout=30).state == AppState.PENDING
    assert _evaluate(created, now=60, start_timeout=30).fail is not None
