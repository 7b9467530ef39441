"""Runner tests on real processes: a small subprocess scheduler defined here, and local_cwd."""

from __future__ import annotations

import itertools
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anylaunch.runner import (
    DEFAULT_SESSION_NAME,
    ENV_ANYLAUNCH_JOB_ID,
    ENV_ANYLAUNCH_PARENT_RUN_ID,
    ENV_ANYLAUNCH_SESSION,
    AppWaitTimeoutError,
    Runner,
    get_runner,
    poll_intervals,
)
from anylaunch.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    filter_regex,
)
from anylaunch.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    InvalidRunConfigException,
    InvalidSpecError,
    MalformedAppHandleException,
    ReplicaStatus,
    Resource,
    Role,
    RoleStatus,
    UnknownAppException,
    UnknownSchedulerException,
    Workspace,
    macros,
    parse_app_handle,
    runopts,
)
from anylaunch.workspace.api import WorkspaceMixin

# ---------------------------------------------------------------------------------------------
# A small real scheduler: every replica is a subprocess; the "backend" (the processes and their
# logs) is shared between scheduler instances, like a cluster seen from several clients.
# ---------------------------------------------------------------------------------------------


@dataclass
class ReplicaSpec:
    role: str
    idx: int
    cmd: list[str]
    env: dict[str, str]
    cwd: str


@dataclass
class ProcRequest:
    app_id: str
    app: AppDef
    cfg: Mapping[str, CfgVal]
    replicas: list[ReplicaSpec]


@dataclass
class Replica:
    spec: ReplicaSpec
    proc: subprocess.Popen[bytes]
    log: str


@dataclass
class ProcBackend:
    root: str
    apps: dict[str, list[Replica]] = field(default_factory=dict)
    app_defs: dict[str, AppDef] = field(default_factory=dict)
    cancelled: set[str] = field(default_factory=set)
    created: int = 0
    closed: int = 0

    def kill_all(self) -> None:
        for replicas in self.apps.values():
            for r in replicas:
                if r.proc.poll() is None:
                    r.proc.kill()
                r.proc.wait()


class ProcScheduler(Scheduler[Mapping[str, CfgVal]]):
    def __init__(self, session_name: str, backend: ProcBackend, name: str = "proc") -> None:
        super().__init__(name, session_name)
        self.backend_state = backend
        backend.created += 1

    def close(self) -> None:
        self.backend_state.closed += 1

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("tag", type_=str, default="none", help="exported to replicas as PROC_TAG")
        opts.add("tags", type_=list[str], default=None, help="extra tags")
        opts.add("verbose", type_=bool, default=False, help="chatty")
        return opts

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        app_id = f"{app.name}-{uuid.uuid4().hex[:8]}"
        replicas = []
        for role in app.roles:
            for idx in range(role.num_replicas):
                values = macros.Values(
                    img_root=role.image, app_id=app_id, replica_id=str(idx), rank0_env="X"
                )
                sub = values.apply(role)
                env = {**sub.env, "PROC_TAG": str(cfg["tag"])}
                cwd = role.image if os.path.isdir(role.image) else os.getcwd()
                replicas.append(ReplicaSpec(role.name, idx, [sub.entrypoint, *sub.args], env, cwd))
        request = ProcRequest(app_id, app, cfg, replicas)
        return AppDryRunInfo(request, lambda r: f"would run {[s.cmd for s in r.replicas]}")

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        request: ProcRequest = dryrun_info.request
        replicas = []
        for spec in request.replicas:
            log = os.path.join(self.backend_state.root, f"{request.app_id}.{spec.role}.{spec.idx}")
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    spec.cmd,
                    env={**os.environ, **spec.env},
                    cwd=spec.cwd,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            replicas.append(Replica(spec, proc, log))
        self.backend_state.apps[request.app_id] = replicas
        self.backend_state.app_defs[request.app_id] = request.app
        return request.app_id

    def _state(self, app_id: str) -> AppState:
        codes = [r.proc.poll() for r in self.backend_state.apps[app_id]]
        if any(c is None for c in codes):
            return AppState.RUNNING
        if app_id in self.backend_state.cancelled:
            return AppState.CANCELLED
        return AppState.SUCCEEDED if all(c == 0 for c in codes) else AppState.FAILED

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        if app_id not in self.backend_state.apps:
            return None
        state = self._state(app_id)
        roles: dict[str, RoleStatus] = {}
        for r in self.backend_state.apps[app_id]:
            code = r.proc.poll()
            rstate = (
                AppState.RUNNING
                if code is None
                else (AppState.SUCCEEDED if code == 0 else AppState.FAILED)
            )
            roles.setdefault(r.spec.role, RoleStatus(r.spec.role)).replicas.append(
                ReplicaStatus(r.spec.idx, rstate, r.spec.role, "localhost")
            )
        return DescribeAppResponse(
            app_id=app_id,
            state=state,
            num_restarts=0,
            msg="" if state != AppState.FAILED else "a replica exited non-zero",
            roles_statuses=list(roles.values()),
            roles=list(self.backend_state.app_defs[app_id].roles),
        )

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        return [ListAppResponse(app_id, self._state(app_id)) for app_id in self.backend_state.apps]

    def _cancel_existing(self, app_id: str) -> None:
        self.backend_state.cancelled.add(app_id)
        for r in self.backend_state.apps[app_id]:
            if r.proc.poll() is None:
                r.proc.terminate()

    def _delete_existing(self, app_id: str) -> None:
        self._cancel_existing(app_id)
        for r in self.backend_state.apps.pop(app_id):
            r.proc.wait()

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterable[str]:
        replica = next(
            r
            for r in self.backend_state.apps[app_id]
            if r.spec.role == role_name and r.spec.idx == k
        )

        def lines() -> Iterator[str]:
            with open(replica.log) as f:
                while True:
                    line = f.readline()
                    if line:
                        yield line
                    elif should_tail and replica.proc.poll() is None:
                        time.sleep(0.02)
                    elif should_tail and (rest := f.read()):
                        yield from rest.splitlines(keepends=True)
                    else:
                        return

        return filter_regex(regex, lines()) if regex else lines()


