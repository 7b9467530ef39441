"""The slurm scheduler's dryrun: the sbatch script, checked without a cluster.

The script is checked for what sbatch and bash will read from it (``#SBATCH`` lines per het
component, ``bash -n`` syntax), and its quoting by running the quoted words through bash.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from anylaunch import __version__
from anylaunch.schedulers.slurm.request import _APP_ID, _REPLICA_ID, _shell_word
from anylaunch.schedulers.slurm_scheduler import SlurmBatchRequest, SlurmScheduler, create_scheduler
from anylaunch.specs import AppDef, BindMount, Resource, Role, macros
from anylaunch.specs.errors import InvalidRunConfigException, InvalidSpecError

CURRENT = "22.05"


def two_roles() -> AppDef:
    trainer = Role(
        name="trainer",
        image="/shared/code",
        entrypoint="python",
        args=["train.py", "--rank", macros.replica_id, "--job", macros.app_id],
        env={"LR": "0.1", "HF_TOKEN": "hf_secret_value", "ROOT": macros.img_root},
        num_replicas=2,
        resource=Resource(cpu=4, gpu=2, memMB=8000),
        max_retries=2,
    )
    ps = Role(
        name="ps",
        image="ghcr.io/org/image:1",  # not a path: runs in the job's directory
        entrypoint="ps_server",
        resource=Resource(cpu=1, gpu=0, memMB=1000),
    )
    return AppDef("train", [trainer, ps])


@pytest.fixture(autouse=True)
def _no_context_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dryruns compared to literals stamp the not-available context."""
    monkeypatch.delenv("ANYLAUNCH_CONTEXT_NAME", raising=False)


def dryrun(app: AppDef, version: str = CURRENT, **cfg: object) -> SlurmBatchRequest:
    sched = create_scheduler("test", slurm_version=version)
    request = sched.submit_dryrun(app, {"job_dir": "/shared/jobs/run1", **cfg}).request
    assert isinstance(request, SlurmBatchRequest)
    return request


def sbatch_components(script: str) -> list[list[str]]:
    """The ``#SBATCH`` flags of each het component, as sbatch reads them (up to the first
    command line)."""
    components: list[list[str]] = [[]]
    for line in script.splitlines()[1:]:
        if line and not line.startswith("#"):
            break
        if line == "#SBATCH hetjob":
            components.append([])
        elif line.startswith("#SBATCH "):
            components[-1].append(line[len("#SBATCH ") :])
    return components


def test_two_roles_make_two_het_components_with_their_resources() -> None:
    script = dryrun(two_roles(), partition="gpu", time="1:00:00", comment="my run").materialize()
    job, ps = sbatch_components(script)
    assert job == [
        "--chdir=/shared/jobs/run1",
        "--output=/shared/jobs/run1/slurm-%j.out",
        "--open-mode=append",
        "--requeue",  # max_retries > 0
        # the user's comment, then the job's metadata (anylaunch.specs.metadata_keys)
        f'--comment="my run anylaunch/context=%3C%3CNA%3E%3E anylaunch/version={__version__}'
        ' anylaunch/scheduler=slurm"',
        "--job-name=train:trainer",
        "--ntasks=2",
        "--cpus-per-task=4",
        "--mem-per-cpu=2000M",
        "--gpus-per-task=2",
        "--partition=gpu",
        "--time=1:00:00",
    ]
    assert ps == [
        "--job-name=train:ps",
        "--ntasks=1",
        "--cpus-per-task=1",
        "--mem-per-cpu=1000M",
        "--partition=gpu",
        "--time=1:00:00",
    ]
    # one srun: role 0's ranks 0-1, role 1's rank 2, each in its own directory
    srun = script[script.index("\nsrun ") : script.index("\nrc=$?")]
    assert "--het-group=0" in srun and "--het-group=1" in srun
    assert "--chdir=/shared/code" in srun and "--chdir=/shared/jobs/run1 " in srun
    assert "local rid=$((SLURM_PROCID - 0))" in script
    assert "local rid=$((SLURM_PROCID - 2))" in script
    assert 'scontrol requeue "$SLURM_JOB_ID"' in script
    assert "-lt 2 ]" in script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


