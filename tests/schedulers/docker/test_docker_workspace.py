"""The Docker workspace: plans at dryrun (content-hash tags, ignore rules, Dockerfile override),
builds and pushes on a real engine and registry at schedule time, skips unchanged rebuilds."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anylaunch.schedulers.docker_scheduler import DockerScheduler
from anylaunch.specs import AppDef, AppState, Role, Workspace
from anylaunch.specs.errors import InvalidRunConfigException, InvalidSpecError
from anylaunch.workspace.docker_workspace import (
    LOCAL_REPOSITORY,
    WORKSPACE_DOCKERFILE,
    DockerIgnore,
    WorkspaceBuildError,
    plan_workspace_image,
)
from tests.schedulers.docker.docker_engine import docker_host

WAIT_S = 60


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return root


def image_of(root: Path, base: str = "busybox:latest", repo: str | None = None) -> str:
    return plan_workspace_image(base, Workspace({str(root): ""}), repo).image


# --- .dockerignore ----------------------------------------------------------------------------

_SEGMENT = st.sampled_from(["a", "b", "c.py", "d.txt", "e"])
_PATHS = st.lists(_SEGMENT, min_size=1, max_size=4).map("/".join)
_PATTERNS = st.lists(
    st.tuples(
        st.booleans(),
        st.lists(st.sampled_from(["a", "b", "*", "**", "*.py", "?"]), min_size=1, max_size=3),
    ),
    max_size=5,
).map(lambda items: [("!" if neg else "") + "/".join(parts) for neg, parts in items])


@given(patterns=_PATTERNS, path=_PATHS)
def test_the_last_matching_pattern_wins(patterns: list[str], path: str) -> None:
    assert DockerIgnore.parse("\n".join([*patterns, path])).excludes(path)
    assert not DockerIgnore.parse("\n".join([*patterns, "!" + path])).excludes(path)


@given(patterns=_PATTERNS, directory=_PATHS, child=_SEGMENT)
def test_an_excluded_directory_excludes_its_contents(
    patterns: list[str], directory: str, child: str
) -> None:
    rules = DockerIgnore.parse(
        "\n".join([p for p in patterns if not p.startswith("!")] + [directory])
    )
    assert rules.excludes(f"{directory}/{child}")


def test_ignore_rules_match_the_docker_cli(
    docker_client: Any, busybox_image: str, tmp_path: Path
) -> None:
    """The same context and .dockerignore through `docker build` (the CLI applies the rules)
    and through our collector keep the same files."""
    files = {
        "top.py": "",
        "x.pyc": "",
        "a/x.pyc": "",
        "a/b/c.txt": "",
        "a/b/d.py": "",
        "build/keep.txt": "",
        "build/drop.txt": "",
        "docs/x.md": "",
        "docs/y/z.md": "",
        "node_modules/m/i.js": "",
        "src/secret.key": "",
        "src/main.py": "",
        "Makefile": "",
    }
    ignore = "# comment\n*.pyc\nbuild\n!build/keep.txt\n**/*.md\n!docs/y/z.md\nnode_modules/\n**/secret*\n/Makefile\na/?/d.py\n"
    root = tree(tmp_path / "ctx", {**files, ".dockerignore": ignore})
    dockerfile = f"FROM {busybox_image}\nCOPY . /ctx\n"
    # the legacy builder: the CLI itself applies .dockerignore to the context it sends
    env = {**os.environ, "DOCKER_BUILDKIT": "0", "DOCKER_HOST": docker_host()}
    tag = f"anylaunch-ignore-oracle:{tmp_path.name[-8:].lower()}"
    subprocess.run(
        ["docker", "build", "-q", "-t", tag, "-f", "-", "."],
        input=dockerfile,
        text=True,
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
        timeout=WAIT_S,
    )
    try:
        out = docker_client.containers.run(tag, ["find", "/ctx", "-type", "f"], remove=True)
    finally:
        docker_client.api.remove_image(tag)
    by_docker = sorted(line[len("/ctx/") :] for line in out.decode().split())
    from anylaunch.workspace.docker_workspace import _collect

    ours = sorted(e.arcname for e in _collect(Workspace({str(root): ""})) if e.kind == "file")
    assert ours == by_docker
    assert "build/keep.txt" in ours and "docs/y/z.md" in ours and "a/b/c.txt" in ours


# --- plans (no engine) -------------------------------------------------------------------------


def test_the_tag_follows_content_mode_base_and_dockerfile_but_not_ignored_files(
    tmp_path: Path,
) -> None:
    root = tree(tmp_path, {"main.py": "print(1)\n", "data/x.txt": "x", ".dockerignore": "*.log\n"})
    first = image_of(root)
    assert first.startswith(f"{LOCAL_REPOSITORY}:")
    assert image_of(root) == first  # deterministic
    (root / "run.log").write_text("noise")
    os.utime(root / "main.py", (0, 0))
    assert image_of(root) == first  # ignored files and mtimes do not count
    (root / "main.py").chmod(0o755)
    assert image_of(root) != first
    (root / "main.py").chmod(0o644)
    assert image_of(root) == first
    assert image_of(root, base="other:1") != first
    (root / "data/x.txt").write_text("y")
    second = image_of(root)
    assert second != first
    (root / WORKSPACE_DOCKERFILE).write_text("ARG IMAGE\nFROM $IMAGE\n")
    assert image_of(root) not in (first, second)
    assert image_of(root, repo="127.0.0.1:5555/team/app").startswith("127.0.0.1:5555/team/app:")


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kept=st.binary(max_size=64), ignored=st.binary(max_size=64))
def test_only_kept_content_changes_the_tag(tmp_path: Path, kept: bytes, ignored: bytes) -> None:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    (root / ".dockerignore").write_text("skip/\n")
    (root / "skip").mkdir(exist_ok=True)
    (root / "keep.bin").write_bytes(b"base")
    (root / "skip" / "x.bin").write_bytes(b"base")
    before = image_of(root)
    (root / "skip" / "x.bin").write_bytes(ignored)
    assert image_of(root) == before
    (root / "keep.bin").write_bytes(kept)
    assert (image_of(root) == before) == (kept == b"base")


def test_a_workspace_on_an_fsspec_filesystem_is_planned_like_a_local_one(tmp_path: Path) -> None:
    import fsspec

    fs = fsspec.filesystem("memory")
    root = f"/anylaunch-test-{tmp_path.name}"
    fs.pipe(
        {f"{root}/main.py": b"print(1)", f"{root}/.dockerignore": b"*.log\n", f"{root}/x.log": b"."}
    )
    plan = plan_workspace_image("busybox", Workspace({f"memory://{root}": ""}))
    assert (plan.num_files, plan.size_bytes) == (2, len(b"print(1)") + len(b"*.log\n"))
    fs.pipe(f"{root}/x.log", b"changed")
    assert plan_workspace_image("busybox", Workspace({f"memory://{root}": ""})).image == plan.image
    fs.pipe(f"{root}/main.py", b"print(2)")
    assert plan_workspace_image("busybox", Workspace({f"memory://{root}": ""})).image != plan.image
    fs.rm(root, recursive=True)


def test_bad_workspaces_and_repos(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match="does not exist"):
        plan_workspace_image("busybox", Workspace({str(tmp_path / "missing"): ""}))
    with pytest.raises(InvalidSpecError, match="image"):
        plan_workspace_image("", Workspace({str(tmp_path): ""}))
    with pytest.raises(InvalidRunConfigException, match="image_repo"):
        plan_workspace_image("busybox", Workspace({str(tmp_path): ""}), "Has Spaces")


def test_dryrun_shows_the_plan_and_builds_nothing(
    runner: Any, docker_client: Any, tmp_path: Path
) -> None:
    root = tree(tmp_path, {"main.sh": "echo hi\n"})
    app = AppDef("ws", [Role("a", image="busybox:latest", entrypoint="sh", args=["main.sh"])])
    info = runner.dryrun(
        app, "local_docker", {"image_repo": "127.0.0.1:5555/dry"}, workspace=str(root)
    )
    image = info.request.containers[0].config["Image"]
    assert image.startswith("127.0.0.1:5555/dry:")
    text = str(info)
    assert f"workspace: build {image} FROM busybox:latest with workspace {root}" in text
    assert f"then push {image}" in text
    import docker

    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.api.inspect_image(image)


# --- builds on the engine ----------------------------------------------------------------------


def run_app(
    sched: DockerScheduler, app: AppDef, workspace: Path, cfg: dict[str, Any] | None = None
) -> tuple[str, AppState, list[str]]:
    role = app.roles[0]
    sched.build_workspace_and_update_role(role, Workspace({str(workspace): ""}), cfg or {})
    info = sched.submit_dryrun(app, cfg or {})
    app_id = sched.schedule(info)
    deadline = time.monotonic() + WAIT_S
    while True:
        desc = sched.describe(app_id)
        assert desc is not None
        if desc.state.is_terminal():
            break
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return role.image, desc.state, list(sched.log_iter(app_id, role.name))


def test_workspace_image_runs_and_is_rebuilt_only_when_changed(
    scheduler: DockerScheduler, python_image: str, docker_client: Any, tmp_path: Path
) -> None:
    root = tree(
        tmp_path,
        {
            "main.py": "import os; print('v1', sorted(os.listdir('.')))\n",
            "notes.tmp": "ignored",
            ".dockerignore": "*.tmp\n",
        },
    )

    def app() -> AppDef:
        return AppDef(
            "ws", [Role("main", image=python_image, entrypoint="python3", args=["main.py"])]
        )

    image, state, lines = run_app(scheduler, app(), root)
    assert state == AppState.SUCCEEDED
    # copied into the image's working directory (/ here); the default Dockerfile stays out of
    # the image, and so does the ignored file
    listing = ast.literal_eval(lines[0].removeprefix("v1 "))
    assert "main.py" in listing and ".dockerignore" in listing and "usr" in listing
    assert WORKSPACE_DOCKERFILE not in listing and "notes.tmp" not in listing
    assert "workspace" not in listing
    built_id = docker_client.api.inspect_image(image)["Id"]

    # unchanged: same tag, not rebuilt
    plan = plan_workspace_image(python_image, Workspace({str(root): ""}))
    assert plan.image == image
    assert scheduler.build_workspace_images([plan]) == [f"reused {image}"]
    assert docker_client.api.inspect_image(image)["Id"] == built_id

    # changed: a new tag, built, and it runs the new code
    (root / "main.py").write_text("print('v2')\n")
    image2, state2, lines2 = run_app(scheduler, app(), root)
    assert image2 != image and state2 == AppState.SUCCEEDED and lines2 == ["v2\n"]
    for tag in (image, image2):
        docker_client.api.remove_image(tag, force=True)


def test_project_dockerfile_overrides_the_default(
    scheduler: DockerScheduler, busybox_image: str, docker_client: Any, tmp_path: Path
) -> None:
    root = tree(
        tmp_path,
        {
            WORKSPACE_DOCKERFILE: "ARG IMAGE\nFROM $IMAGE\nCOPY . /opt/ws\nENV FROM_OVERRIDE=yes\nWORKDIR /opt/ws\n",
            "hello.sh": "echo override=$FROM_OVERRIDE in $(pwd)\n",
        },
    )
    app = AppDef("override", [Role("a", image=busybox_image, entrypoint="sh", args=["hello.sh"])])
    image, state, lines = run_app(scheduler, app, root)
    assert state == AppState.SUCCEEDED
    assert lines == ["override=yes in /opt/ws\n"]
    docker_client.api.remove_image(image, force=True)


def test_several_projects_land_in_their_target_directories(
    scheduler: DockerScheduler, busybox_image: str, tmp_path: Path
) -> None:
    main = tree(tmp_path / "main", {"run.sh": "find lib conf -type f | sort\n"})
    lib = tree(tmp_path / "lib", {"util.sh": "", "sub/deep.sh": ""})
    conf = tmp_path / "conf.yaml"
    conf.write_text("a: 1\n")
    app = AppDef("multi", [Role("a", image=busybox_image, entrypoint="sh", args=["run.sh"])])
    role = app.roles[0]
    workspace = Workspace({str(main): "", str(lib): "lib", str(conf): "conf/app.yaml"})
    scheduler.build_workspace_and_update_role(role, workspace, {})
    app_id = scheduler.schedule(scheduler.submit_dryrun(app, {}))
    deadline = time.monotonic() + WAIT_S
    while not scheduler.describe(app_id).state.is_terminal():  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert list(scheduler.log_iter(app_id, "a")) == [
        "conf/app.yaml\n",
        "lib/sub/deep.sh\n",
        "lib/util.sh\n",
    ]
    scheduler.delete(app_id)
    scheduler._client().api.remove_image(role.image, force=True)


def test_a_changed_base_image_is_rebuilt(
    scheduler: DockerScheduler,
    busybox_image: str,
    python_image: str,
    docker_client: Any,
    tmp_path: Path,
) -> None:
    base = f"anylaunch-test-base:{tmp_path.name[-8:].lower()}"
    docker_client.api.tag(busybox_image, *base.split(":"))
    root = tree(tmp_path, {"x.txt": "x"})
    plan = plan_workspace_image(base, Workspace({str(root): ""}))
    try:
        assert scheduler.build_workspace_images([plan]) == [f"built {plan.image}"]
        assert scheduler.build_workspace_images([plan]) == [f"reused {plan.image}"]
        docker_client.api.tag(python_image, *base.split(":"), force=True)  # same name, new image
        assert scheduler.build_workspace_images([plan]) == [f"built {plan.image}"]
        assert (
            "python3"
            in docker_client.containers.run(
                plan.image, ["sh", "-c", "ls /usr/bin"], remove=True
            ).decode()
        )
    finally:
        for image in (plan.image, base):
            docker_client.api.remove_image(image, force=True)


def test_a_workspace_changed_after_the_dryrun_is_not_built(
    scheduler: DockerScheduler, busybox_image: str, tmp_path: Path
) -> None:
    root = tree(tmp_path, {"x.txt": "x"})
    plan = plan_workspace_image(busybox_image, Workspace({str(root): ""}))
    (root / "x.txt").write_text("changed")
    with pytest.raises(WorkspaceBuildError, match="changed between the dryrun and the build"):
        scheduler.build_workspace_images([plan])


def test_a_missing_base_image_is_a_clear_error(scheduler: DockerScheduler, tmp_path: Path) -> None:
    plan = plan_workspace_image("anylaunch-no-such-base:1", Workspace({str(tmp_path): ""}))
    with pytest.raises(WorkspaceBuildError, match="base image 'anylaunch-no-such-base:1'"):
        scheduler.build_workspace_images([plan])


def test_a_broken_dockerfile_reports_the_build_output(
    scheduler: DockerScheduler, busybox_image: str, tmp_path: Path
) -> None:
    root = tree(tmp_path, {WORKSPACE_DOCKERFILE: "ARG IMAGE\nFROM $IMAGE\nRUN exit 42\n"})
    plan = plan_workspace_image(busybox_image, Workspace({str(root): ""}))
    with pytest.raises(WorkspaceBuildError, match="42"):
        scheduler.build_workspace_images([plan])


def test_image_repo_pushes_to_the_registry(
    runner: Any, busybox_image: str, docker_registry: str, docker_client: Any, tmp_path: Path
) -> None:
    root = tree(tmp_path, {"hello.sh": "echo pushed\n"})
    repo = f"{docker_registry}/anylaunch-ws-test"
    app = AppDef("push", [Role("a", image=busybox_image, entrypoint="sh", args=["hello.sh"])])
    handle = runner.run(app, "local_docker", {"image_repo": repo}, workspace=str(root))
    status = runner.wait(handle, wait_interval=0.2, timeout=WAIT_S)
    assert status is not None and status.state == AppState.SUCCEEDED
    assert list(runner.log_lines(handle, "a")) == ["pushed\n"]
    tag = image_of(root, base=busybox_image, repo=repo).rsplit(":", 1)[1]
    with urllib.request.urlopen(
        f"http://{docker_registry}/v2/anylaunch-ws-test/tags/list", timeout=10
    ) as r:
        tags = json.load(r)["tags"]
    assert tag in tags
    docker_client.api.remove_image(f"{repo}:{tag}", force=True)