class WorkspaceProcScheduler(ProcScheduler, WorkspaceMixin[Mapping[str, CfgVal]]):
    """Builds a workspace by copying it into a fresh directory that becomes the role's image."""

    def build_workspace_and_update_role(
        self, role: Role, workspace: Workspace, cfg: Mapping[str, CfgVal]
    ) -> None:
        out = tempfile.mkdtemp(dir=self.backend_state.root, prefix="ws-")
        workspace.merge_into(out)
        role.image = out


# ---------------------------------------------------------------------------------------------
# Fixtures and helpers
# ---------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user or project .anylaunchconfig leaks into a test; HOME and CWD are empty dirs."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("ANYLAUNCHCONFIG", raising=False)
    monkeypatch.delenv(ENV_ANYLAUNCH_PARENT_RUN_ID, raising=False)


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[ProcBackend]:
    root = tmp_path / "backend"
    root.mkdir()
    state = ProcBackend(str(root))
    yield state
    state.kill_all()


def make_runner(backend: ProcBackend, name: str = "test") -> Runner:
    return Runner(
        name,
        {
            "proc": lambda session_name, **kw: ProcScheduler(session_name, backend),
            "proc_ws": lambda session_name, **kw: WorkspaceProcScheduler(
                session_name, backend, "proc_ws"
            ),
        },
    )


def sh_app(script: str, name: str = "sh", replicas: int = 1, image: str = "") -> AppDef:
    return AppDef(
        name,
        roles=[
            Role(
                "worker",
                image=image or os.getcwd(),
                entrypoint="/bin/sh",
                args=["-c", script],
                num_replicas=replicas,
                resource=Resource(cpu=1, gpu=0, memMB=64),
            )
        ],
    )


# ---------------------------------------------------------------------------------------------
# Lifecycle on real processes
# ---------------------------------------------------------------------------------------------


def test_run_wait_logs_and_job_id_on_real_processes(backend: ProcBackend) -> None:
    with make_runner(backend) as runner:
        app = sh_app(
            'echo "job=$ANYLAUNCH_JOB_ID session=$ANYLAUNCH_SESSION"; echo second; '
            'printf "no newline"',
            replicas=2,
        )
        handle = runner.run(app, "proc")
        scheduler, session, _ = parse_app_handle(handle)
        assert (scheduler, session) == ("proc", "test")

        final = runner.wait(handle, wait_interval=0.2)
        assert final is not None and final.state == AppState.SUCCEEDED
        assert [r.state for r in final.roles[0].replicas] == [AppState.SUCCEEDED] * 2

        for k in (0, 1):
            lines = list(runner.log_lines(handle, "worker", k=k))
            # ${app_id} in ANYLAUNCH_JOB_ID was substituted by the scheduler: the job sees its
            # own handle, and lines keep the newlines the scheduler gave them
            assert lines == [f"job={handle} session=test\n", "second\n", "no newline"]
        assert list(runner.log_lines(handle, "worker", regex="^sec")) == ["second\n"]