def test_macros_expand_in_the_replica_and_img_root_is_the_role_directory() -> None:
    script = dryrun(two_roles()).materialize()
    line = next(x for x in script.splitlines() if "anylaunch_replica trainer" in x)
    assert line.endswith('train.py --rank "$rid" --job "$SLURM_JOB_ID"')
    assert "export ROOT=/shared/code" in script


def test_one_role_is_a_plain_job() -> None:
    app = AppDef(
        "echo",
        [Role("echo", image=".", entrypoint="echo", args=["hi"], resource=Resource(1, 0, 100))],
    )
    script = dryrun(app).materialize()
    assert "hetjob" not in script and "--het-group" not in script
    assert "--no-requeue" in sbatch_components(script)[0]
    assert "scontrol requeue" not in script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("22.05", ["--gpus-per-task=2"]),
        ("19.05", ["--gpus-per-task=2"]),
        ("18.08", ["--gres=gpu:2", "--ntasks-per-node=1"]),
    ],
)
def test_gpu_flag_follows_the_slurm_version(version: str, expected: list[str]) -> None:
    trainer = sbatch_components(dryrun(two_roles(), version=version).materialize())[0]
    gpu_flags = [f for f in trainer if f.startswith(("--gpus", "--gres", "--ntasks-per-node"))]
    assert gpu_flags == expected


def test_secrets_are_masked_in_the_dryrun_but_submitted() -> None:
    sched = create_scheduler("test", slurm_version=CURRENT)
    info = sched.submit_dryrun(two_roles(), {"job_dir": "/shared/jobs/run1"})
    shown = repr(info)
    assert "hf_secret_value" not in shown
    assert "export HF_TOKEN='***'" in shown
    assert "export LR=0.1" in shown
    assert shown.startswith("$ sbatch --parsable <<'ANYLAUNCH_EOF'\n#!/bin/bash")
    assert "export HF_TOKEN=hf_secret_value" in info.request.materialize()


def test_runopts_reach_the_script() -> None:
    cfg: dict[str, object] = {
        "account": "proj",
        "qos": "high",
        "constraint": "a100&ib",
        "mail_user": "me@example.com",
        "mail_type": "END,FAIL",
        "exclusive": True,
        "sbatch_args": ["--nice=10", "--reservation=r 1"],
    }
    job, ps = sbatch_components(dryrun(two_roles(), **cfg).materialize())
    assert {"--mail-user=me@example.com", "--mail-type=END,FAIL"} <= set(job)
    for component in (job, ps):
        assert {
            "--account=proj",
            "--qos=high",
            '--constraint="a100&ib"',
            "--exclusive",
            "--nice=10",
            '--reservation="r 1"',
        } <= set(component)
    assert not any(f.startswith("--mail") for f in ps)  # job-wide flags: first component only


def test_sbatch_reads_quoted_values_back() -> None:
    # how sbatch unquotes an #SBATCH value: "..." with \\ and \" escapes
    comment = 'it\'s "quoted" \\ $HOME'
    job = sbatch_components(dryrun(two_roles(), comment=comment).materialize())[0]
    value = next(f for f in job if f.startswith("--comment="))[len("--comment=") :]
    assert value.startswith('"') and value.endswith('"')
    assert re.sub(r"\\(.)", r"\1", value[1:-1]).startswith(comment + " anylaunch/context=")


@pytest.mark.parametrize(
    ("cfg", "field"),
    [
        ({"time": "an hour"}, "time"),
        ({"mail_type": "END,SOMETIMES"}, "mail_type"),
        ({"sbatch_args": ["nice=10"]}, "sbatch_args"),
        ({"sbatch_args": ["--x=1\n#SBATCH --y"]}, "sbatch_args"),
        ({"comment": "two\nlines"}, "comment"),
        ({"partition": 3}, "partition"),
        ({"no_such_option": "x"}, "no_such_option"),
        ({"job_dir": "/a\nb"}, "job_dir"),
    ],
)
def test_bad_runopts_name_the_option(cfg: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidRunConfigException, match=field):
        dryrun(two_roles(), **cfg)


