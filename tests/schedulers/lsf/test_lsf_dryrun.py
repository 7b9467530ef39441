"""lsf dryrun: the rendered bsub submissions (golden files), their shell safety and the input
checks. No LSF is needed: a dryrun works offline.

Regenerate the golden files after an intended change with
``UPDATE_GOLDEN=1 pytest tests/schedulers/lsf/test_lsf_dryrun.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from anylaunch import __version__
from anylaunch.schedulers import get_scheduler_factory
from anylaunch.schedulers.common.roles import RANK0_ENV
from anylaunch.schedulers.lsf_scheduler import LsfRequest, LsfScheduler, create_scheduler
from anylaunch.specs import AppDef, Resource, Role, macros
from anylaunch.specs.api import BindMount, DeviceMount, VolumeMount
from anylaunch.specs.errors import InvalidRunConfigException, InvalidSpecError
from tests.schedulers.lsf.conftest import HOSTILE

GOLDEN = Path(__file__).parent / "golden"
JOBDIR = "/shared/jobs"


@pytest.fixture(autouse=True)
def _no_context_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The golden dryruns stamp the not-available context."""
    monkeypatch.delenv("ANYLAUNCH_CONTEXT_NAME", raising=False)


def dryrun(app: AppDef, cfg: dict[str, Any], session: str = "golden") -> tuple[LsfRequest, str]:
    """The request and its text, with its app id and anylaunch's version as placeholders."""
    info = create_scheduler(session).submit_dryrun(app, cfg)
    request = info.request
    assert isinstance(request, LsfRequest)
    text = str(info).replace(request.app_id, "{app_id}")
    return request, text.replace(f"anylaunch/version={__version__}", "anylaunch/version={version}")


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"no golden file {path}: run with UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text()