def test_log_lines_tail_follows_until_the_app_ends(backend: ProcBackend) -> None:
    with make_runner(backend) as runner:
        handle = runner.run(sh_app("for i in 1 2 3; do echo $i; sleep 0.1; done"), "proc")
        assert list(runner.log_lines(handle, "worker", should_tail=True)) == ["1\n", "2\n", "3\n"]
        status = runner.status(handle)
        assert status is not None and status.state == AppState.SUCCEEDED


def test_failed_app_reports_failed_with_message(backend: ProcBackend) -> None:
    with make_runner(backend) as runner:
        handle = runner.run(sh_app("exit 3"), "proc")
        final = runner.wait(handle, wait_interval=0.1)
        assert final is not None and final.state == AppState.FAILED
        assert "non-zero" in final.msg


def test_cancel_stops_a_running_app_and_is_idempotent(backend: ProcBackend) -> None:
    with make_runner(backend) as runner:
        handle = runner.run(sh_app("exec sleep 30"), "proc")
        status = runner.status(handle)
        assert status is not None and status.state == AppState.RUNNING
        runner.cancel(handle)
        final = runner.wait(handle, wait_interval=0.1, timeout=10)
        assert final is not None and final.state == AppState.CANCELLED
        runner.cancel(handle)  # finished: a no-op
        runner.cancel("proc://test/never-existed")  # unknown: a no-op
        final_again = runner.status(handle)
        assert final_again is not None and final_again.state == AppState.CANCELLED


def test_wait_timeout_names_handle_state_and_fix(backend: ProcBackend) -> None:
    with make_runner(backend) as runner:
        handle = runner.run(sh_app("exec sleep 30"), "proc")
        started = time.monotonic()
        with pytest.raises(AppWaitTimeoutError) as err:
            runner.wait(handle, wait_interval=0.1, timeout=0.3)
        assert time.monotonic() - started < 5
        assert isinstance(err.value, TimeoutError)
        assert err.value.app_handle == handle and err.value.last_state == AppState.RUNNING
        message = str(err.value)
        assert handle in message and "RUNNING" in message and "cancel" in message
        # timing out does not cancel the app
        status = runner.status(handle)
        assert status is not None and status.state == AppState.RUNNING
        runner.cancel(handle)


@pytest.mark.parametrize("bad", [{"wait_interval": 0}, {"timeout": -1}, {"timeout": "5"}])
def test_wait_rejects_bad_arguments(backend: ProcBackend, bad: dict[str, Any]) -> None:
    with make_runner(backend) as runner, pytest.raises(InvalidSpecError):
        runner.wait("proc://test/x", **bad)


def test_unknown_app_status_is_none(backend: ProcBackend) -> None:
    with make_runner(backend) as runner:
        handle = "proc://test/no-such-app"
        assert runner.status(handle) is None
        assert runner.wait(handle, wait_interval=0.1) is None
        assert runner.describe(handle) is None
        with pytest.raises(UnknownAppException) as err:
            runner.log_lines(handle, "worker")
        assert handle in str(err.value)


def test_handle_from_another_session_is_routed_by_its_scheduler(backend: ProcBackend) -> None:
    with make_runner(backend, name="launcher") as launcher:
        handle = launcher.run(sh_app("echo from-launcher"), "proc")
    with make_runner(backend, name="watcher") as watcher:
        final = watcher.wait(handle, wait_interval=0.1)
        assert final is not None and final.state == AppState.SUCCEEDED
        assert list(watcher.log_lines(handle, "worker")) == ["from-launcher\n"]