def test_apps_slurm_cannot_run_are_rejected() -> None:
    sched = create_scheduler("test", slurm_version=CURRENT)
    no_resource = AppDef("x", [Role("w", image="", entrypoint="true")])
    with pytest.raises(InvalidSpecError, match="resource"):
        sched._validate(no_resource, "slurm", {})
    mounted = AppDef(
        "x",
        [
            Role(
                "w",
                image="",
                entrypoint="true",
                resource=Resource(1, 0, 10),
                mounts=[BindMount("/a", "/b")],
            )
        ],
    )
    with pytest.raises(InvalidSpecError, match="mounts"):
        sched._validate(mounted, "slurm", {})
    nul = AppDef(
        "x", [Role("w", image="", entrypoint="echo", args=["a\x00b"], resource=Resource(1, 0, 10))]
    )
    with pytest.raises(InvalidSpecError, match=r"args\[0\]"):
        sched.submit_dryrun(nul, {})


def test_scheduler_arguments_are_validated() -> None:
    with pytest.raises(InvalidSpecError, match="squeue_ttl"):
        SlurmScheduler("s", squeue_ttl=-1)
    with pytest.raises(InvalidSpecError, match="slurm_version"):
        SlurmScheduler("s", slurm_version="latest")


def test_runopts_are_listed_with_help() -> None:
    opts = create_scheduler("test").run_opts()
    names = {name for name, _ in opts}
    assert {
        "partition",
        "time",
        "account",
        "qos",
        "constraint",
        "comment",
        "mail_user",
        "mail_type",
        "job_dir",
        "exclusive",
        "sbatch_args",
    } <= names
    assert all(opt.help for _, opt in opts)


def test_cli_dryrun_prints_the_script(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "anylaunch.cli.main",
            "run",
            "--dryrun",
            "-s",
            "slurm",
            "-cfg",
            "partition=debug,time=10",
            "utils.echo",
            "--msg",
            "hello slurm",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "#!/bin/bash" in result.stdout
    assert "#SBATCH --partition=debug" in result.stdout
    assert "#SBATCH --time=10" in result.stdout
    assert "'hello slurm'" in result.stdout
    assert not list(tmp_path.glob("slurm-*"))  # nothing was submitted


# --- quoting: what bash reads back is what was given ------------------------------------------

_TEXT = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)))


@settings(max_examples=150, deadline=None)
@example(parts=["'"])
@example(parts=["''", "x'"])
@example(parts=["'", _APP_ID, "' --role '' x"])
@example(parts=["", _REPLICA_ID, ""])
@given(parts=st.lists(st.one_of(_TEXT, st.sampled_from([_APP_ID, _REPLICA_ID])), max_size=5))
def test_shell_words_read_back_byte_for_byte(parts: list[str]) -> None:
    value = "".join(parts)
    word = _shell_word(value)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_JOB_ID": "4242", "rid": "7"}
    out = subprocess.run(
        ["bash", "-c", f"printf '%s' {word}"], capture_output=True, env=env, check=True
    ).stdout
    expected = value.replace(_APP_ID, "4242").replace(_REPLICA_ID, "7")
    assert out == expected.encode("utf-8", "surrogateescape")


def test_the_printed_dryrun_is_safe_to_paste_whatever_the_args_hold(tmp_path: Path) -> None:
    """Pasted into bash (with ``cat`` standing in for sbatch), the printed command feeds
    exactly the script: an argument that is the here-document's terminator ends nothing."""
    sched = create_scheduler("test", slurm_version=CURRENT)
    app = AppDef(
        "paste",
        [
            Role(
                "w",
                "",
                entrypoint="echo",
                args=["ANYLAUNCH_EOF", "EOF", "$(rm -rf x)"],
                resource=Resource(cpu=1, gpu=0, memMB=64),
            )
        ],
    )
    info = sched.submit_dryrun(app, {"job_dir": str(tmp_path)})
    pasted = repr(info).replace("$ sbatch --parsable", "cat", 1)
    out = subprocess.run(["bash", "-c", pasted], capture_output=True, text=True, check=True)
    assert out.stdout == info.request.materialize(True)