def script_line(script: str, prefix: str) -> str:
    lines = [line for line in script.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, script
    return lines[0]


def command_words(script: str) -> list[str]:
    """The words of the line that runs the replica, without its redirections to the logs."""
    words = shlex.split(script_line(script, "env "))
    if words[-1] == "&":
        words.pop()
    assert words[-4:] == [">&3", "2>&4", "3>&-", "4>&-"]
    return words[:-4]


# --- golden files ------------------------------------------------------------------------------


def test_golden_single_role() -> None:
    app = AppDef(
        "train",
        roles=[
            Role(
                "trainer",
                image="/opt/work",
                entrypoint="python",
                args=["train.py", "--out", f"/ckpt/{macros.app_id}/{macros.replica_id}"],
                resource=Resource(cpu=4, gpu=2, memMB=8192),
                env={"HF_TOKEN": "hf_s3cr3t", "LR": "0.1"},
            )
        ],
    )
    request, text = dryrun(app, {"lsf_queue": "gpu", "project": "ml-team", "jobdir": JOBDIR})
    check_golden("single_role", text)
    assert "hf_s3cr3t" not in text  # masked in what is printed...
    assert " HF_TOKEN=hf_s3cr3t " in request.jobs[0].script  # ...but submitted


def test_golden_multi_role_container() -> None:
    trainer = Role(
        "trainer",
        image="registry.local/train:1",
        entrypoint="torchrun",
        args=[
            "--rdzv-endpoint",
            f"$${{{macros.rank0_env}}}:29500",
            "--node-rank",
            macros.replica_id,
        ],
        num_replicas=2,
        resource=Resource(cpu=8, gpu=1, memMB=16384),
        port_map={"c10d": 29500},
        mounts=[
            BindMount("/data", "/data", read_only=True),
            VolumeMount("cache", "/cache"),
            DeviceMount("/dev/infiniband", "/dev/infiniband", "rw"),
        ],
        env={"IMG": macros.img_root},
    )
    ps = Role("ps", image="/opt/ps", entrypoint="./serve", args=["--app", macros.app_id])
    # host_network: two trainer replicas publishing host port 29500 could meet on one host
    cfg = {
        "jobdir": JOBDIR,
        "container_workdir": "/workspace",
        "shm_size": "2g",
        "host_network": True,
    }
    request, text = dryrun(AppDef("ddp", roles=[trainer, ps]), cfg)
    check_golden("multi_role_container", text)
    assert [(j.role, j.replica_id) for j in request.jobs] == [
        ("trainer", 0),
        ("trainer", 1),
        ("ps", 0),
    ]


def test_golden_hostile_arguments() -> None:
    role = Role(
        "echo",
        image="/opt/my dir",
        entrypoint="/usr/bin/printf",
        args=HOSTILE,
        env={"WEIRD": "$(x) 'q' \"dq\" `y`", "my.dotted-name": "ok"},
    )
    cfg = {"jobdir": "/shared/it's here", "host_network": True}
    _, text = dryrun(AppDef("hostile", roles=[role]), cfg)
    check_golden("hostile_arguments", text)


# --- what the submissions say ------------------------------------------------------------------


def test_resources_become_slots_memory_span_and_gpus() -> None:
    app = AppDef(
        "r",
        roles=[
            Role("a", image=".", entrypoint="true", resource=Resource(cpu=3, gpu=0, memMB=1500)),
            Role("b", image=".", entrypoint="true", resource=Resource(cpu=1, gpu=4, memMB=0)),
            Role("c", image=".", entrypoint="true"),  # no resources: LSF defaults
        ],
    )
    request, _ = dryrun(app, {})
    a, b, c = (job.options for job in request.jobs)
    assert a[a.index("-n") + 1] == "3"
    assert a[a.index("-R") + 1] == "span[hosts=1] rusage[mem=1500MB/job]"
    assert "-gpu" not in a
    assert b[b.index("-gpu") + 1] == "num=4"
    assert b[b.index("-R") + 1] == "span[hosts=1]"
    assert "-n" not in c and c[c.index("-R") + 1] == "span[hosts=1]"
    assert "-q" not in a and "-P" not in a  # the cluster's defaults
    assert request.app_dir == os.path.join(os.path.expanduser("~/.anylaunch/lsf"), request.app_id)


def test_rank0_first_and_the_others_wait_for_it() -> None:
    app = AppDef(
        "ranks",
        roles=[
            Role("m", image=".", entrypoint="true", num_replicas=2),
            Role("w", image=".", entrypoint="true", num_replicas=2),
        ],
    )
    request, _ = dryrun(app, {"jobdir": JOBDIR})
    rank0 = f"{request.app_id}-m-0"
    assert request.jobs[0].name == rank0 and "-w" not in request.jobs[0].options
    assert "rank0_host" in script_line(request.jobs[0].script, "printf")
    for job in request.jobs[1:]:
        assert job.options[job.options.index("-w") + 1] == f'started("{rank0}")'
        assert script_line(job.script, "h=") == 'h=$(cat "$a/rank0_host")'
    descriptions = [job.options[job.options.index("-Jd") + 1] for job in request.jobs]
    assert descriptions[3].startswith(
        f"anylaunch app={request.app_id} role=w replica=1 jobs=4 session=golden name=ranks "
        "anylaunch/context=%3C%3CNA%3E%3E "
    )


def test_macros_are_substituted_per_replica() -> None:
    role = Role(
        "w",
        image="/opt/x",
        entrypoint="echo",
        args=[macros.app_id, macros.replica_id, macros.img_root, f"$${{{macros.rank0_env}}}"],
        num_replicas=2,
    )
    request, _ = dryrun(AppDef("m", roles=[role]), {"jobdir": JOBDIR})
    for k, job in enumerate(request.jobs):
        words = command_words(job.script)
        assert words[-4:] == [request.app_id, str(k), "/opt/x", "${ANYLAUNCH_RANK0_HOST}"]
        assert f"{RANK0_ENV}=$h" in words


def test_container_jobs_run_docker_with_the_options() -> None:
    role = Role(
        "t",
        image="python:3.11",
        entrypoint="python",
        args=["-c", "print(1)"],
        resource=Resource(cpu=2, gpu=1, memMB=512),
        port_map={"a": 8080, "b": 8080, "c": 9000},
        env={"TOKEN": "s"},
    )
    request, _ = dryrun(AppDef("c", roles=[role]), {"host_network": False})
    words = command_words(request.jobs[0].script)
    docker = words[words.index("docker") :]
    assert docker[:3] == ["docker", "run", "--rm"]
    assert docker[docker.index("-p") : docker.index("-p") + 2] == ["-p", "8080:8080"]
    assert docker.count("-p") == 2 and "--shm-size=64m" in docker
    assert {"--cpus=2", "--memory=512m", "--gpus=all"} <= set(docker)
    # env values reach the container by name only: never on docker's command line
    assert "TOKEN" in docker and "TOKEN=s" not in docker
    assert docker[-4:] == ["--entrypoint=python", "python:3.11", "-c", "print(1)"]
    request, _ = dryrun(AppDef("c", roles=[role]), {"host_network": True})
    words = command_words(request.jobs[0].script)
    assert "--net=host" in words and "--ipc=host" in words and "-p" not in words


def test_runopts_are_the_documented_ones() -> None:
    opts = create_scheduler("s").run_opts()
    names = {name for name, _ in opts}
    assert names == {
        "lsf_queue",
        "project",
        "jobdir",
        "container_workdir",
        "host_network",
        "shm_size",
        "archive_url",  # the runner's option every scheduler takes
    }
    assert "bsub -q" in str(opts)


def test_the_registry_creates_the_lsf_scheduler() -> None:
    sched = get_scheduler_factory("lsf")("s")
    assert isinstance(sched, LsfScheduler) and sched.backend == "lsf"


def test_dryrun_works_without_lsf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    app = AppDef("x", roles=[Role("w", image=".", entrypoint="true")])
    request, text = dryrun(app, {"jobdir": JOBDIR})
    assert text.count("\nbsub ") == 1 and request.jobs[0].name.endswith("-w-0")


# --- bad inputs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cfg", "field"),
    [
        ({"lsf_queue": "bad queue"}, "lsf_queue"),
        ({"lsf_queue": "x" * 60}, "lsf_queue"),
        ({"project": "has space"}, "project"),
        ({"shm_size": "lots"}, "shm_size"),
        ({"container_workdir": "relative/dir"}, "container_workdir"),
        ({"jobdir": "/jobs/%J"}, "jobdir"),
        ({"jobdir": "  "}, "jobdir"),
    ],
)
def test_bad_run_options_name_the_option(cfg: dict[str, Any], field: str) -> None:
    app = AppDef("x", roles=[Role("w", image=".", entrypoint="true")])
    with pytest.raises(InvalidRunConfigException) as info:
        create_scheduler("s").submit_dryrun(app, cfg)
    assert info.value.field == field
    assert "Fix:" in str(info.value)