def test_describe_rebuilds_the_app_from_the_scheduler(backend: ProcBackend) -> None:
    with make_runner(backend) as runner:
        handle = runner.run(sh_app("true", name="descr"), "proc")
        described = runner.describe(handle)
        assert described is not None
        assert described.name == "descr"
        assert [r.name for r in described.roles] == ["worker"]
        assert described.roles[0].entrypoint == "/bin/sh"
    with make_runner(backend, name="elsewhere") as other:
        from_elsewhere = other.describe(handle)
        assert from_elsewhere is not None
        assert from_elsewhere.name == parse_app_handle(handle).app_id


def test_list_and_delete(backend: ProcBackend) -> None:
    with make_runner(backend) as runner:
        handle = runner.run(sh_app("true"), "proc")
        runner.wait(handle, wait_interval=0.1)
        listed = runner.list("proc")
        assert [a.app_handle for a in listed] == [handle]
        assert listed[0].state == AppState.SUCCEEDED
        runner.delete(handle)
        assert runner.status(handle) is None
        assert runner.list("proc") == []


# ---------------------------------------------------------------------------------------------
# Handles, schedulers, lifecycle of the runner
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["not a handle", "proc:/test/x", "proc://test/", "", "://s/x"])
def test_malformed_handles_are_rejected_everywhere(backend: ProcBackend, bad: str) -> None:
    with make_runner(backend) as runner:
        for call in (
            runner.status,
            runner.describe,
            runner.cancel,
            runner.delete,
            runner.wait,
            lambda h: runner.log_lines(h, "worker"),
        ):
            with pytest.raises(MalformedAppHandleException) as err:
                call(bad)
            assert "{scheduler}://{session_name}/{app_id}" in str(err.value)


def test_unknown_scheduler_suggests_the_closest(backend: ProcBackend) -> None:
    with make_runner(backend) as runner:
        with pytest.raises(UnknownSchedulerException) as err:
            runner.run(sh_app("true"), "porc")
        assert "Did you mean 'proc'?" in str(err.value)
        with pytest.raises(UnknownSchedulerException):
            runner.status("porc://test/x")
        with pytest.raises(UnknownSchedulerException):
            runner.scheduler_run_opts("nope")
    assert backend.apps == {}


def test_schedulers_are_created_lazily_once_and_closed(backend: ProcBackend) -> None:
    runner = make_runner(backend)
    assert runner.scheduler_backends() == ["proc", "proc_ws"]
    assert backend.created == 0
    runner.scheduler_run_opts("proc")
    runner.status("proc://test/x")
    runner.list("proc")
    assert backend.created == 1
    with runner:
        pass
    assert backend.closed == 1
    runner.close()  # a second close is harmless
    assert backend.closed == 1


def test_runner_session_name_validation() -> None:
    with pytest.raises(InvalidSpecError) as err:
        Runner("has/slash", {})
    assert "session name" in str(err.value)
    with get_runner() as runner:
        assert runner.session_name == DEFAULT_SESSION_NAME == "anylaunch"
        assert runner.scheduler_backends()[0] == "local_cwd"
    with get_runner("team-a") as named:
        assert named.name() == "team-a"


def test_schedule_rejects_what_dryrun_did_not_make(backend: ProcBackend) -> None:
    with make_runner(backend) as runner, pytest.raises(InvalidSpecError) as err:
        runner.schedule(AppDryRunInfo({"x": 1}, repr))
    assert "Runner.dryrun" in str(err.value)


# ---------------------------------------------------------------------------------------------
# Dryrun: copies, cfg, validation, env, workspace
# ---------------------------------------------------------------------------------------------


def test_dryrun_never_mutates_the_callers_app(backend: ProcBackend) -> None:
    with make_runner(backend) as runner:
        app = sh_app("true")
        before = repr(app)
        info = runner.dryrun(app, "proc", parent_run_id="parent-1")
        assert repr(app) == before
        assert ENV_ANYLAUNCH_JOB_ID not in app.roles[0].env
        submitted = info.request.app
        assert submitted is not app
        assert submitted.roles[0].env == {
            ENV_ANYLAUNCH_JOB_ID: "proc://test/${app_id}",
            ENV_ANYLAUNCH_SESSION: "test",
            ENV_ANYLAUNCH_PARENT_RUN_ID: "parent-1",
        }
    assert backend.apps == {}  # a dryrun submits nothing


def test_parent_run_id_from_the_launchers_env_wins(
    backend: ProcBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_ANYLAUNCH_PARENT_RUN_ID, "outer")
    with make_runner(backend) as runner:
        info = runner.dryrun(sh_app("true"), "proc", parent_run_id="inner")
        assert info.request.app.roles[0].env[ENV_ANYLAUNCH_PARENT_RUN_ID] == "outer"


def test_invalid_config_or_app_fails_in_dryrun_and_nothing_is_submitted(
    backend: ProcBackend,
) -> None:
    with make_runner(backend) as runner:
        with pytest.raises(InvalidRunConfigException) as err:
            runner.run(sh_app("true"), "proc", cfg={"tga": "x"})
        assert "Did you mean 'tag'?" in str(err.value)
        with pytest.raises(InvalidRunConfigException):
            runner.run(sh_app("true"), "proc", cfg={"verbose": "yes"})  # not a bool
        no_resource = AppDef("r", roles=[Role("worker", image=".", entrypoint="true")])
        with pytest.raises(InvalidSpecError) as err2:
            runner.run(no_resource, "proc")
        assert "resource" in str(err2.value)
        with pytest.raises(InvalidSpecError):
            runner.run(AppDef("empty"), "proc")
        with pytest.raises(InvalidSpecError):
            runner.run("not an app", "proc")  # type: ignore[arg-type]
    assert backend.apps == {}


def test_cfg_precedence_explicit_over_home_over_cwd_over_default(backend: ProcBackend) -> None:
    home, cwd = Path(os.environ["HOME"]), Path.cwd()
    with make_runner(backend) as runner:
        assert runner.dryrun(sh_app("true"), "proc").request.cfg["tag"] == "none"

        (home / ".anylaunchconfig").write_text("[proc]\ntag = home\nverbose = true\n")
        cfg = runner.dryrun(sh_app("true"), "proc").request.cfg
        assert (cfg["tag"], cfg["verbose"]) == ("home", True)

        # TorchX's rule: $HOME's file is read first, and the first value read wins
        (cwd / ".anylaunchconfig").write_text("[proc]\ntag = cwd\ntags = a;b\n")
        cfg = runner.dryrun(sh_app("true"), "proc").request.cfg
        assert (cfg["tag"], cfg["verbose"], cfg["tags"]) == ("home", True, ["a", "b"])

        cfg = runner.dryrun(sh_app("true"), "proc", cfg={"tag": "explicit"}).request.cfg
        assert (cfg["tag"], cfg["verbose"]) == ("explicit", True)

        # the resolved cfg really reaches the job
        handle = runner.run(sh_app('echo "$PROC_TAG"'), "proc", cfg={"tag": "explicit"})
        runner.wait(handle, wait_interval=0.1)
        assert list(runner.log_lines(handle, "worker")) == ["explicit\n"]


def test_bad_option_in_config_file_fails_dryrun_naming_the_file(backend: ProcBackend) -> None:
    (Path.cwd() / ".anylaunchconfig").write_text("[proc]\ntga = x\n")
    with make_runner(backend) as runner, pytest.raises(InvalidSpecError) as err:
        runner.dryrun(sh_app("true"), "proc")
    message = str(err.value)
    assert ".anylaunchconfig[proc].tga" in message and "Did you mean 'tag'?" in message


def test_workspace_is_built_into_a_copy_and_the_job_runs_in_it(
    backend: ProcBackend, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "data.txt").write_text("from the workspace\n")
    with make_runner(backend) as runner:
        app = sh_app("cat data.txt", image="/nonexistent-image")
        handle = runner.run(app, "proc_ws", workspace=str(project))
        assert app.roles[0].image == "/nonexistent-image"
        assert app.roles[0].workspace is None
        runner.wait(handle, wait_interval=0.1)
        assert list(runner.log_lines(handle, "worker")) == ["from the workspace\n"]

        # the role's own workspace is used when no argument is given; "" disables it
        app.roles[0].workspace = Workspace(projects={str(project): ""})
        built = runner.dryrun(app, "proc_ws").request.app.roles[0]
        assert built.image != "/nonexistent-image"
        assert (Path(built.image) / "data.txt").exists()
        disabled = runner.dryrun(app, "proc_ws", workspace="").request.app.roles[0]
        assert disabled.image == "/nonexistent-image"
        # a scheduler without workspace support ignores it
        plain = runner.dryrun(app, "proc", workspace=str(project)).request.app.roles[0]
        assert plain.image == "/nonexistent-image"