def test_unknown_and_mistyped_options_are_rejected() -> None:
    app = AppDef("x", roles=[Role("w", image=".", entrypoint="true")])
    with pytest.raises(InvalidRunConfigException, match="lsf_queue"):
        create_scheduler("s").submit_dryrun(app, {"lsf_queu": "normal"})
    with pytest.raises(InvalidRunConfigException):
        create_scheduler("s").submit_dryrun(app, {"host_network": "maybe"})


@pytest.mark.parametrize(
    ("role", "field"),
    [
        (Role("w", image=".", entrypoint="true", args=["a\x00b"]), "Role[w].args[0]"),
        (Role("w", image=".", entrypoint="true", env={"K": "a\x00"}), "Role[w].env['K']"),
        (Role("w", image=".", entrypoint="a=b"), "Role[w].entrypoint"),
        (Role("w", image=".", entrypoint="-x"), "Role[w].entrypoint"),
        (Role("w", image=".", entrypoint="true", env={"-K": "v"}), "Role[w].env"),
        (Role("w", image="/dir/%I", entrypoint="true"), "Role[w].image"),
        (Role("w", image="-bad:img", entrypoint="true"), "Role[w].image"),
        (
            Role("w", image=".", entrypoint="true", mounts=[BindMount("/a", "/b")]),
            "Role[w].mounts",
        ),
        (
            Role("w", image="img:1", entrypoint="true", mounts=[BindMount("/a,b", "/b")]),
            "Role[w].mounts[0]",
        ),
    ],
)
def test_roles_lsf_cannot_run_are_rejected_with_the_field(role: Role, field: str) -> None:
    with pytest.raises(InvalidSpecError) as info:
        create_scheduler("s").submit_dryrun(AppDef("x", roles=[role]), {})
    assert info.value.field == field
    assert "Fix:" in str(info.value)


def test_max_retries_is_not_supported_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    role = Role("w", image=".", entrypoint="true", max_retries=3)
    dryrun(AppDef("x", roles=[role]), {})
    assert "max_retries=3 is ignored" in caplog.text


# --- shell safety, with a real shell -----------------------------------------------------------

PRINT_ARGV = (
    "import json, os, sys; "
    "print(json.dumps({'argv': sys.argv[1:], 'env': os.environ.get('V'), "
    f"'rank0': os.environ.get('{RANK0_ENV}')}}))"
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    args=st.lists(
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
        max_size=6,
    ),
    value=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
)
@example(args=["$$", "$${x}", "$(id)", "${app_id}"], value="$$HOME")
def test_any_argument_reaches_the_program_unchanged(
    tmp_path: Path, args: list[str], value: str
) -> None:
    """The job script, run by /bin/sh as LSF would, hands the program its exact argv and env
    (after macro substitution, the spec's one rewrite: ``$$`` is a literal ``$``)."""
    role = Role(
        "w",
        image=str(tmp_path),
        entrypoint=sys.executable,
        args=["-c", PRINT_ARGV, *args],
        env={"V": value},
    )
    request, _ = dryrun(AppDef("prop", roles=[role]), {"jobdir": str(tmp_path / "jobs")})
    job = request.jobs[0]
    os.makedirs(job.log_dir, exist_ok=True)
    proc = subprocess.run(
        ["/bin/sh", "-s"], input=job.script, capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(Path(job.log_dir, "stdout.log").read_text().splitlines()[-1])
    values = macros.Values(
        img_root=str(tmp_path), app_id=request.app_id, replica_id="0", rank0_env=RANK0_ENV
    )
    assert out["argv"] == [values.substitute(arg) for arg in args]
    assert out["env"] == values.substitute(value)
    assert out["rank0"]  # this host's name
    assert not Path("/tmp/anylaunch-pwned").exists()