def test_cfg_from_str_casts_and_rejects_unknown_keys(backend: ProcBackend) -> None:
    with make_runner(backend) as runner:
        assert runner.cfg_from_str("proc", "tag=x,verbose=true,tags=a;b") == {
            "tag": "x",
            "verbose": True,
            "tags": ["a", "b"],
        }
        assert runner.cfg_from_str("proc", "") == {}
        with pytest.raises(InvalidRunConfigException) as err:
            runner.cfg_from_str("proc", "verbos=true")
        assert "Did you mean 'verbose'?" in str(err.value)
        with pytest.raises(InvalidRunConfigException):
            runner.cfg_from_str("proc", "verbose=maybe")
        # the scheduler's own options, and the one every scheduler takes for the runner
        assert {name for name, _ in runner.scheduler_run_opts("proc")} == {
            "archive_url",
            "tag",
            "tags",
            "verbose",
        }


# ---------------------------------------------------------------------------------------------
# Components
# ---------------------------------------------------------------------------------------------


def test_run_component_with_cli_args_dict_args_and_config_defaults(backend: ProcBackend) -> None:
    with make_runner(backend) as runner:
        handle = runner.run_component("utils.echo", ["--msg", "cli-args"], "proc")
        runner.wait(handle, wait_interval=0.1)
        assert list(runner.log_lines(handle, "echo")) == ["cli-args\n"]

        handle = runner.run_component(
            "utils.echo", {"msg": "--dict-args", "num_replicas": 2}, "proc"
        )
        runner.wait(handle, wait_interval=0.1)
        assert list(runner.log_lines(handle, "echo", k=1)) == ["--dict-args\n"]

        (Path.cwd() / ".anylaunchconfig").write_text("[component:utils.echo]\nmsg = from-config\n")
        info = runner.dryrun_component("utils.echo", [], "proc")
        assert info.request.app.roles[0].args == ["from-config"]

    # explicit component_defaults win over the config file
    runner2 = Runner(
        "test",
        {"proc": lambda session_name, **kw: ProcScheduler(session_name, backend)},
        component_defaults={"utils.echo": {"msg": "from-runner"}},
    )
    with runner2:
        info = runner2.dryrun_component("utils.echo", [], "proc")
        assert info.request.app.roles[0].args == ["from-runner"]


COMPONENT_FILE = '''
import anylaunch.specs as specs


def greet(greeting: str, *names: str, loud: bool = False, tags: dict[str, str] | None = None) -> specs.AppDef:
    """Greets people.

    Args:
        greeting: what to say
        names: who to greet
        loud: shout it
        tags: labels

    Returns:
        the app
    """
    words = [greeting.upper() if loud else greeting, *names, *sorted(f"{k}={v}" for k, v in (tags or {}).items())]
    return specs.AppDef(
        "greet",
        roles=[
            specs.Role(
                "greet",
                image=".",
                entrypoint="echo",
                args=words,
                resource=specs.Resource(cpu=1, gpu=0, memMB=64),
            )
        ],
    )
'''


def test_dict_component_args_cover_varargs_flags_and_dicts(
    backend: ProcBackend, tmp_path: Path
) -> None:
    path = tmp_path / "greet.py"
    path.write_text(COMPONENT_FILE)
    with make_runner(backend) as runner:
        args = {"greeting": "hi", "names": ["ann", "--bob"], "loud": True, "tags": {"a": "1"}}
        handle = runner.run_component(f"{path}:greet", args, "proc")
        runner.wait(handle, wait_interval=0.1)
        assert list(runner.log_lines(handle, "greet")) == ["HI ann --bob a=1\n"]
        info = runner.dryrun_component(f"{path}:greet", {"greeting": "yo", "loud": None}, "proc")
        assert info.request.app.roles[0].args == ["yo"]


def test_unknown_component_suggests_the_closest(backend: ProcBackend) -> None:
    from anylaunch.components import ComponentNotFoundException

    with make_runner(backend) as runner:
        with pytest.raises(ComponentNotFoundException) as err:
            runner.run_component("utils.ecoh", [], "proc")
        assert "Did you mean 'utils.echo'?" in str(err.value)
        with pytest.raises(InvalidSpecError):
            runner.run_component("utils.echo", "--msg hi", "proc")  # a str is not a list of args
    assert backend.apps == {}


def test_materialize_component_is_the_app_dryrun_component_submits(
    backend: ProcBackend, tmp_path: Path
) -> None:
    (Path.cwd() / ".anylaunchconfig").write_text(
        "[component:utils.echo]\nmsg = from-config\nnum_replicas = 3\n"
    )
    runner = Runner(
        "test",
        {"proc": lambda session_name, **kw: ProcScheduler(session_name, backend)},
        component_defaults={"utils.echo": {"msg": "from-runner"}},
    )
    with runner:
        for args in ([], ["--msg", "cli"], {"msg": "dict", "num_replicas": 2}):
            app = runner.materialize_component("utils.echo", args)
            submitted = runner.dryrun_component("utils.echo", args, "proc")._app
            assert runner.dryrun(app, "proc")._app == submitted
        # defaults: the runner's over the config file's over the function's
        app = runner.materialize_component("utils.echo", [])
        assert (app.roles[0].args, app.roles[0].num_replicas) == (["from-runner"], 3)

        # the point of it: edit the app before the dryrun
        app.roles[0].env["EXTRA"] = "1"
        app.name = "renamed"
        handle = runner.run(app, "proc")
        assert parse_app_handle(handle).app_id.startswith("renamed-")
        assert runner.wait(handle, wait_interval=0.1).state == AppState.SUCCEEDED
        assert backend.app_defs[parse_app_handle(handle).app_id].roles[0].env["EXTRA"] == "1"


@pytest.mark.parametrize(
    "component, args, error",
    [
        ("", [], "component='' is invalid: must be a non-empty str"),
        (None, [], "component=None is invalid"),
        ("utils.echo", "--msg hi", "component_args='--msg hi' is invalid: must be a list of str"),
        ("utils.echo", [1, 2], "component_args=[1, 2] is invalid"),
        ("utils.echo", {"": "x"}, "component_args='' is invalid: keys must be parameter names"),
        ("utils.echo", ["--nope", "x"], "nope"),
    ],
)
def test_materialize_component_names_bad_input(
    backend: ProcBackend, component: Any, args: Any, error: str
) -> None:
    with make_runner(backend) as runner, pytest.raises(InvalidSpecError) as info:
        runner.materialize_component(component, args)
    assert error in str(info.value)
    assert "Fix:" in str(info.value)


class BatchProcScheduler(ProcScheduler):
    """A backend that answers for many apps in one call (as Slurm, Batch and Kubernetes do)."""

    batches: list[list[str]]

    def describe_many(self, app_ids: Any) -> dict[str, DescribeAppResponse | None]:
        self.batches.append(list(app_ids))
        return {app_id: self.describe(app_id) for app_id in app_ids}


def batch_runner(backend: ProcBackend, batches: list[list[str]]) -> Runner:
    def batch(session_name: str, **kw: Any) -> BatchProcScheduler:
        sched = BatchProcScheduler(session_name, backend, "batch")
        sched.batches = batches
        return sched

    return Runner(
        "test",
        {"batch": batch, "proc": lambda session_name, **kw: ProcScheduler(session_name, backend)},
    )


def test_status_many_asks_each_scheduler_once_and_agrees_with_status(
    backend: ProcBackend,
) -> None:
    batches: list[list[str]] = []
    with batch_runner(backend, batches) as runner:
        ok = [runner.run(sh_app("true", name=f"ok{i}"), "batch") for i in range(3)]
        bad = runner.run(sh_app("exit 3", name="bad"), "batch")
        other = runner.run(sh_app("true", name="other"), "proc")
        for handle in [*ok, bad, other]:
            runner.wait(handle, wait_interval=0.1, timeout=30)
        gone = "batch://elsewhere/never-launched-1"
        # another session's handle of an app is the same app: it is asked for once
        alias = ok[0].replace("://test/", "://another/")
        asked = [other, gone, *ok, bad, ok[1], alias]

        batches.clear()
        statuses = runner.status_many(iter(asked))  # any iterable, even a one-shot one

        assert list(statuses) == list(dict.fromkeys(asked))  # input order, each once
        assert len(batches) == 1  # one backend call for the four apps of "batch"
        assert sorted(batches[0]) == sorted({parse_app_handle(h).app_id for h in [gone, *ok, bad]})
        assert statuses[gone] is None
        for handle in [*ok, bad, other, alias]:
            assert statuses[handle] == runner.status(handle)
        assert [statuses[h].state for h in ok] == [AppState.SUCCEEDED] * 3  # type: ignore[union-attr]
        failed = statuses[bad]
        assert failed is not None and failed.state == AppState.FAILED
        assert failed.msg == "a replica exited non-zero"
        assert runner.status_many([]) == {}


@pytest.mark.parametrize(
    "handles, error",
    [
        ("batch://test/x", InvalidSpecError),
        (None, InvalidSpecError),
        (["batch://test/x", "not-a-handle"], MalformedAppHandleException),
        (["batch://test/x", "nosuch://test/x"], UnknownSchedulerException),
    ],
)
def test_status_many_rejects_bad_handles_before_asking_anyone(
    backend: ProcBackend, handles: Any, error: type[Exception]
) -> None:
    batches: list[list[str]] = []
    with batch_runner(backend, batches) as runner, pytest.raises(error):
        runner.status_many(handles)
    assert batches == []


# ---------------------------------------------------------------------------------------------
# local_cwd, the real built-in scheduler
# ---------------------------------------------------------------------------------------------


def _local_cwd_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("anylaunch.schedulers.local_scheduler") is not None


@pytest.mark.skipif(not _local_cwd_available(), reason="local_cwd scheduler not built yet")
def test_local_cwd_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "local_state"))
    with get_runner("e2e") as runner:
        handle = runner.run_component("utils.echo", ["--msg", "hello local_cwd"], "local_cwd")
        assert handle.startswith("local_cwd://e2e/")
        final = runner.wait(handle, wait_interval=0.5, timeout=60)
        assert final is not None and final.state == AppState.SUCCEEDED
        assert list(runner.log_lines(handle, "echo")) == ["hello local_cwd\n"]

        job_id = runner.run(sh_app('echo "$ANYLAUNCH_JOB_ID"'), "local_cwd")
        runner.wait(job_id, wait_interval=0.2, timeout=60)
        assert list(runner.log_lines(job_id, "worker")) == [f"{job_id}\n"]

        slow = runner.run(sh_app("exec sleep 30"), "local_cwd")
        with pytest.raises(AppWaitTimeoutError):
            runner.wait(slow, wait_interval=0.1, timeout=0.5)
        runner.cancel(slow)
        cancelled = runner.wait(slow, wait_interval=0.2, timeout=30)
        assert cancelled is not None and cancelled.state == AppState.CANCELLED
        assert runner.status("local_cwd://e2e/no-such-app-xyz") is None

    # another process/session sees the app by its handle
    with get_runner("watcher") as watcher:
        seen = watcher.status(handle)
        assert seen is not None and seen.state == AppState.SUCCEEDED


# ---------------------------------------------------------------------------------------------
# The polling backoff
# ---------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    cap=st.floats(min_value=1e-3, max_value=3600),
    initial=st.floats(min_value=1e-3, max_value=100),
    factor=st.floats(min_value=1, max_value=10),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_poll_intervals_stay_within_bounds(
    cap: float, initial: float, factor: float, seed: int
) -> None:
    delays = list(
        itertools.islice(poll_intervals(cap, initial, factor, rng=random.Random(seed)), 60)
    )
    step = min(initial, cap)
    for delay in delays:
        # each delay is jittered within [step/2, step] and the step never exceeds the cap
        assert step / 2 <= delay <= step <= cap
        step = min(step * factor, cap)


def test_poll_intervals_start_small_reach_the_cap_and_are_jittered() -> None:
    delays = list(itertools.islice(poll_intervals(10, rng=random.Random(1)), 40))
    assert delays[0] <= 0.1
    assert max(delays[-10:]) > 5  # after ~7 doublings the step is the cap
    assert len(set(delays[-10:])) == 10  # jittered: not all the same
    other = list(itertools.islice(poll_intervals(10, rng=random.Random(2)), 40))
    assert other != delays


@pytest.mark.parametrize("bad", [{"cap": 0}, {"cap": -1}, {"initial": 0}, {"factor": 0.5}])
def test_poll_intervals_reject_bad_arguments(bad: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {"cap": 1.0, **bad}
    with pytest.raises(InvalidSpecError):
        poll_intervals(**kwargs)  # rejected at the call, not on first next()


def test_sh_is_available() -> None:
    # the process tests above depend on a POSIX shell
    assert shutil.which("sh") is not None and sys.platform != "win32"
